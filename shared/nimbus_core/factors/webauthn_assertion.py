"""Answering with a WebAuthn key (a security key as a second factor, a passkey alone): the request
options for ``navigator.credentials.get`` and the verified assertion, the key's new signature counter.

Pure functions over plain data; py_webauthn is imported inside them, never at module import (see
:mod:`nimbus_core.factors.webauthn_encoding`).
"""

from __future__ import annotations

import hmac
import json
from typing import TYPE_CHECKING, Any, Final

from nimbus_core.factors.webauthn_encoding import (
    CHALLENGE_SECONDS,
    PasskeyError,
    check_challenge,
    check_not_framed,
    check_shape,
    credential_id_of,
    refused,
    user_verification,
)

if TYPE_CHECKING:
    from nimbus_core.platform.settings import RelyingParty

_MAX_SIGN_COUNT: Final = 2**32 - 1


def authentication_options(
    rp: RelyingParty, *, credential_ids: list[bytes], passkey: bool = False
) -> tuple[dict[str, Any], bytes]:
    """PublicKeyCredentialRequestOptions for ``navigator.credentials.get`` and their challenge.

    ``credential_ids`` may answer (allowCredentials): a second factor's user's keys; none for a
    passkey sign-in (the authenticator offers the passkeys it holds for us). A ``passkey`` answer
    requires user verification. ``ValueError`` when a second factor has no key to ask for.
    """
    from webauthn import generate_authentication_options
    from webauthn.helpers import options_to_json
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

    if not credential_ids and not passkey:
        raise ValueError("authentication options need at least one enrolled credential")
    options = generate_authentication_options(
        rp_id=rp.id,
        timeout=CHALLENGE_SECONDS * 1000,
        allow_credentials=[PublicKeyCredentialDescriptor(id=bytes(cid)) for cid in credential_ids],
        user_verification=user_verification(rp, required=passkey),
    )
    return json.loads(options_to_json(options)), options.challenge


def verify_authentication(
    rp: RelyingParty,
    *,
    response: dict[str, Any],
    expected_challenge: bytes,
    credential_id: bytes,
    credential_public_key: bytes,
    current_sign_count: int,
    passkey: bool = False,
) -> int:
    """Verify the browser's answer to :func:`authentication_options` against one stored key.

    ``credential_id``, ``credential_public_key`` and ``current_sign_count`` are the stored key's (found
    with :func:`credential_id_of`; the count as an ``int``, not DynamoDB's ``Decimal``). Returns the
    new signature counter, to store (compare-and-set it, so two racing assertions cannot both pass). Raises
    :class:`PasskeyError` when the response names another credential, its challenge, origin or rp id
    is not ours, the user was not present (or not verified when ``rp.user_verification`` is
    "required"), the signature does not verify with the stored key, or the counter did not grow while
    either counter is non-zero (a cloned key or a replay; authenticators without a counter send 0).
    A ``passkey`` answer must carry user verification whatever is configured.
    """
    check_shape(response, ("clientDataJSON", "authenticatorData", "signature"))
    check_challenge(expected_challenge)
    if type(current_sign_count) is not int or not 0 <= current_sign_count <= _MAX_SIGN_COUNT:
        raise PasskeyError("authentication refused: the stored signature counter is not a 32-bit count")
    # py_webauthn 3.0.1 checks only that id and rawId agree with each other, not that they name the key
    # the signature is checked with; an assertion for another credential must not pass as this one's.
    if not hmac.compare_digest(credential_id_of(response), credential_id):
        raise PasskeyError("authentication refused: the response is for another credential")
    check_not_framed(response)

    from webauthn import verify_authentication_response
    from webauthn.helpers import parse_authentication_credential_json

    try:
        credential = parse_authentication_credential_json(response)
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=expected_challenge,
            expected_rp_id=rp.id,
            expected_origin=list(rp.origins),
            credential_public_key=credential_public_key,
            credential_current_sign_count=current_sign_count,
            require_user_verification=passkey or rp.user_verification == "required",
        )
    except Exception as exc:  # see _refused: any failure on hostile input is a refusal
        raise refused("authentication", exc) from exc
    return verified.new_sign_count
