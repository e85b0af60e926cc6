"""The SecondFactors handler together with py_webauthn, as a cold container whose first request runs
a WebAuthn ceremony imports them. The handler import alone leaves py_webauthn out (the passkeys
module imports it inside the functions that use it); the difference is what that saves the others."""

import webauthn  # noqa: F401
import webauthn.helpers  # noqa: F401

import factors_api.handler  # noqa: F401
