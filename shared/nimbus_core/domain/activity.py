"""An account's activity (CONTRACT section 17): its security events, kept 90 days.

An event says what happened (``type``), when, from where (``ip``, ``device``: the session's name or
the device the User-Agent names; "staff" for a staff member's action, who is never named), how
(``method`` of a sign-in), whether it worked (``outcome``, and the error ``code`` of a failure) and
in which session.

Recording one adds no round trip to the request it records: the event rides the request's own
transaction as an outbox item (:func:`event_op`), or the notice the change queues anyway
(``nimbus_core.accounts.notices``), and the activity function moves it from the outbox's stream to
the activity table, where failures beyond :data:`FAILURES_PER_HOUR` an hour are counted by one
event. A request that makes no transaction (a failed sign-in or reverification, a session deleted)
stores its event with one write (:func:`record_now`), whose failure is logged and counted, never
answered: no request fails because its event could not be written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools import Logger

from nimbus_core.domain.errors import DependencyError
from nimbus_core.platform import clock, ids, metrics

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.domain.views import ActivityEventView

_log = Logger(child=True)

KEEP_SECONDS = 90 * 24 * 3600
FAILURES_PER_HOUR = 20  # failures recorded one by one per account and hour; one event counts the rest
MAX_USER_AGENT = 512  # of a User-Agent carried to the activity function

Outcome = Literal["success", "failure"]


class EventType(StrEnum):
    """What an event records. Notices keep the name of the notice they sent."""

    SIGN_IN = "sign-in"
    REVERIFY = "reverify"  # a failed reverification (a right one is the change that follows)
    FAILURES = "more-failures"  # counts the failures of an hour beyond FAILURES_PER_HOUR
    SESSION_REVOKED = "session-revoked"
    SESSIONS_REVOKED = "sessions-revoked"
    RECOVERY = "password-reset"
    USERNAME_CHANGED = "username-changed"
    ACCOUNT_CHANGED = "account-changed"  # a staff change without a notice of its own
    BANNED = "banned"
    UNBANNED = "unbanned"


@dataclass(frozen=True, slots=True)
class ActivityEvent:
    """One security event of ``user_id``'s account."""

    id: str  # a ULID: the events of an account sort by it, newest last
    user_id: str
    type: str  # an EventType, or a notice's name ("password-changed")
    at: str
    outcome: Outcome = "success"
    ip: str | None = None
    device: str | None = None
    method: str | None = None
    code: str | None = None
    session_id: str | None = None
    count: int = 1  # of the failures a FAILURES event stands for
    details: tuple[str, ...] = field(default=())
    # The User-Agent of an event whose device has no name yet: the activity function names it.
    user_agent: str | None = None

    @property
    def failed(self) -> bool:
        """Whether it records a failure (bounded per account and hour)."""
        return self.outcome == "failure"

    def to_public(self) -> ActivityEventView:
        """The ActivityEvent structure of the API; unset values are null."""
        return {
            "id": self.id,
            "type": self.type,
            "at": self.at,
            "ip": self.ip,
            "device": self.device,
            "method": self.method,
            "outcome": self.outcome,
            "code": self.code,
            "sessionId": self.session_id,
            "count": self.count,
            "details": list(self.details),
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """Where a sign-in or reverification comes from, for the event of its failure: the request's
    IP address, the device (a name the client gave, else its User-Agent, which the activity
    function reads: parsing it is no part of a request's work), and the method (``password``, an
    answer's kind)."""

    ip: str | None
    device: str | None
    user_agent: str | None = None
    method: str = "password"

    def answering(self, method: str) -> Attempt:
        """The same attempt, answering with ``method`` (a second factor's kind)."""
        return Attempt(self.ip, self.device, self.user_agent, method)


def new_event(
    user_id: str,
    type_: str,
    *,
    now: float,
    outcome: Outcome = "success",
    attempt: Attempt | None = None,
    code: str | None = None,
    ip: str | None = None,
    device: str | None = None,
    method: str | None = None,
    session_id: str | None = None,
    details: Sequence[str] = (),
    user_agent: str | None = None,
) -> ActivityEvent:
    """An event of ``user_id``'s account happening ``now`` (``attempt``: the IP, device and method
    of a sign-in or reverification)."""
    if attempt is not None:
        ip, device, method = attempt.ip, attempt.device, method or attempt.method
        user_agent = attempt.user_agent
    return ActivityEvent(
        id=ids.new_id_at(round(now * 1000)),
        user_id=user_id,
        type=type_,
        at=clock.iso(now),
        outcome=outcome,
        ip=ip,
        device=device,
        method=method,
        code=code,
        session_id=session_id,
        details=tuple(details),
        user_agent=None if device else (user_agent or "")[:MAX_USER_AGENT] or None,
    )


def event_op(deps: Deps, recorded: ActivityEvent, now: float) -> WriteOp:
    """The write that carries ``recorded`` in the request's own transaction."""
    return deps.outbox.event_op(recorded, now=now)


def record_now(deps: Deps, recorded: ActivityEvent, now: float) -> None:
    """Store ``recorded`` with one write, for a request with no transaction to carry it; a failed
    write is logged and counted (``ActivityLost``), never raised."""
    try:
        deps.outbox.record_event(recorded, now=now)
    except DependencyError:
        metrics.count(metrics.Event.ACTIVITY_LOST)
        _log.warning(
            "activity event not recorded", extra={"type": recorded.type, "user_id": recorded.user_id}
        )
