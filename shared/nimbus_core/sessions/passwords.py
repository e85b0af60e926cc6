"""Password hashing: argon2id with the OWASP profile (19 MiB, t=2, p=1), rehash on login when it changes.

Accounts moved from an upstream Cumulonimbus deployment (CONTRACT section 15) arrive with bcrypt
hashes (``$2b$15$...``). They verify with pyca's bcrypt, and count as needing a rehash, so the first
login or reverification that proves the password replaces them with argon2id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher


@dataclass(frozen=True)
class Argon2Profile:
    """The cost parameters of argon2id: passes, memory in KiB, lanes."""

    time_cost: int
    memory_cost: int
    parallelism: int


# OWASP's argon2id profile: what every deployed function hashes with.
PRODUCTION_PROFILE = Argon2Profile(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# The same argon2id at its smallest cost, for test harnesses (the in-process stack, a local API
# started for a test suite): every password is still hashed, verified and rehashed by argon2, in
# milliseconds instead of the production profile's tens of them. Only code running in the process can
# select it (use_profile); no setting of a deployed stack reaches it.
TEST_PROFILE = Argon2Profile(time_cost=1, memory_cost=8, parallelism=1)

_profile = PRODUCTION_PROFILE


def use_profile(profile: Argon2Profile) -> None:
    """Hash with ``profile`` from now on in this process (a test harness's choice; see TEST_PROFILE).
    Hashes made under another profile still verify, and count as needing a rehash."""
    global _profile  # noqa: PLW0603 - one profile per process, as a deployed function has
    _profile = profile
    _hasher.cache_clear()


@cache
def _hasher() -> PasswordHasher:
    # Imported on first use: every function's guard can reverify, but only some ever hash.
    from argon2 import PasswordHasher

    return PasswordHasher(_profile.time_cost, _profile.memory_cost, _profile.parallelism)


def hash_password(password: str) -> str:
    """An argon2id PHC string for ``password`` (salted; never logged, never returned by the API)."""
    return _hasher().hash(password)


# The prefixes of the bcrypt hashes upstream's library wrote (and its relatives'): never argon2's "$argon2".
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
# bcrypt reads at most 72 bytes of a password; upstream's library (node's bcrypt) cut longer ones there.
_BCRYPT_MAX_BYTES = 72


def is_bcrypt(stored_hash: str) -> bool:
    """Whether ``stored_hash`` is an imported bcrypt hash (replaced at the next proven password)."""
    return stored_hash.startswith(_BCRYPT_PREFIXES)


def verify_password(stored_hash: str, password: str) -> bool:
    """Whether ``password`` matches ``stored_hash`` (argon2id, or an imported bcrypt hash); both
    libraries compare in constant time."""
    if is_bcrypt(stored_hash):
        return _verify_bcrypt(stored_hash, password)
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return _hasher().verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _verify_bcrypt(stored_hash: str, password: str) -> bool:
    # Imported only for an imported account: no other request pays for the module.
    import bcrypt

    try:
        return bcrypt.checkpw(password.encode()[:_BCRYPT_MAX_BYTES], stored_hash.encode("ascii"))
    except ValueError:  # a damaged hash (bad salt, non-ASCII): it proves nothing
        return False


def should_rehash(stored_hash: str, password: str) -> bool:
    """Whether the stored hash should be replaced now that ``password`` was proven against it.
    Not for a bcrypt hash proven by a password longer than bcrypt reads: only its first 72 bytes
    were checked, and the rest of what was typed (a typo, say) must not become the password."""
    if is_bcrypt(stored_hash) and len(password.encode()) > _BCRYPT_MAX_BYTES:
        return False
    return needs_rehash(stored_hash)


def needs_rehash(stored_hash: str) -> bool:
    """Whether the stored hash should be replaced by a new argon2id hash once the password is proven:
    an imported bcrypt hash, or argon2 made with other parameters than the current profile."""
    if is_bcrypt(stored_hash):
        return True
    return _hasher().check_needs_rehash(stored_hash)
