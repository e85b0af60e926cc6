"""The activity events of signing in (CONTRACT section 17): a sign-in rides the new session's own
transaction; a sign-in refused after the account was named (a ban) is stored with one write. The
failures of a password or an answer are recorded where they are counted
(:mod:`nimbus_core.sessions.credentials`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nimbus_core.accounts import notices
from nimbus_core.domain.activity import Attempt, EventType, event_op, new_event, record_now

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.errors import ErrorCode
    from nimbus_core.domain.models import User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.sessions.session_issuer import IssuedSession

REGISTERED = "registered"


def method_of(two_factor: Any) -> str:
    """How a login proved the account: ``password``, or the kind of the second factor its answer
    names (the answer was checked by then)."""
    if isinstance(two_factor, dict) and isinstance(two_factor.get("type"), str):
        return str(two_factor["type"])
    return "password"


def signed_in_op(
    deps: Deps,
    issued: IssuedSession,
    user: User,
    *,
    method: str,
    attempt: Attempt | None,
    notify: bool,
    now: float,
) -> WriteOp:
    """The event of the sign-in that opens ``issued``: from where, on the new session's device.
    With ``notify`` (:func:`nimbus_core.accounts.notices.new_sign_in_due`) the new sign-in notice
    carries it (CONTRACT section 17): one outbox item either way, so the notice adds no write."""
    session = issued.session
    event = new_event(
        session.user_id,
        EventType.SIGN_IN,
        now=now,
        ip=attempt.ip if attempt else None,
        device=session.name,
        user_agent=session.user_agent,
        method=method,
        session_id=session.id,
    )
    if notify:
        return notices.new_sign_in_op(deps, user, event, now=now)
    return event_op(deps, event, now)


def registered_op(deps: Deps, issued: IssuedSession, *, ip: str | None, now: float) -> WriteOp:
    """The account's first event: created, and signed in on the new session."""
    session = issued.session
    event = new_event(
        session.user_id,
        REGISTERED,
        now=now,
        ip=ip,
        device=session.name,
        user_agent=session.user_agent,
        session_id=session.id,
    )
    return event_op(deps, event, now)


def refused(deps: Deps, user: User, code: ErrorCode, attempt: Attempt | None, now: float) -> None:
    """Record a sign-in refused after the account proved itself (a banned account)."""
    event = new_event(user.id, EventType.SIGN_IN, now=now, outcome="failure", attempt=attempt, code=code.name)
    record_now(deps, event, now)
