"""Changes to one account, the same whoever makes them: the user themselves (AccountsFunction) or
staff (StaffFunction). Each is one transaction after authentication; the callers add their own
rules (who may, which sessions survive) around them.
"""

from __future__ import annotations

from nimbus_core import passwords, verification
from nimbus_core.clock import iso
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.identity import email_key
from nimbus_core.models import User
from nimbus_core.ports import WriteOp


def rename(deps: Deps, user: User, username: str, now: float) -> User:
    """Give ``user`` a new username; the old and new claims swap in the same transaction."""
    if username == user.username:
        return user
    after: User = user.changed(username=username, updated_at=iso(now))
    deps.tx.commit(deps.users.change_ops(user, after))
    return after


def change_email(deps: Deps, user: User, email: str, now: float) -> User:
    """Give ``user`` a new address: it starts unverified and a verification email goes to it (a
    new spelling of the same address keeps its state)."""
    if email == user.email:
        return user
    after: User = user.changed(email=email, updated_at=iso(now))
    ops: list[WriteOp] = []
    if email_key(email) != email_key(user.email):  # a new address, not another spelling of it
        after = after.changed(verified_at=None)
        after, ops = verification.issue(deps, after, now)
    deps.tx.commit([*deps.users.change_ops(user, after), *ops])
    return after


def change_domain(deps: Deps, user: User, domain: str, subdomain: str | None, now: float) -> User:
    """Choose an offered domain (and a subdomain where it allows one): checked inside the write."""
    after: User = user.changed(domain=domain, subdomain=subdomain, updated_at=iso(now))
    offered = deps.domains.offered_op(domain, with_subdomain=subdomain is not None)
    deps.tx.commit([offered, *deps.users.change_ops(user, after)])
    return after


def resend_verification(deps: Deps, user: User, now: float) -> None:
    """Send a new verification email (the previous link stops working); 400
    EMAIL_ALREADY_VERIFIED_ERROR when there is nothing to verify."""
    if user.verified_at is not None:
        raise NimbusError(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR)
    after, ops = verification.issue(deps, user, now)
    deps.tx.commit([*deps.users.change_ops(user, after), *ops])


def new_password(user: User, password: str, now: float) -> User:
    """``user`` with ``password`` hashed (argon2id) in place of the old one (not stored yet)."""
    changed: User = user.changed(password_hash=passwords.hash_password(password), updated_at=iso(now))
    return changed


def deletion_ops(deps: Deps, user: User) -> list[WriteOp]:
    """The writes that delete ``user`` at once: the user item (its factors and backup codes with
    it), both claims (the name and address can be registered again), the pending verification
    token, and one user less in the count. Sessions and stored mail follow from the users stream
    (SweepFunction); none of them can authenticate or be replayed once the user is gone."""
    ops = deps.users.delete_ops(user)
    if user.pending_verification:
        ops.append(deps.tokens.delete_op(user.pending_verification))
    return ops
