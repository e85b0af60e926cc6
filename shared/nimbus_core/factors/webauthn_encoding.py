"""What both WebAuthn ceremonies (registration and assertion) share, and no py_webauthn import: the
encodings (unpadded base64url, strict for what a browser sends; the ids a response names), the
shape a browser's answer must have before py_webauthn reads it (sizes, not made in a frame of another
origin's page), how long a challenge lives, and the one refusal every invalid response raises.

Every function's guard may import this module (ARCHITECTURE principle 7): py_webauthn (and through
it cryptography, cbor2, pyOpenSSL, pyasn1) is imported only inside the functions that need it, so
only the WebAuthn routes pay that import cost (a unit test checks it).

Every invalid response, whatever its shape, raises :class:`PasskeyError` and nothing else; invalid
*arguments* from our own code (a relying party without origins, an empty username) raise ``ValueError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger

if TYPE_CHECKING:
    from collections.abc import Iterable

    from webauthn.helpers.structs import UserVerificationRequirement

    from nimbus_core.domain.models import SecondFactor
    from nimbus_core.platform.settings import RelyingParty

CHALLENGE_SECONDS: Final = 300
"""How long a challenge is valid; also the browser's timeout hint in the options."""

_MIN_CHALLENGE_BYTES: Final = 16

_log = Logger(child=True)

# WebAuthn caps credential ids at 1023 bytes; user handles at 64 bytes.
MAX_CREDENTIAL_ID_BYTES: Final = 1023
MAX_USER_HANDLE_BYTES: Final = 64
# The longest string accepted in a response field. A "none" attestation object with an RSA-2048 key is
# about 400 bytes and a packed one with a certificate chain a few KiB; this only stops waste on junk.
_MAX_FIELD_CHARS: Final = 32 * 1024
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


class PasskeyError(Exception):
    """A WebAuthn response that must be refused: malformed, not for us, or not proven.

    The message says why, for logs only; the API answers a fixed error code, never this text.
    """


def credential_id_of(response: object) -> bytes:
    """The raw credential id an assertion (or attestation) response names, to find the stored key.

    ``rawId`` must be canonical unpadded base64url of 1..1023 bytes and ``id`` must be the same text.
    Raises :class:`PasskeyError` otherwise. Does not import py_webauthn.
    """
    if not isinstance(response, dict):
        raise PasskeyError("response is not an object")
    raw_id, text_id = response.get("rawId"), response.get("id")
    if not isinstance(raw_id, str) or raw_id != text_id:
        raise PasskeyError("response id and rawId missing or different")
    decoded = strict_b64url_decode(raw_id)
    if not 0 < len(decoded) <= MAX_CREDENTIAL_ID_BYTES:
        raise PasskeyError("credential id is empty or longer than 1023 bytes")
    return decoded


def user_handle_of(response: object) -> str:
    """The user handle (our user id, set at enrolment) of a passkey's assertion; else PasskeyError."""
    inner = response.get("response") if isinstance(response, dict) else None
    handle = inner.get("userHandle") if isinstance(inner, dict) else None
    if not isinstance(handle, str):
        raise PasskeyError("no userHandle: not a discoverable credential's answer")
    decoded = strict_b64url_decode(handle)
    if not 0 < len(decoded) <= MAX_USER_HANDLE_BYTES:
        raise PasskeyError("userHandle is empty or longer than 64 bytes")
    return decoded.decode(errors="replace")  # not UTF-8: no id of ours, which the caller checks


def strict_b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url (py_webauthn's decoder silently drops characters it does not know)."""
    if len(text) > _MAX_FIELD_CHARS or len(text) % 4 == 1 or not _BASE64URL.fullmatch(text):
        raise PasskeyError("not unpadded base64url")
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise PasskeyError("not unpadded base64url") from exc
    if base64.urlsafe_b64encode(decoded).rstrip(b"=").decode() != text:
        raise PasskeyError("not canonical base64url")
    return decoded


def check_shape(response: object, fields: tuple[str, ...]) -> None:
    """A dict with the ids and the given ``response`` fields as bounded strings (py_webauthn checks more)."""
    if not isinstance(response, dict):
        raise PasskeyError("response is not an object")
    inner = response.get("response")
    if not isinstance(inner, dict):
        raise PasskeyError("response.response is not an object")
    for name, value in [(n, response.get(n)) for n in ("id", "rawId")] + [(n, inner.get(n)) for n in fields]:
        if not isinstance(value, str) or not value or len(value) > _MAX_FIELD_CHARS:
            raise PasskeyError(f"{name} missing, empty, not a string or too long")
    handle = inner.get("userHandle")
    if isinstance(handle, str) and len(handle) > _MAX_FIELD_CHARS:
        raise PasskeyError("userHandle too long")


def check_not_framed(response: dict[str, Any]) -> None:
    """Refuse an assertion the browser made inside a frame of another origin's page: its client data
    says ``crossOrigin: true`` or names a ``topOrigin`` (py_webauthn 3.0.1 reads the first and
    checks neither). Our origin in a frame on a stranger's page is how a page that is not ours gets a
    person's passkey to sign in for it (CONTRACT section 16)."""
    try:
        client_data = json.loads(strict_b64url_decode(response["response"]["clientDataJSON"]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PasskeyError("clientDataJSON is not JSON") from exc
    if not isinstance(client_data, dict):
        raise PasskeyError("clientDataJSON is not an object")
    if client_data.get("crossOrigin", False) is not False or "topOrigin" in client_data:
        raise PasskeyError("authentication refused: made in a frame of another origin's page")


def b64url(data: bytes) -> str:
    """Unpadded base64url: how WebAuthn's JSON carries bytes, and how we store keys and challenges."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    """Bytes we stored with :func:`b64url` (client input goes through the strict decoder instead).

    Stored data is ours or an import's, but a value no encoder makes raises :class:`PasskeyError`,
    so a damaged key is a refused answer, never a 500.
    """
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise PasskeyError("stored value is not base64url") from exc


def stored_credential_ids(factors: Iterable[SecondFactor]) -> list[bytes]:
    """The raw credential ids of the stored ``factors`` (to name in options). A damaged one is
    left out and logged as an error naming its factor, so the user's other factors still work."""
    found = []
    for factor in factors:
        try:
            found.append(b64url_decode(factor.credential_id or ""))
        except PasskeyError:
            _log.error(
                "stored WebAuthn credential id is not base64url: the key is left out",
                extra={"factor": factor.id},
            )
    return found


def user_verification(rp: RelyingParty, *, required: bool = False) -> UserVerificationRequirement:
    """What the options ask of user verification: "required" for a passkey, else as configured."""
    from webauthn.helpers.structs import UserVerificationRequirement

    return UserVerificationRequirement("required" if required else rp.user_verification)


def refused(ceremony: str, exc: Exception) -> PasskeyError:
    """The refusal for whatever py_webauthn raised while parsing or verifying a response.

    Everything is caught, not a list of types: py_webauthn 3.0.1 wraps most failures in
    ``InvalidRegistrationResponse``/``InvalidAuthenticationResponse`` but lets others through (shape
    errors are ``InvalidJSONStructure``, a malformed COSE key a ``KeyError``, ``TypeError`` or
    ``IndexError``, an off-curve point or non-ASCII base64 a ``ValueError``, all seen in the fuzz tests),
    and the attestation formats it verifies on request of the *client* (packed, tpm, android-key,
    apple, fido-u2f) parse certificates with cryptography, pyOpenSSL and pyasn1, each with its own
    exceptions. Only calls on the response are inside the ``try``; the cause is chained for the logs.
    """
    return PasskeyError(f"{ceremony} refused: {type(exc).__name__}: {str(exc)[:200]}")


def check_challenge(expected_challenge: bytes) -> None:
    """Refuse to verify against a challenge we did not make: missing, or under 16 bytes."""
    if not isinstance(expected_challenge, bytes) or len(expected_challenge) < _MIN_CHALLENGE_BYTES:
        raise PasskeyError("expected challenge missing or shorter than 16 bytes")
