"""Sample records for tests, built from the domain models (never hand-written items)."""

from __future__ import annotations

from nimbus_core.domain.models import User

STAMP = "2027-01-15T08:00:00.250Z"


def sample_user(user_id: str, username: str, *, staff: bool = False, email: str | None = None) -> User:
    """A user as register would store it (the password hash is a placeholder, never verified)."""
    return User(
        id=user_id,
        username=username,
        email=email or f"{username.lower()}@example.com",
        password_hash="$argon2id$v=19$m=19456,t=2,p=1$placeholder$placeholder",
        created_at=STAMP,
        updated_at=STAMP,
        domain="nimbus.test",
        staff=staff,
    )
