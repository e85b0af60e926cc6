"""The ports of what the deployment shares beside the accounts: :class:`CounterStore` (rate-limit
counters), :class:`DomainStore` (the offered domains), :class:`Outbox` (outgoing mail and recovery
requests) and :class:`RuntimeConfigSource` (kill switches and log level)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nimbus_core.domain.activity import ActivityEvent
    from nimbus_core.domain.killswitches import KillSwitch
    from nimbus_core.domain.models import Domain, Email
    from nimbus_core.domain.ports import CounterState, RecoveryRequest, RuntimeConfig, WriteOp


class CounterStore(Protocol):
    """Atomic fixed-window counters."""

    def hit(self, key: str, *, limit: int, window: int, now: float) -> CounterState:
        """Count one request if the window has room; report the state either way."""
        ...

    def release(self, key: str, *, reset_at: int) -> None:
        """Give one hit back, only within the same window."""
        ...

    def release_op(self, key: str, *, reset_at: int) -> WriteOp:
        """:meth:`release` as part of a transaction; raises :class:`CounterWindowMovedError` when
        committed in another window (the caller then commits without it)."""
        ...


class DomainStore(Protocol):
    """The domains the deployment offers."""

    def list(self) -> list[Domain]:
        """Every offered domain, sorted by name."""
        ...

    def get(self, name: str) -> Domain | None:
        """One domain, or None."""
        ...

    def put(self, name: str, *, subdomains: bool, now: str) -> bool:
        """Offer a domain or update it; True if it was new."""
        ...

    def delete(self, name: str) -> bool:
        """Stop offering a domain; False if it was not offered."""
        ...


class Outbox(Protocol):
    """Outgoing email, written in the same transaction as the change that sends it; and the
    recovery requests the recovery function turns into mail."""

    def enqueue_op(
        self, email: Email, *, now: float, kind: str, user_id: str, event: ActivityEvent | None = None
    ) -> WriteOp:
        """Queue ``email``, about user ``user_id``, for the mail function; with ``event``, the same
        item carries the activity event it records to the activity function."""
        ...

    def event_op(self, event: ActivityEvent, *, now: float) -> WriteOp:
        """Carry ``event`` to the activity function, in the request's own transaction."""
        ...

    def record_event(self, event: ActivityEvent, *, now: float) -> None:
        """Carry ``event`` to the activity function now (one write), for a request that makes
        no transaction to carry it."""
        ...

    def discard_for(self, user_id: str) -> int:
        """Remove every stored message about ``user_id`` (a deleted user's pending mail, and what
        an operator could otherwise replay); how many were removed."""
        ...

    def queue_recovery(self, login_name: str, *, now: float) -> RecoveryRequest:
        """Store a recovery request for ``login_name`` (one write, whatever the name)."""
        ...

    def recovery_done_op(self, request_id: str) -> WriteOp:
        """Remove the request, on condition that it is still stored: a second handling of it is
        refused with :class:`RecoveryRequestGoneError`, so its mail goes out once."""
        ...


class RuntimeConfigSource(Protocol):
    """Kill switches and log level, at most a few seconds old."""

    def current(self) -> RuntimeConfig:
        """The current runtime configuration."""
        ...

    def write_killswitches(
        self, change: Callable[[frozenset[KillSwitch]], frozenset[KillSwitch]]
    ) -> RuntimeConfig:
        """Apply ``change`` to the switches as stored now (read afresh, not from the cache) and
        store the result; the configuration after the change (this container sees it at once,
        every other one within the cache age)."""
        ...

    def write_log_level(self, name: str) -> RuntimeConfig:
        """Store the log level ``name`` (one of the five); the configuration after the change."""
        ...
