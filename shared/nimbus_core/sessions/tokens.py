"""Opaque bearer tokens: what clients hold, and the hashes we keep.

A session token is ``<userId>.<sessionId>.<secret>``. The ids let one BatchGetItem fetch the session
and its user together (one DynamoDB round trip); the 256-bit secret is stored only as its SHA-256
hash and compared in constant time. A fast hash is right here: the secret is random, not a password.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from nimbus_core.platform.ids import is_id, is_new_id, new_secret

_MAX_TOKEN_LENGTH = 128
_SECRET_LENGTH = 43


@dataclass(frozen=True, slots=True)
class SessionToken:
    """The parts of a session token."""

    user_id: str
    session_id: str
    secret: str
    # An upstream deployment's signed token (CONTRACT section 15): no secret, its signature checked
    # already; it may only name a session imported from upstream.
    upstream: bool = False

    def __str__(self) -> str:
        return f"{self.user_id}.{self.session_id}.{self.secret}"


def new_session_token(user_id: str, session_id: str) -> SessionToken:
    """A fresh token for a new session."""
    return SessionToken(user_id, session_id, new_secret())


def parse_session_token(raw: str | None) -> SessionToken | None:
    """Parse an ``Authorization`` header value (bare token or ``Bearer <token>``); None if malformed."""
    if not raw or len(raw) > _MAX_TOKEN_LENGTH + 7:
        return None
    value = raw.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    parts = value.split(".")
    if len(parts) != 3:
        return None
    user_id, session_id, secret = parts
    # Our tokens name only sessions we made: an imported upstream session (a decimal id) is reached
    # through its upstream JWT alone, so a token of ours naming one is malformed, refused unread.
    if not (is_id(user_id) and is_new_id(session_id) and len(secret) == _SECRET_LENGTH):
        return None
    return SessionToken(user_id, session_id, secret)


@dataclass(frozen=True, slots=True)
class UserToken:
    """A one-time token ``<userId>.<secret>`` (email verification, second-factor challenge): the user
    id lets one BatchGetItem fetch the token's item and its user together."""

    user_id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.user_id}.{self.secret}"


def new_user_token(user_id: str) -> UserToken:
    """A fresh one-time token for ``user_id``."""
    return UserToken(user_id, new_secret())


def parse_user_token(raw: str) -> UserToken | None:
    """The parts of a ``<userId>.<secret>`` token, or None if it cannot be one."""
    user_id, dot, secret = raw.strip().partition(".")
    if not dot or not is_id(user_id) or len(secret) != _SECRET_LENGTH:
        return None
    return UserToken(user_id, secret)


def hash_secret(secret: str) -> str:
    """Hex SHA-256 of a random secret (session secrets, verification and challenge tokens)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented secret with a stored hash."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)
