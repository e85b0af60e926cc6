"""Domain records (User, Session) and their public JSON shapes (CONTRACT section 5).

Timestamps are kept as ISO-8601 strings (the wire format) so stored items read naturally in the
console; ``exp`` values are Unix seconds. Secrets and hashes are fields here but never in a view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class User:
    """A user account as stored."""

    id: str
    username: str
    email: str
    password_hash: str
    created_at: str
    updated_at: str
    domain: str
    subdomain: str | None = None
    staff: bool = False
    verified_at: str | None = None
    banned_at: str | None = None
    ban_reason: str | None = None
    two_factor_backup_code_used_at: str | None = None
    second_factor_count: int = 0
    # Failed password (and later second-factor) answers in the current per-account window.
    auth_failures: int = 0
    auth_failures_reset_at: int = 0

    def to_public(self) -> dict[str, Any]:
        """The User structure of the API; unset values are null, never omitted."""
        return {
            "id": self.id,
            "username": self.username,
            "email": self.email,
            "staff": self.staff,
            "domain": self.domain,
            "subdomain": self.subdomain,
            "verifiedAt": self.verified_at,
            "bannedAt": self.banned_at,
            "banReason": self.ban_reason,
            "twoFactorBackupCodeUsedAt": self.two_factor_backup_code_used_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class Session:
    """A login session (normal when ``permission_flags`` is None, scoped otherwise)."""

    user_id: str
    id: str
    secret_hash: str
    name: str
    exp: int
    created_at: str
    updated_at: str
    used_at: str
    permission_flags: int | None = None

    @property
    def scoped(self) -> bool:
        """Whether this is a scoped session (created by POST /users/me/sessions)."""
        return self.permission_flags is not None

    def to_public(self) -> dict[str, Any]:
        """The Session structure of the API."""
        return {
            "id": self.id,
            "exp": self.exp,
            "name": self.name,
            "permissionFlags": self.permission_flags,
            "usedAt": self.used_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def iso_to_epoch(value: str) -> float:
    """Seconds since the epoch for one of our ISO timestamps."""
    return datetime.fromisoformat(value).timestamp()
