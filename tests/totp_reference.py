"""TOTP codes computed here, independently of any OTP library: what an authenticator app shows.

RFC 4226's HOTP (HMAC-SHA-1 of the 8-byte big-endian counter, dynamic truncation to 31 bits, the
last ``digits`` decimal digits) over RFC 6238's time steps (``floor(t / 30)``), with the standard
library only. The secret is base32 of any length, either case, padded or not: the key is every
whole byte its characters spell, as an app reads it (and as upstream's decoder, npm ``thirty-two``,
does). Tests check Nimbus's verification against these codes, and these codes against the RFCs'
own vectors (tests/unit/test_otp.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac


def base32_key(secret: str) -> bytes:
    """The key bytes of a base32 secret: case and trailing ``=`` ignored, leftover bits dropped."""
    text = secret.upper().rstrip("=")
    whole = len(text) * 5 // 8
    return base64.b32decode(text + "A" * (-len(text) % 8))[:whole]


def hotp(key: bytes, counter: int, digits: int = 6) -> str:
    """RFC 4226 section 5.3: HOTP(K, C) = Truncate(HMAC-SHA-1(K, C)) mod 10^digits."""
    mac = hmac.new(key, counter.to_bytes(8, "big"), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    binary = int.from_bytes(mac[offset : offset + 4], "big") & 0x7FFFFFFF
    return str(binary % 10**digits).zfill(digits)


def totp(secret: str, at: float, *, digits: int = 6, period: int = 30) -> str:
    """RFC 6238 section 4: HOTP with the time step ``floor(at / period)`` as its counter."""
    return hotp(base32_key(secret), int(at) // period, digits)


def wrong_code(secret: str, at: float, *, steps: int = 1, period: int = 30) -> str:
    """A code no authenticator shows for ``secret`` within ``steps`` time steps of ``at``: the
    drift Nimbus accepts is one step either way, so a code checked only against the current step
    is accepted, now and then, as a neighbour's (one run in a few hundred thousand)."""
    shown = {totp(secret, at + n * period, period=period) for n in range(-steps, steps + 1)}
    return next(c for c in ("000000", "111111", "222222", "333333") if c not in shown)
