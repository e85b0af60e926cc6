"""Staff operations on accounts (the seed's staff account endpoints, CONTRACT sections 3, 8 and 13).

The target user was read with the staff member's session (``Policy.target``), so every change here
is one transaction on top of the authentication read. Revoking sessions is one write: the user's
session generation goes up, which authentication checks on the read it already makes (the stale
session items are deleted afterwards by SweepFunction from the users stream).
"""

from __future__ import annotations

from collections.abc import Callable

from nimbus_core.accounts import account_changes, activity, password_policy
from nimbus_core.accounts.mail_templates import ban_email
from nimbus_core.accounts.notices import STAFF, Notice, notice_op
from nimbus_core.domain.activity import EventType, event_op
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.secret_kinds import EMAIL_VERIFICATION
from nimbus_core.platform import ids
from nimbus_core.platform.clock import iso
from nimbus_core.sessions.auth import Caller
from nimbus_core.sessions.session_issuer import revoke_all

Built = tuple[User, list[WriteOp]]  # the user after a change, and the writes that go with it


def list_users(deps: Deps, *, limit: int, offset: int) -> tuple[int, list[User]]:
    """Every user, newest first: the exact total and one page (no Scan: see UserStore.newest_page)."""
    return deps.users.newest_page(limit=limit, offset=offset)


def set_password(
    deps: Deps,
    user: User,
    password: str,
    now: float,
    *,
    by: Caller | None = None,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Set ``user``'s password and revoke every session of theirs in the same write, which also
    queues the security notice (made by staff).

    Built again on the stored user when a concurrent change of it lands first (see :func:`_change`
    for ``by``)."""
    password_policy.refuse_compromised(deps.settings, password, field="newPassword")
    hashed = account_changes.new_password(user, password, now).password_hash  # hashed once

    def build(current: User) -> Built:
        after = revoke_all(current.changed(password_hash=hashed, updated_at=iso(now), pending_recovery=None))
        return after, [notice_op(deps, after, Notice.PASSWORD_CHANGED, actor=STAFF, now=now)]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def set_verified(
    deps: Deps, user: User, now: float, *, by: Caller | None = None, answer: PendingAnswer = NO_ANSWER
) -> User:
    """Mark the address verified (400 EMAIL_ALREADY_VERIFIED_ERROR if it is); the pending link
    stops working."""

    def build(current: User) -> Built | None:
        if current.email != user.email:
            # The address staff looked at was replaced since: never verify one they did not see.
            # Answered as the serial order "verified, then changed" leaves the user: unverified.
            return None
        if current.verified_at is not None:
            raise NimbusError(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR)
        stamp = iso(now)
        after: User = current.changed(verified_at=stamp, updated_at=stamp, pending_verification=None)
        pending = current.pending_verification
        event = _staff_event(deps, current, EventType.ACCOUNT_CHANGED, now, "Email address marked verified.")
        return after, [*([deps.tokens.drop_op(EMAIL_VERIFICATION, pending)] if pending else []), event]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def clear_verified(
    deps: Deps, user: User, now: float, *, by: Caller | None = None, answer: PendingAnswer = NO_ANSWER
) -> User:
    """Remove the verified mark (400 EMAIL_NOT_VERIFIED_ERROR if there is none)."""

    def build(current: User) -> Built | None:
        if current.email != user.email:
            return None  # a new address starts unverified: nothing left to clear
        if current.verified_at is None:
            raise NimbusError(ErrorCode.EMAIL_NOT_VERIFIED_ERROR)
        event = _staff_event(
            deps, current, EventType.ACCOUNT_CHANGED, now, "Email address no longer marked verified."
        )
        return current.changed(verified_at=None, updated_at=iso(now)), [event]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def set_staff(
    deps: Deps,
    user: User,
    staff: bool,
    now: float,
    *,
    by: Caller | None = None,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Promote or demote, telling the user in the same transaction (nothing is sent when nothing
    changes). Promotion needs a second factor on the target (400 USER_REQUIRES_SECOND_FACTOR_ERROR):
    staff endpoints would refuse them anyway (CONTRACT 4)."""

    def build(current: User) -> Built | None:
        if staff and current.second_factor_count == 0:
            raise NimbusError(ErrorCode.USER_REQUIRES_SECOND_FACTOR_ERROR)
        if current.staff == staff:
            return None
        after: User = current.changed(staff=staff, updated_at=iso(now))
        notice = Notice.STAFF_GRANTED if staff else Notice.STAFF_REMOVED
        return after, [notice_op(deps, after, notice, actor=STAFF, now=now)]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def ban(
    deps: Deps,
    user: User,
    reason: str,
    now: float,
    *,
    by: Caller | None = None,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Ban ``user``: ``bannedAt`` (kept when already banned) and ``banReason``, every session revoked,
    and a ban notice queued, all in one transaction. Banning again with the same reason changes
    nothing; with another reason, it is stored and mailed again."""

    def build(current: User) -> Built | None:
        if current.banned_at is not None and current.ban_reason == reason:
            return None
        stamp = iso(now)
        after: User = revoke_all(
            current.changed(banned_at=current.banned_at or stamp, ban_reason=reason, updated_at=stamp)
        )
        # Not a verification email: the ACCOUNT_EMAIL_VERIFY switch does not hold it (the seed).
        notice = ban_email(to=current.email, username=current.username, reason=reason)
        event = activity.by(
            current.id, EventType.BANNED.value, actor=STAFF, now=now, details=[f"Reason: {reason}"]
        )
        return after, [deps.outbox.enqueue_op(notice, now=now, kind="ban", user_id=current.id, event=event)]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def unban(
    deps: Deps, user: User, now: float, *, by: Caller | None = None, answer: PendingAnswer = NO_ANSWER
) -> User:
    """Lift a ban (a user who is not banned is answered as they are)."""

    def build(current: User) -> Built | None:
        if current.banned_at is None:
            return None
        event = _staff_event(deps, current, EventType.UNBANNED, now)
        return current.changed(banned_at=None, ban_reason=None, updated_at=iso(now)), [event]

    return _change(deps, user, build, by=by, now=now, answer=answer)


def delete_user(
    deps: Deps, user: User, *, by: Caller | None = None, now: float = 0.0, answer: PendingAnswer = NO_ANSWER
) -> bool:
    """Delete ``user`` as they are at commit time (see
    :func:`nimbus_core.accounts.account_changes.delete_user`;
    ``by`` and ``answer`` as for :func:`_change`); False if another request deleted them first, so
    they are not counted twice."""
    try:
        account_changes.delete_user(
            deps, user, by=by, now=now, gone=ErrorCode.INVALID_USER_ERROR, answer=answer
        )
    except NimbusError as gone:
        if gone.code is ErrorCode.INVALID_USER_ERROR:  # the user item was no longer there
            return False
        raise
    return True


def delete_users(
    deps: Deps,
    user_ids: list[str],
    *,
    by: Caller | None = None,
    now: float = 0.0,
    answer: PendingAnswer = NO_ANSWER,
) -> int:
    """Delete the users among ``user_ids`` (unknown ids skipped): how many this request deleted.

    One read for all of them, then one transaction per user, so a fault part way leaves every
    user either wholly deleted or untouched, and the same request, repeated, deletes the rest
    (``by`` as for :func:`_change`: a staff session revoked part way stops it there, with 401).
    The reverification ``answer`` is recorded with the first deletion.
    """
    wellformed = [u for u in user_ids if ids.is_id(u)]  # anything else names no user
    # The staff member's own account last: the deletions after it would find their session gone.
    users = sorted(deps.users.get_many(wellformed), key=lambda u: by is not None and u.id == by.user.id)
    return sum(delete_user(deps, user, by=by, now=now, answer=answer) for user in users)


def _staff_event(deps: Deps, user: User, type_: EventType, now: float, *details: str) -> WriteOp:
    """The activity event of a staff change without a notice of its own, for its transaction."""
    return event_op(deps, activity.by(user.id, type_.value, actor=STAFF, now=now, details=details), now)


def _change(
    deps: Deps,
    user: User,
    build: Callable[[User], Built | None],
    *,
    by: Caller | None = None,
    now: float = 0.0,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Commit ``build(user)`` (the user after the change and the writes that go with it; None: no
    change), built again on the stored user whenever a concurrent write to the same user (theirs or
    another staff member's) landed after the read, so no staff change is lost to a race or answered
    with an error meant for the user's own request. A user deleted meanwhile is 404 INVALID_USER_ERROR.
    With ``by`` (the staff member's request, read at ``now``) the write also holds on the staff
    member's session: one revoked meanwhile (a ban of theirs, their password set or reset) is 401
    INVALID_SESSION_ERROR and nothing is written
    (:func:`nimbus_core.accounts.account_changes.on_fresh_read`). The staff member's
    reverification ``answer`` is recorded in the same transaction."""

    def attempt(current: User, made_by: Caller | None) -> User:
        built = build(current)
        if built is None:
            return current
        after, ops = built
        answer.commit(deps.tx, [*account_changes.change_ops(deps, current, after, by=made_by), *ops])
        return after

    return account_changes.on_fresh_read(
        deps, user, attempt, by=by, now=now, gone=ErrorCode.INVALID_USER_ERROR
    )
