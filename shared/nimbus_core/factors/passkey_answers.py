"""What a browser's WebAuthn answer must be before py_webauthn reads it: its shape and sizes, its
ids in strict base64url, and not made in a frame of another origin's page. No py_webauthn import:
the guard of every function may import this (ARCHITECTURE principle 7)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Final

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
