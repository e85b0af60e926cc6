"""Password hashing: argon2id with the OWASP profile (19 MiB, t=2, p=1), rehash on login when it changes."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher


@cache
def _hasher() -> PasswordHasher:
    # Imported on first use: every function's guard can reverify, but only some ever hash.
    from argon2 import PasswordHasher

    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    """An argon2id PHC string for ``password`` (salted; never logged, never returned by the API)."""
    return _hasher().hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    """Whether ``password`` matches ``stored_hash``; argon2 compares in constant time."""
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return _hasher().verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    """Whether the stored hash was made with other parameters than the current profile."""
    return _hasher().check_needs_rehash(stored_hash)
