"""The SecondFactors handler together with py_webauthn, as a cold container whose first request runs
a WebAuthn ceremony imports them: the handler import itself leaves py_webauthn out (nimbus_core.passkeys imports
it inside the functions that use it), and this module measures what that saves the other requests."""

import webauthn
import webauthn.helpers  # noqa: F401

import factors_api.handler  # noqa: F401
