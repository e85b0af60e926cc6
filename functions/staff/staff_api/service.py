"""Staff operations on accounts (the seed's staff account endpoints, CONTRACT sections 3, 8 and 13).

The target user was read with the staff member's session (``Policy.target``), so every change here
is one transaction on top of the authentication read. Revoking sessions is one write: the user's
session generation goes up, which authentication checks on the read it already makes (the stale
session items are deleted afterwards by SweepFunction from the users stream).
"""

from __future__ import annotations

from nimbus_core import account_changes, ids
from nimbus_core.clock import iso
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.mail_templates import ban_email
from nimbus_core.models import User
from nimbus_core.notices import STAFF, Notice, notice_op
from nimbus_core.ports import WriteOp
from nimbus_core.session_issuer import revoke_all


def list_users(deps: Deps, *, limit: int, offset: int) -> tuple[int, list[User]]:
    """Every user, newest first: the exact total and one page (no Scan: see UserStore.newest_page)."""
    return deps.users.newest_page(limit=limit, offset=offset)


def set_password(deps: Deps, user: User, password: str, now: float) -> User:
    """Set ``user``'s password and revoke every session of theirs in the same write, which also
    queues the security notice (made by staff)."""
    after = revoke_all(account_changes.new_password(user, password, now))
    _commit_change(deps, user, after, [notice_op(deps, after, Notice.PASSWORD_CHANGED, actor=STAFF, now=now)])
    return after


def set_verified(deps: Deps, user: User, now: float) -> User:
    """Mark the address verified (400 EMAIL_ALREADY_VERIFIED_ERROR if it is); the pending link
    stops working."""
    if user.verified_at is not None:
        raise NimbusError(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR)
    stamp = iso(now)
    after: User = user.changed(verified_at=stamp, updated_at=stamp, pending_verification=None)
    ops = [deps.tokens.delete_op(user.pending_verification)] if user.pending_verification else []
    _commit_change(deps, user, after, ops)
    return after


def clear_verified(deps: Deps, user: User, now: float) -> User:
    """Remove the verified mark (400 EMAIL_NOT_VERIFIED_ERROR if there is none)."""
    if user.verified_at is None:
        raise NimbusError(ErrorCode.EMAIL_NOT_VERIFIED_ERROR)
    after: User = user.changed(verified_at=None, updated_at=iso(now))
    _commit_change(deps, user, after)
    return after


def set_staff(deps: Deps, user: User, staff: bool, now: float) -> User:
    """Promote or demote, telling the user in the same transaction (nothing is sent when nothing
    changes). Promotion needs a second factor on the target (400 USER_REQUIRES_SECOND_FACTOR_ERROR):
    staff endpoints would refuse them anyway (CONTRACT 4)."""
    if staff and user.second_factor_count == 0:
        raise NimbusError(ErrorCode.USER_REQUIRES_SECOND_FACTOR_ERROR)
    if user.staff == staff:
        return user
    after: User = user.changed(staff=staff, updated_at=iso(now))
    notice = Notice.STAFF_GRANTED if staff else Notice.STAFF_REMOVED
    _commit_change(deps, user, after, [notice_op(deps, after, notice, actor=STAFF, now=now)])
    return after


def ban(deps: Deps, user: User, reason: str, now: float) -> User:
    """Ban ``user``: ``bannedAt`` (kept when already banned) and ``banReason``, every session revoked,
    and a ban notice queued, all in one transaction. Banning again with the same reason changes
    nothing; with another reason, it is stored and mailed again."""
    if user.banned_at is not None and user.ban_reason == reason:
        return user
    stamp = iso(now)
    after: User = revoke_all(
        user.changed(banned_at=user.banned_at or stamp, ban_reason=reason, updated_at=stamp)
    )
    # Not a verification email: the ACCOUNT_EMAIL_VERIFY switch does not hold it (the seed).
    notice = ban_email(to=user.email, username=user.username, reason=reason)
    _commit_change(deps, user, after, [deps.outbox.enqueue_op(notice, now=now, kind="ban", user_id=user.id)])
    return after


def unban(deps: Deps, user: User, now: float) -> User:
    """Lift a ban (a user who is not banned is answered as they are)."""
    if user.banned_at is None:
        return user
    after: User = user.changed(banned_at=None, ban_reason=None, updated_at=iso(now))
    _commit_change(deps, user, after)
    return after


def delete_user(deps: Deps, user: User) -> bool:
    """Delete ``user`` as they are at commit time (see :func:`nimbus_core.account_changes.delete_user`);
    False if another request deleted them first, so they are not counted twice."""
    try:
        account_changes.delete_user(deps, user)
    except NimbusError as gone:
        if gone.code is ErrorCode.INVALID_SESSION_ERROR:  # the user item was no longer there
            return False
        raise
    return True


def delete_users(deps: Deps, user_ids: list[str]) -> int:
    """Delete the users among ``user_ids`` (unknown ids skipped): how many this request deleted.

    One read for all of them, then one transaction per user, so a fault part way leaves every
    user either wholly deleted or untouched, and the same request, repeated, deletes the rest.
    """
    wellformed = [u for u in user_ids if ids.is_id(u)]  # anything else names no user
    return sum(delete_user(deps, user) for user in deps.users.get_many(wellformed))


def _commit_change(deps: Deps, before: User, after: User, ops: list[WriteOp] | None = None) -> None:
    deps.tx.commit([*deps.users.change_ops(before, after), *(ops or [])])
