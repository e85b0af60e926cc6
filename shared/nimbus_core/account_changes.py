"""Changes to one account, the same whoever makes them: the user themselves (AccountsFunction) or
staff (StaffFunction). Each is one transaction after authentication; the callers add their own
rules (who may, which sessions survive) around them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nimbus_core import passwords, verification
from nimbus_core.auth import Caller, still_standing
from nimbus_core.clock import iso
from nimbus_core.deps import Deps
from nimbus_core.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.models import User
from nimbus_core.notices import Actor, Notice, mask_email, notice_op
from nimbus_core.ports import WriteOp

# How many times a write is rebuilt on a re-read user before giving up (a 500): each retry follows
# a concurrent change of the same user that committed, so more than a few means something is wrong.
FRESH_USER_ATTEMPTS = 4


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
    deps: Deps, user: User, username: str, now: float, *, gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR
) -> User:
    """Give ``user`` a new username; the old and new claims swap in the same transaction. ``gone``:
    the answer when the user is deleted meanwhile (see :func:`on_fresh_user`)."""

    def attempt(current: User) -> User:
        if username == current.username:
            return current
        after: User = current.changed(username=username, updated_at=iso(now))
        deps.tx.commit(deps.users.change_ops(current, after))
        return after

    return on_fresh_user(deps, user, attempt, gone=gone)


def change_email(
    deps: Deps,
    user: User,
    email: str,
    now: float,
    *,
    actor: Actor,
    gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR,
) -> User:
    """Give ``user`` a new address: any other string than the stored one (another spelling of the
    same address included) starts unverified and a verification email goes to it; the claim
    moves only when the address's key changes. The security notice of the change made by
    ``actor`` goes to the old address, in the same transaction. ``gone`` as for :func:`rename`."""

    def attempt(current: User) -> User:
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
        deps.tx.commit([*deps.users.change_ops(current, after), *ops, notice])
        return after

    return on_fresh_user(deps, user, attempt, gone=gone)


def change_domain(deps: Deps, user: User, domain: str, subdomain: str | None, now: float) -> User:
    """Choose an offered domain (and a subdomain where it allows one): checked inside the write."""
    after: User = user.changed(domain=domain, subdomain=subdomain, updated_at=iso(now))
    offered = deps.domains.offered_op(domain, with_subdomain=subdomain is not None)
    deps.tx.commit([offered, *deps.users.change_ops(user, after)])
    return after


def resend_verification(
    deps: Deps, user: User, now: float, *, gone: ErrorCode = ErrorCode.INVALID_SESSION_ERROR
) -> None:
    """Send a new verification email (the previous link stops working); 400
    EMAIL_ALREADY_VERIFIED_ERROR when there is nothing to verify. Built on the user as stored when
    it commits: an address change that lands first gets its link replaced by one to the new
    address, never by one bound to the old. ``gone`` as for :func:`rename`."""

    def attempt(current: User) -> None:
        if current.verified_at is not None:
            raise NimbusError(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR)
        after, ops = verification.issue(deps, current, now)
        deps.tx.commit([*deps.users.change_ops(current, after), *ops])

    on_fresh_user(deps, user, attempt, gone=gone)


def new_password(user: User, password: str, now: float) -> User:
    """``user`` with ``password`` hashed (argon2id) in place of the old one (not stored yet), and
    no pending recovery link: the password it was to replace is gone (CONTRACT section 14)."""
    changed: User = user.changed(
        password_hash=passwords.hash_password(password), updated_at=iso(now), pending_recovery=None
    )
    return changed


def delete_user(deps: Deps, user: User, also: Sequence[WriteOp] = ()) -> None:
    """Delete ``user`` with :func:`deletion_ops` (and ``also``, in the same transaction), as the
    user is at commit time: a rename or address change that lands after the read makes the write
    stale, and it is built again on the stored user, so the claims deleted are the ones the user
    holds. 401 INVALID_SESSION_ERROR when the user is already gone."""
    on_fresh_user(deps, user, lambda current: deps.tx.commit([*deletion_ops(deps, current), *also]))


def deletion_ops(deps: Deps, user: User) -> list[WriteOp]:
    """The writes that delete ``user`` at once: the user item (its factors and backup codes with
    it), both claims (the name and address can be registered again), the pending verification
    token, and one user less in the count. Sessions and stored mail follow from the users stream
    (SweepFunction); none of them can authenticate or be replayed once the user is gone."""
    ops = deps.users.delete_ops(user)
    if user.pending_verification:
        ops.append(deps.tokens.delete_op(user.pending_verification))
    if user.pending_recovery:
        ops.append(deps.tokens.delete_recovery_op(user.pending_recovery))
    return ops
