"""Account self-service rules: each change is one transaction after authentication and the limit."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from nimbus_core.accounts import account_changes, password_policy
from nimbus_core.accounts.notices import Actor, Notice, notice_op
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError
from nimbus_core.domain.models import Domain, User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.platform.clock import iso
from nimbus_core.sessions.auth import Caller
from nimbus_core.sessions.session_issuer import revoke_all_but

_log = Logger(child=True)


def change_username(
    deps: Deps,
    caller: Caller,
    username: str,
    now: float,
    *,
    answer: PendingAnswer = NO_ANSWER,
    actor: Actor | None = None,
) -> User:
    """Rename the caller; the old and new claims swap in the same transaction as the user, and the
    reverification ``answer``.

    The write holds on the session generation read; when it went stale, the caller is read again
    (:func:`~nimbus_core.accounts.account_changes.on_fresh_read`, as for the address, domain and resend
    below): a session revoked meanwhile is 401 INVALID_SESSION_ERROR with nothing written; a
    session that stands has the rename built again on the user as stored now.
    """
    return account_changes.rename(deps, caller.user, username, now, by=caller, answer=answer, actor=actor)


def change_email(
    deps: Deps, caller: Caller, email: str, now: float, *, actor: Actor, answer: PendingAnswer = NO_ANSWER
) -> User:
    """Change the caller's address: it starts unverified and a verification email goes to it; the
    old address is told of the change (``actor``: the caller's IP and session). ``answer``: the
    reverification, recorded with the change."""
    return account_changes.change_email(deps, caller.user, email, now, actor=actor, by=caller, answer=answer)


def change_password(
    deps: Deps,
    caller: Caller,
    new_password: str,
    now: float,
    *,
    actor: Actor,
    answer: PendingAnswer = NO_ANSWER,
) -> User:
    """Set a new password; the current session stays, every other session is revoked at once, and
    the security notice naming ``actor`` is queued in the same transaction, with the reverification
    ``answer``.

    The write holds only on the hash and session generation it read. When a concurrent change
    lands first, the caller is read again (:func:`~nimbus_core.accounts.account_changes.on_fresh_caller`):
    a reset, a staff password set, a ban or a change from another session revoked this session
    (401 INVALID_SESSION_ERROR, nothing written); a session that still stands was kept by a change
    of its own (the same session's other request) or by none (a rehash of the same password), so
    the password it proved was current when read, and this change lands after that one: the last
    to commit sets the password, each counted by the endpoint's limit.
    """
    password_policy.refuse_compromised(deps.settings, new_password, field="newPassword")
    hashed = account_changes.new_password(caller.user, new_password, now).password_hash  # hashed once

    def attempt(current: Caller) -> User:
        user = current.user
        changed: User = user.changed(password_hash=hashed, updated_at=iso(now), pending_recovery=None)
        after, ops = revoke_all_but(deps, changed, current.session)
        notice = notice_op(deps, after, Notice.PASSWORD_CHANGED, actor=actor, now=now)
        answer.commit(deps.tx, [*account_changes.change_ops(deps, user, after, by=current), *ops, notice])
        return after

    return account_changes.on_fresh_caller(deps, caller, now, attempt)


def change_domain(deps: Deps, caller: Caller, domain: str, subdomain: str | None, now: float) -> User:
    """Choose an offered domain (and a subdomain where it allows one): the domain is read, then the
    user written."""
    return account_changes.change_domain(deps, caller.user, domain, subdomain, now, by=caller)


def resend_verification(deps: Deps, caller: Caller, now: float) -> None:
    """Send a new verification email (the previous link stops working)."""
    account_changes.resend_verification(deps, caller.user, now, by=caller)


def delete_account(deps: Deps, caller: Caller, *, answer: PendingAnswer = NO_ANSWER) -> None:
    """Delete the caller's account, safely ordered for any number of sessions.

    1. Every other session is deleted in batches (idempotent). A fault here leaves the account
       whole and the caller's session alive, so the same request can simply be retried.
    2. One transaction removes the user, both claims, the caller's session and the pending token:
       the name and address can be registered again at once.
       The reverification ``answer`` is recorded in it.
    3. Sessions opened meanwhile are swept; any left by a fault can never authenticate (their user
       is gone) and expire by TTL.
    """
    user, current = caller.user, caller.session
    deps.sessions.delete_many(user.id, [sid for sid in deps.sessions.list_ids(user.id) if sid != current.id])
    account_changes.delete_user(
        deps, user, also=[deps.sessions.delete_op(user.id, current.id)], answer=answer
    )
    try:
        deps.sessions.delete_many(user.id, deps.sessions.list_ids(user.id))
    except DependencyError:
        _log.warning("sessions left after deleting a user; they expire by TTL", extra={"user_id": user.id})


def list_domains(deps: Deps, *, limit: int | None, offset: int) -> tuple[int, list[Domain]]:
    """The offered domains: the total and one page (``limit`` None: every one from ``offset`` on)."""
    domains = deps.domains.list()
    return len(domains), domains[offset:] if limit is None else domains[offset : offset + limit]


def get_domain(deps: Deps, name: str) -> Domain:
    """One offered domain, or 404 INVALID_DOMAIN_ERROR."""
    domain = deps.domains.get(name.strip().lower())
    if domain is None:
        raise NimbusError(ErrorCode.INVALID_DOMAIN_ERROR)
    return domain
