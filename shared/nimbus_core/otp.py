"""One-time codes of the second factors: TOTP (RFC 6238, by pyotp) and backup codes.

TOTP is SHA-1, 6 digits, 30 seconds, with one step of drift either way (CONTRACT section 9). A code
is accepted at most once: :func:`totp_step` answers the *time step* a code belongs to, and the
caller stores the last step used on the factor, conditionally, so the same code (or an older one)
can never be replayed, not even by two concurrent requests.

Backup codes are 10 per set, 16 characters of Crockford base32 (80 random bits each), shown to the
user grouped as ``XXXX-XXXX-XXXX-XXXX`` and stored only as SHA-256 hashes: a fast hash is right for
80 random bits, as for session secrets.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

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


def totp_step(secret: str, code: str, now: float) -> int | None:
    """The time step ``code`` is valid for (now, or one step either side), or None.

    Every candidate step is compared in constant time, so timing tells nothing about which one
    (or whether any) matched.
    """
    if len(code) != TOTP_DIGITS or not code.isascii() or not code.isdigit():
        return None
    import pyotp

    totp = pyotp.TOTP(secret, digits=TOTP_DIGITS, interval=TOTP_PERIOD)
    current = int(now) // TOTP_PERIOD
    found = None
    for step in range(current - TOTP_DRIFT_STEPS, current + TOTP_DRIFT_STEPS + 1):
        if hmac.compare_digest(totp.generate_otp(step), code) and found is None:
            found = step
    return found


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
