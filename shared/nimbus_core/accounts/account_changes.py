"""Changes to one account, the same whoever makes them: the user themselves (AccountsFunction) or
staff (StaffFunction). Each is one transaction after authentication; the callers add their own
rules (who may, which sessions survive) around them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from nimbus_core.accounts import activity, verification
from nimbus_core.accounts.notices import Actor, Notice, mask_email, notice_op
from nimbus_core.domain.activity import EventType, event_op
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.models import User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.secret_kinds import EMAIL_VERIFICATION, RECOVERY
from nimbus_core.platform.clock import iso
from nimbus_core.sessions import passwords
from nimbus_core.sessions.auth import Caller, still_standing

# How many times a write is rebuilt on a re-read user before giving up (a 500): each retry follows
# a concurrent change of the same user that committed. A request can lose to every other request
# its limit let through at the same moment: five password changes from one session at once (the
# endpoint's limit is five) leave the last to commit four losses, and a change of another kind can
# land between them once more; past that, something is wrong.
FRESH_USER_ATTEMPTS = 6


def on_fresh_user[T](
    deps: Deps, user: User, attempt: Callable[[User], T], *, gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR
) -> T:
    """``attempt(user)``, built again on the stored user while a concurrent change of the same user
    made it stale (:class:`UserChangedError`). A user deleted meanwhile answers ``gone``: 401
    INVALID_SESSION_ERROR for the user's own change (their session died with them), 404
    INVALID_USER_ERROR for staff working on another account."""
    for _ in range(FRESH_USER_ATTEMPTS - 1):
        try:
            return answering_gone(deps, user, attempt, gone)
        except UserChangedError:
            fresh = deps.users.get(user.id)
            if fresh is None:
                raise NimbusError(gone) from None
            user = fresh
    try:
        return answering_gone(deps, user, attempt, gone)
    except UserChangedError as exc:
        raise DependencyError(f"user {user.id} kept changing under {FRESH_USER_ATTEMPTS} writes") from exc


def on_fresh_caller[T](deps: Deps, caller: Caller, now: float, attempt: Callable[[Caller], T]) -> T:
    """``attempt(caller)``, judged again on a fresh read of the caller (its session and user, and
    the target read with them: one round trip) while a concurrent change of the same user made its
    write stale (:class:`UserChangedError`). What happened meanwhile decides the answer: a session
    that no longer stands (revoked by a password reset, a staff password set, a ban, a change from
    another session; or deleted, with its user) is 401 INVALID_SESSION_ERROR; a session that still
    stands has the change built again on the user as stored now. Never INVALID_PASSWORD_ERROR: the
    password was proven against the hash current at the read."""
    for _ in range(FRESH_USER_ATTEMPTS - 1):
        try:
            return attempt(caller)
        except UserChangedError:
            fresh = still_standing(deps, caller, now)
            if fresh is None:
                raise NimbusError(ErrorCode.INVALID_SESSION_ERROR) from None
            caller = fresh
    try:
        return attempt(caller)
    except UserChangedError as exc:
        raise DependencyError(
            f"user {caller.user.id} kept changing under {FRESH_USER_ATTEMPTS} writes"
        ) from exc


# A change built on the user as stored now, made by the caller as read now (None: no session).
type Attempt[T] = Callable[[User, Caller | None], T]


def on_fresh_read[T](
    deps: Deps,
    user: User,
    attempt: Attempt[T],
    *,
    by: Caller | None,
    now: float,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
) -> T:
    """``attempt(user, by)`` for a change of ``user`` made by ``by`` (None: no session makes it, as
    in the operator tool), judged again on a fresh read whenever its write went stale. Its writes
    come from :func:`change_ops`, so they hold on the session ``by`` was read with: with ``by``, the
    fresh read is the caller's (:func:`on_fresh_caller`, ``user`` read with it when it is another
    account), and a session revoked meanwhile is 401 INVALID_SESSION_ERROR with nothing written,
    whoever's account the change is of; a session that stands has the change built again on the
    user and the caller as stored now. A user deleted meanwhile answers ``gone`` (see
    :func:`on_fresh_user`)."""
    if by is None:
        return on_fresh_user(deps, user, lambda current: attempt(current, None), gone=gone)
    if by.user.id == user.id:  # the caller's own account (the staff path included): one item
        return on_fresh_caller(deps, replace(by, user=user), now, lambda caller: attempt(caller.user, caller))

    def on_target(caller: Caller) -> T:
        if caller.target is None:
            raise NimbusError(gone)  # deleted meanwhile
        return answering_gone(deps, caller.target, lambda current: attempt(current, caller), gone)

    return on_fresh_caller(deps, replace(by, target_id=user.id, target=user), now, on_target)


def change_ops(deps: Deps, before: User, after: User, *, by: Caller | None) -> list[WriteOp]:
    """The writes that replace ``before`` by ``after`` (see ``UserStore.change_ops``), for
    :func:`on_fresh_read`: any stale read is a UserChangedError, and a change made by ``by`` holds
    on the session generation ``by`` was read with, in the same item's condition for the caller's
    own account and with a ConditionCheck of the caller's item for another's (one more item in the
    same transaction, no round trip). Nothing to write, nothing to check."""
    own = by is not None and by.user.id == before.id
    ops = deps.users.change_ops(before, after, rebuilt_when_stale=True, sessions_unrevoked=own)
    return [*ops, *_held_by(deps, before, by)] if ops else ops


def _held_by(deps: Deps, user: User, by: Caller | None) -> list[WriteOp]:
    """The check that ``by``'s session was not revoked, for a write of ``user`` made by another
    account (none for the caller's own: that item's own condition holds it)."""
    return [] if by is None or by.user.id == user.id else [deps.users.sessions_unrevoked_op(by.user)]


def answering_gone[T](deps: Deps, user: User, attempt: Callable[[User], T], gone: ErrorCode) -> T:
    """``attempt(user)``, a refusal that means "the user is gone" answered as ``gone`` (see
    :func:`on_fresh_user`); a stale write (:class:`UserChangedError`) is left to the caller."""
    try:
        return attempt(user)
    except NimbusError as refused:
        # The stores answer INVALID_SESSION_ERROR for a user that is no longer there (or whose
        # sessions were revoked meanwhile): staff get the answer that fits their request.
        if (
            refused.code is ErrorCode.INVALID_SESSION_ERROR
            and gone is not ErrorCode.INVALID_SESSION_ERROR
            and deps.users.get(user.id) is None
        ):
            raise NimbusError(gone) from refused
        raise


def rename(
    deps: Deps,
    user: User,
    username: str,
    now: float,
    *,
    by: Caller | None = None,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
    answer: PendingAnswer = NO_ANSWER,
    actor: Actor | None = None,
) -> User:
    """Give ``user`` a new username; the old and new claims swap in the same transaction. ``by``:
    the caller making the change; ``gone``: the answer when the user is deleted meanwhile (see
    :func:`on_fresh_read`); ``answer``: the reverification the change records (with it);
    ``actor``: who, for the account's activity (the change is recorded with it)."""

    def attempt(current: User, made_by: Caller | None) -> User:
        if username == current.username:
            return current
        after: User = current.changed(username=username, updated_at=iso(now))
        ops = change_ops(deps, current, after, by=made_by)
        if actor is not None:
            details = [f"From {current.username} to {username}."]
            event = activity.by(
                current.id, EventType.USERNAME_CHANGED.value, actor=actor, now=now, details=details
            )
            ops.append(event_op(deps, event, now))
        answer.commit(deps.tx, ops)
        return after

    return on_fresh_read(deps, user, attempt, by=by, now=now, gone=gone)


def change_email(
    deps: Deps,
    user: User,
    email: str,
    now: float,
    *,
    actor: Actor,
    by: Caller | None = None,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Give ``user`` a new address: any other string than the stored one (another spelling of the
    same address included) starts unverified and a verification email goes to it; the claim
    moves only when the address's key changes. The security notice of the change made by
    ``actor`` goes to the old address, in the same transaction. ``by``, ``gone`` and ``answer`` as
    for :func:`rename`."""

    def attempt(current: User, made_by: Caller | None) -> User:
        if email == current.email:
            return current
        # Unverified, and any pending recovery link void: it was mailed to the old address.
        after: User = current.changed(
            email=email, updated_at=iso(now), verified_at=None, pending_recovery=None
        )
        after, ops = verification.issue(deps, after, now)
        # Built on the user as stored now: the old address is the one this commit replaces.
        notice = notice_op(
            deps,
            current,
            Notice.EMAIL_CHANGED,
            actor=actor,
            now=now,
            details=[f"New address: {mask_email(email)}"],
            to=current.email,
        )
        answer.commit(deps.tx, [*change_ops(deps, current, after, by=made_by), *ops, notice])
        return after

    return on_fresh_read(deps, user, attempt, by=by, now=now, gone=gone)


def change_domain(
    deps: Deps,
    user: User,
    domain: str,
    subdomain: str | None,
    now: float,
    *,
    by: Caller | None = None,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
) -> User:
    """Choose an offered domain (and a subdomain where it allows one). ``by`` and ``gone`` as for
    :func:`rename`."""
    # Read before the write rather than checked inside its transaction: every user choosing the
    # popular domain would otherwise put that one item in each of their transactions, and
    # transactions on one item conflict long before its read capacity is reached. A domain withdrawn
    # between this read and the write leaves the user as if they had chosen it a moment earlier,
    # which withdrawing a domain allows anyway (it changes no user).
    offered = deps.domains.get(domain)
    if offered is None:
        raise NimbusError(ErrorCode.INVALID_DOMAIN_ERROR)
    if subdomain is not None and not offered.subdomains:
        raise NimbusError(ErrorCode.SUBDOMAIN_NOT_ALLOWED_ERROR)

    def attempt(current: User, made_by: Caller | None) -> User:
        after: User = current.changed(domain=domain, subdomain=subdomain, updated_at=iso(now))
        deps.tx.commit(change_ops(deps, current, after, by=made_by))
        return after

    return on_fresh_read(deps, user, attempt, by=by, now=now, gone=gone)


def resend_verification(
    deps: Deps,
    user: User,
    now: float,
    *,
    by: Caller | None = None,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
) -> None:
    """Send a new verification email (the previous link stops working); 400
    EMAIL_ALREADY_VERIFIED_ERROR when there is nothing to verify. Built on the user as stored when
    it commits: an address change that lands first gets its link replaced by one to the new
    address, never by one bound to the old. ``by`` and ``gone`` as for :func:`rename`."""

    def attempt(current: User, made_by: Caller | None) -> None:
        if current.verified_at is not None:
            raise NimbusError(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR)
        after, ops = verification.issue(deps, current, now)
        deps.tx.commit([*change_ops(deps, current, after, by=made_by), *ops])

    on_fresh_read(deps, user, attempt, by=by, now=now, gone=gone)


def new_password(user: User, password: str, now: float) -> User:
    """``user`` with ``password`` hashed (argon2id) in place of the old one (not stored yet), and
    no pending recovery link: the password it was to replace is gone (CONTRACT section 14)."""
    changed: User = user.changed(
        password_hash=passwords.hash_password(password), updated_at=iso(now), pending_recovery=None
    )
    return changed


def delete_user(
    deps: Deps,
    user: User,
    also: Sequence[WriteOp] = (),
    *,
    by: Caller | None = None,
    now: float = 0.0,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
    answer: PendingAnswer = NO_ANSWER,
) -> None:
    """Delete ``user`` with :func:`deletion_ops` (and ``also``, in the same transaction), as the
    user is at commit time: a rename or address change that lands after the read makes the write
    stale, and it is built again on the stored user, so the claims deleted are the ones the user
    holds. ``gone`` when the user is already gone. ``by`` (with the request's ``now``) and
    ``answer`` as for :func:`rename`: staff deleting another account hold on their session."""

    def attempt(current: User, made_by: Caller | None) -> None:
        answer.commit(deps.tx, [*deletion_ops(deps, current), *_held_by(deps, current, made_by), *also])

    on_fresh_read(deps, user, attempt, by=by, now=now, gone=gone)


def deletion_ops(deps: Deps, user: User) -> list[WriteOp]:
    """The writes that delete ``user`` at once: the user item (its factors and backup codes with
    it), both claims (the name and address can be registered again), the pending verification
    token, and one user less in the count. Sessions and stored mail follow from the users stream
    (SweepFunction); none of them can authenticate or be replayed once the user is gone."""
    ops = [*deps.users.delete_ops(user), *deps.users.release_credentials_ops(user, list(user.second_factors))]
    if user.pending_verification:
        ops.append(deps.tokens.drop_op(EMAIL_VERIFICATION, user.pending_verification))
    if user.pending_recovery:
        ops.append(deps.tokens.drop_op(RECOVERY, user.pending_recovery))
    return ops
