"""Fresh records for contract tests: ids are made while a test runs, never at collection time."""

from __future__ import annotations

from nimbus_core.domain.models import Session, User, VerificationToken
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.tokens import hash_secret

NOW = 1_800_000_000.25  # 2027-01-15T08:00:00.250Z
STAMP = iso(NOW)
LATER = iso(NOW + 60)


def tag() -> str:
    """A fresh, lower-case, unique fragment for names, addresses and keys."""
    return new_id().lower()


def a_user(*, username: str | None = None, email: str | None = None, password_hash: str = "hash-0") -> User:
    """A user that no other test uses."""
    fresh = tag()
    return User(
        id=new_id(),
        username=username or f"User_{fresh}",
        email=email or f"user.{fresh}@example.com",
        password_hash=password_hash,
        created_at=STAMP,
        updated_at=STAMP,
        domain="nimbus.test",
    )


def a_session(user: User, *, exp: int | None = None, name: str = "Firefox 132 on Ubuntu") -> Session:
    """A normal session of ``user``."""
    return Session(
        user_id=user.id,
        id=new_id(),
        secret_hash=hash_secret(new_id()),
        name=name,
        exp=exp if exp is not None else int(NOW) + 86400,
        created_at=STAMP,
        updated_at=STAMP,
        used_at=STAMP,
        generation=user.session_generation,
    )


def a_token(user: User) -> VerificationToken:
    """A verification token for ``user``'s current address."""
    return VerificationToken(
        hash=hash_secret(new_id()), user_id=user.id, email=user.email, created_at=STAMP, exp=int(NOW) + 86400
    )
