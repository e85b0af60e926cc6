"""One-time codes of the second factors: TOTP (RFC 6238) and backup codes.

TOTP is SHA-1, 6 digits, 30 seconds, with one step of drift either way (CONTRACT section 9). A code
is accepted at most once: :func:`totp_step` answers the *time step* a code belongs to, and the
caller stores the last step used on the factor, conditionally, so the same code (or an older one)
can never be replayed, not even by two concurrent requests.

Secrets Nimbus makes are 160 bits (pyotp makes them and their URI). Codes are checked with
cryptography's HOTP, told not to enforce a key length: upstream Cumulonimbus's secrets are 16 base32
characters (an 80-bit key, its otplib's default), and pyotp refuses keys under 112 bits with no
parameter to say otherwise. A stored secret is read as upstream's decoder reads it: either case,
trailing ``=`` ignored, every whole byte its characters spell. One that cannot be read is a wrong
answer, logged as an error (never the secret itself), not an exception.

Backup codes are 10 per set, 16 characters of Crockford base32 (80 random bits each), shown to the
user grouped as ``XXXX-XXXX-XXXX-XXXX`` and stored only as SHA-256 hashes: a fast hash is right for
80 random bits, as for session secrets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from aws_lambda_powertools import Logger

_log = Logger(child=True)

TOTP_DIGITS = 6
TOTP_PERIOD = 30
TOTP_ALGORITHM = "SHA1"
TOTP_DRIFT_STEPS = 1
BACKUP_CODES_PER_SET = 10
_BACKUP_CHARS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
_BACKUP_LENGTH = 16  # 16 x 5 bits = 80 bits
_LOOKALIKES = str.maketrans("OIL", "011")


def new_totp_secret() -> str:
    """A fresh TOTP seed: 160 random bits in base32, as authenticator apps expect."""
    import pyotp  # imported here: only the second-factor routes pay for it

    return pyotp.random_base32(32)


def totp_uri(secret: str, *, account: str, issuer: str) -> str:
    """The ``otpauth://totp/...`` URI for a QR code."""
    import pyotp

    return pyotp.TOTP(secret, digits=TOTP_DIGITS, interval=TOTP_PERIOD).provisioning_uri(
        name=account, issuer_name=issuer
    )


def totp_step(secret: str, code: str, now: float, *, factor_id: str = "") -> int | None:
    """The time step ``code`` is valid for (now, or one step either side), or None.

    ``secret`` is the stored base32 secret, of any length upstream or Nimbus made; one that is not
    base32 matches nothing and is logged (with ``factor_id``) as the error it is. Every candidate
    step is compared in constant time, so timing tells nothing about which one (or whether any)
    matched.
    """
    if len(code) != TOTP_DIGITS or not code.isascii() or not code.isdigit():
        return None
    key = totp_key(secret)
    if key is None:
        _log.error(
            "stored TOTP secret is not base32: the answer is refused",
            extra={"factor": factor_id, "length": len(secret)},
        )
        return None
    # cryptography's HOTP is RFC 4226; RFC 6238's TOTP is HOTP of the time step. Imported here: only
    # the second-factor routes pay for it.
    from cryptography.hazmat.primitives.hashes import SHA1
    from cryptography.hazmat.primitives.twofactor.hotp import HOTP

    # SHA-1 is what RFC 6238 and every authenticator app use; HMAC-SHA-1 is not weakened by SHA-1's
    # collisions.
    hotp = HOTP(key, TOTP_DIGITS, SHA1(), enforce_key_length=False)  # noqa: S303
    current = int(now) // TOTP_PERIOD
    found = None
    for step in range(current - TOTP_DRIFT_STEPS, current + TOTP_DRIFT_STEPS + 1):
        if hmac.compare_digest(hotp.generate(step), code.encode()) and found is None:
            found = step
    return found


_BASE32 = re.compile(r"[A-Z2-7]+")


def totp_key(secret: str) -> bytes | None:
    """The key bytes of a stored base32 secret, or None when it spells none.

    Read as upstream's decoder (npm ``thirty-two``) reads it, so every secret upstream made works:
    either case, trailing ``=`` ignored, and the bits left over after the last whole byte dropped
    (a length RFC 4648 would call unpadded or wrong).
    """
    if not secret.isascii():
        return None  # before upper(): "ß".upper() is "SS"
    text = secret.upper().rstrip("=")
    if not _BASE32.fullmatch(text) or len(text) * 5 // 8 == 0:
        return None
    # Filled up to a whole base32 block with zero bits (which always decodes), then cut back to the
    # whole bytes the secret itself spells.
    return base64.b32decode(text + "A" * (-len(text) % 8))[: len(text) * 5 // 8]


def new_backup_codes() -> list[str]:
    """A new set of backup codes, as shown to the user (once)."""
    return [
        _group("".join(secrets.choice(_BACKUP_CHARS) for _ in range(_BACKUP_LENGTH)))
        for _ in range(BACKUP_CODES_PER_SET)
    ]


def backup_code_hash(code: str) -> str | None:
    """The stored hash of a backup code as typed (case, spaces and dashes ignored; Crockford's
    O/I/L read as 0/1/1), or None when it cannot be one."""
    text = code.upper().replace("-", "").replace(" ", "")
    text = text.translate(_LOOKALIKES)
    if len(text) != _BACKUP_LENGTH or any(c not in _BACKUP_CHARS for c in text):
        return None
    return hashlib.sha256(f"backup:{text}".encode()).hexdigest()


# Upstream Cumulonimbus's backup codes (CONTRACT section 15): 20 hex characters, stored as the
# SHA-512 hex digest of the code. Imported digests are kept under this prefix beside ours until the
# user makes a new set; each still works once.
LEGACY_BACKUP_PREFIX = "sha512:"
_LEGACY_BACKUP = re.compile(r"[0-9a-f]{20}")


def legacy_backup_code_key(sha512_hex: str) -> str:
    """The stored key of an imported upstream backup-code digest."""
    return f"{LEGACY_BACKUP_PREFIX}{sha512_hex.lower()}"


def backup_code_keys(code: str) -> list[str]:
    """The stored keys ``code`` as typed may be: ours (:func:`backup_code_hash`), and an imported
    upstream code's (20 hex characters, any case; spaces and dashes ignored). Empty when neither."""
    keys = [key for key in (backup_code_hash(code),) if key is not None]
    text = code.lower().replace("-", "").replace(" ", "")
    if _LEGACY_BACKUP.fullmatch(text):
        keys.append(legacy_backup_code_key(hashlib.sha512(text.encode()).hexdigest()))
    return keys


def _group(code: str) -> str:
    return "-".join(code[i : i + 4] for i in range(0, len(code), 4))
