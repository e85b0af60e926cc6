"""Session rules: list, read, rename and revoke a user's sessions, and issue scoped sessions.

A session is *live* while it has its user's current generation and has not expired; everything
else (revoked by a generation bump, expired but not yet removed by TTL) is invisible here: never
listed, never counted, never found (404 INVALID_SESSION_ERROR). The same rules serve the caller's
own endpoints (``/users/me/sessions``) and the staff endpoints (``/users/:uid/sessions``); only
the own ones know a *current* session, which ``me`` names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nimbus_core.accounts import account_changes, activity
from nimbus_core.accounts.notices import STAFF, Actor, Notice, notice_op, scope_names
from nimbus_core.domain.activity import ActivityEvent, EventType, event_op, record_now
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Session, User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.scopes import STAFF_BITS
from nimbus_core.platform import clock, ids
from nimbus_core.sessions.auth import Caller
from nimbus_core.sessions.session_issuer import IssuedSession, new_session, revoke_all, revoke_all_but

ME = "me"


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose sessions an endpoint works on, the caller's session when they are the caller's own,
    and who acts (the account's activity names them: staff, or the caller's IP and session)."""

    user: User
    current: Session | None = None
    actor: Actor = STAFF

    @classmethod
    def me(cls, caller: Caller, actor: Actor) -> Owner:
        """The caller's own sessions (``me`` names the calling session)."""
        return cls(caller.user, caller.session, actor)

    def revoked(self, type_: EventType, count: int, now: float) -> ActivityEvent:
        """The activity event of ``count`` sessions revoked by the actor."""
        detail = f"{count} session{'s' if count != 1 else ''} revoked."
        return activity.by(self.user.id, type_.value, actor=self.actor, now=now, details=[detail])

    def resolve(self, sid: str) -> str:
        """``me`` is the current session on the own endpoints; elsewhere it is just an unknown id."""
        return self.current.id if sid == ME and self.current is not None else sid

    def live_current(self, sid: str) -> Session | None:
        """The current session when ``sid`` names it (it authenticated this request: no read)."""
        return self.current if self.current is not None and self.resolve(sid) == self.current.id else None


def list_sessions(
    deps: Deps, owner: Owner, now: float, *, limit: int, offset: int
) -> tuple[int, list[Session]]:
    """The owner's live sessions, newest first: the total and one page."""
    user = owner.user
    return deps.sessions.live_page(
        user.id, generation=user.session_generation, now=now, limit=limit, offset=offset
    )


def get_session(deps: Deps, owner: Owner, sid: str, now: float) -> Session:
    """One live session of the owner, or 404 INVALID_SESSION_ERROR."""
    current = owner.live_current(sid)
    if current is not None:
        return current
    sid = owner.resolve(sid)
    session = deps.sessions.get(owner.user.id, sid) if ids.is_session_id(sid) else None
    if session is None or not _live(session, owner.user, now):
        raise _unknown_session()
    return session


def rename_session(deps: Deps, owner: Owner, sid: str, name: str, now: float) -> Session:
    """Rename one live session of the owner (one conditional write), or 404 INVALID_SESSION_ERROR."""
    sid = owner.resolve(sid)
    user = owner.user
    renamed = None
    if ids.is_session_id(sid):
        renamed = deps.sessions.rename(
            user.id, sid, name, clock.iso(now), generation=user.session_generation, now=now
        )
    if renamed is None:
        raise _unknown_session()
    return renamed


def delete_session(deps: Deps, owner: Owner, sid: str, now: float) -> None:
    """Revoke one live session of the owner (one conditional delete), or 404 INVALID_SESSION_ERROR."""
    sid = owner.resolve(sid)
    user = owner.user
    deleted = ids.is_session_id(sid) and deps.sessions.delete_live(
        user.id, sid, generation=user.session_generation, now=now
    )
    if not deleted:
        raise _unknown_session()
    record_now(deps, owner.revoked(EventType.SESSION_REVOKED, 1, now), now)


def delete_sessions(deps: Deps, owner: Owner, session_ids: Sequence[str], now: float) -> int:
    """Revoke the owner's live sessions among ``session_ids`` (unknown ones skipped); how many.

    One BatchGetItem finds which exist and are live, then BatchWriteItem removes exactly those, so
    ``count`` never includes an unknown, revoked or expired id.
    """
    wanted = [sid for sid in dict.fromkeys(owner.resolve(s) for s in session_ids) if ids.is_session_id(sid)]
    if not wanted:
        return 0
    live = [s.id for s in deps.sessions.get_many(owner.user.id, wanted) if _live(s, owner.user, now)]
    deps.sessions.delete_many(owner.user.id, live)
    if live:
        record_now(deps, owner.revoked(EventType.SESSION_REVOKED, len(live), now), now)
    return len(live)


def revoke_all_sessions(deps: Deps, owner: Owner, *, keep_current: bool, now: float) -> int:
    """Revoke every session of the owner at once, optionally keeping the caller's; how many.

    One write moves the user to a new session generation (the caller's session moves with it when
    kept). Authentication compares generations on the read it already makes, so the revoked
    sessions fail on their very next request, in every function instance, whatever their number.
    The stale items are deleted afterwards by the sweeper, paged and batched, from the users
    table's stream; until then they are invisible (never listed, counted or accepted).
    """
    if keep_current and owner.current is not None:
        return _revoke_all_but_mine(deps, owner, Caller(owner.user, owner.current), now)
    # The count is for the answer (upstream's clients read it); the revocation does not depend on it.
    count = deps.sessions.count_live(owner.user.id, generation=owner.user.session_generation, now=now)
    event = event_op(deps, owner.revoked(EventType.SESSIONS_REVOKED, count, now), now)

    def attempt(user: User) -> int:
        # Conditional on the generation read: any change that lands first (sessions revoked
        # meanwhile by someone else, a session kept there that must go too; a password change) is
        # revoked again on the user as stored now; a user deleted meanwhile is 404 INVALID_USER_ERROR.
        deps.tx.commit([*deps.users.change_ops(user, revoke_all(user), rebuilt_when_stale=True), event])
        return count

    return account_changes.on_fresh_user(deps, owner.user, attempt, gone=ErrorCode.INVALID_USER_ERROR)


def _revoke_all_but_mine(deps: Deps, owner: Owner, caller: Caller, now: float) -> int:
    """Revoke every session of the caller's but the caller's own; how many it revoked.

    Conditional on the generation read: when another change of the account lands first, the caller
    is read again (:func:`~nimbus_core.accounts.account_changes.on_fresh_caller`). A session revoked
    meanwhile (by another session's revoke-all or password change, a ban, a reset) is 401
    INVALID_SESSION_ERROR, never kept by a race; one kept by a change of its own (its password
    change) revokes what is left, counted on that fresh read.
    """

    def attempt(current: Caller) -> int:
        user = current.user
        count = deps.sessions.count_live(user.id, generation=user.session_generation, now=now)
        after, ops = revoke_all_but(deps, user, current.session)
        revoked = max(count - 1, 0)
        event = event_op(deps, owner.revoked(EventType.SESSIONS_REVOKED, revoked, now), now)
        deps.tx.commit([*account_changes.change_ops(deps, user, after, by=current), *ops, event])
        return revoked

    return account_changes.on_fresh_caller(deps, caller, now, attempt)


def create_scoped_session(
    deps: Deps,
    caller: Caller,
    *,
    name: str,
    permission_flags: int,
    long_lived: bool,
    now: float,
    actor: Actor,
    answer: PendingAnswer = NO_ANSWER,
) -> IssuedSession:
    """A scoped session of the caller: 24 hours, or 10 years when ``long_lived`` (deployment
    settings), with the notice naming it, its scopes and ``actor`` and the reverification
    ``answer`` in the same write. STAFF_* scopes need a staff user (403)."""
    user = caller.user
    if permission_flags & STAFF_BITS and not user.staff:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    settings = deps.settings
    lifetime = (
        settings.long_lived_session_days * 86400 if long_lived else settings.scoped_session_hours * 3600
    )
    issued = new_session(user, name=name, lifetime=lifetime, now=now, permission_flags=permission_flags)
    details = [
        f'Name: "{name}"',
        f"Scopes: {scope_names(permission_flags)}",
        f"Expires: {clock.iso(issued.session.exp)}",
    ]
    notice = notice_op(deps, user, Notice.SCOPED_SESSION_CREATED, actor=actor, now=now, details=details)
    answer.commit(deps.tx, [deps.sessions.put_op(issued.session), notice])
    return issued


def _live(session: Session, user: User, now: float) -> bool:
    return session.generation == user.session_generation and session.exp > now


def _unknown_session() -> NimbusError:
    return NimbusError(ErrorCode.INVALID_SESSION_ERROR, status=404)
