"""Password hashing: argon2id with the OWASP profile (19 MiB, t=2, p=1), rehash on login when it changes."""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError


@cache
def _hasher() -> PasswordHasher:
    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    """An argon2id PHC string for ``password`` (salted; never logged, never returned by the API)."""
    return _hasher().hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    """Whether ``password`` matches ``stored_hash``; argon2 compares in constant time."""
    try:
        return _hasher().verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    """Whether the stored hash was made with other parameters than the current profile."""
    return _hasher().check_needs_rehash(stored_hash)
