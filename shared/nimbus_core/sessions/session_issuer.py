"""Issuing and revoking sessions: shared by login, register, reverification-protected changes,
bans and deletions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import Session, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.useragent import MAX_USER_AGENT
from nimbus_core.platform import clock, ids
from nimbus_core.sessions.tokens import hash_secret, new_session_token

if TYPE_CHECKING:
    from nimbus_core.domain.views import SuccessfulAuthView


class NoDeviceTokenError(RuntimeError):
    """A session issued without a known-device token shown as a sign-in's (SuccessfulAuth)."""


@dataclass(frozen=True, slots=True)
class IssuedSession:
    """A new session and the token that is shown once to its holder."""

    session: Session
    token: str
    # A sign-in's known-device token (CONTRACT section 8), shown once too; None for scoped sessions.
    device: str | None = None
    # A login whose password is in the compromised-password list (CONTRACT section 17).
    password_compromised: bool = False

    def to_public(self) -> SuccessfulAuthView:
        """The SuccessfulAuth structure of a sign-in, which always has its ``device`` token (a
        scoped session's token is shown with its Session instead: ScopedSessionView), and says
        ``passwordCompromised`` only when it is so."""
        if self.device is None:
            raise NoDeviceTokenError("a sign-in is shown with its known-device token")
        shown: SuccessfulAuthView = {"token": self.token, "exp": self.session.exp, "device": self.device}
        if self.password_compromised:
            shown["passwordCompromised"] = True
        return shown


def normal_lifetime(deps: Deps, *, remember_me: bool) -> int:
    """Seconds a normal session lives: 24 hours, or 30 days with rememberMe (deployment settings)."""
    settings = deps.settings
    return settings.remember_me_days * 86400 if remember_me else settings.session_hours * 3600


def new_session(
    user: User,
    *,
    name: str | None,
    lifetime: int,
    now: float,
    user_agent: str | None = None,
    permission_flags: int | None = None,
) -> IssuedSession:
    """A session of ``user``'s current generation (not stored yet: add ``put_op`` to a transaction),
    named ``name``, or after ``user_agent`` when shown if no name was given."""
    session_id = ids.new_id()
    token = new_session_token(user.id, session_id)
    stamp = clock.iso(now)
    session = Session(
        user_id=user.id,
        id=session_id,
        secret_hash=hash_secret(token.secret),
        name=name,
        user_agent=None if name is not None or user_agent is None else user_agent.strip()[:MAX_USER_AGENT],
        exp=int(now) + lifetime,
        created_at=stamp,
        updated_at=stamp,
        used_at=stamp,
        permission_flags=permission_flags,
        generation=user.session_generation,
    )
    return IssuedSession(session, str(token))


def revoke_all(user: User) -> User:
    """``user`` with every session revoked at once: the next generation, which no session has.

    Authentication compares generations on the read it already makes, so this costs no extra round
    trip and holds for users with any number of sessions; the stale items expire by TTL.
    """
    revoked: User = user.changed(session_generation=user.session_generation + 1)
    return revoked


def revoke_all_but(deps: Deps, user: User, keep: Session) -> tuple[User, list[WriteOp]]:
    """Revoke every session of ``user`` except ``keep``, which moves to the new generation (only
    that attribute is written, so a reverification failure counted on it meanwhile stays)."""
    revoked = revoke_all(user)
    return revoked, [deps.sessions.move_to_generation_op(keep, revoked.session_generation)]
