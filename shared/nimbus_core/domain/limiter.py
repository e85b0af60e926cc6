"""Endpoint rate limits: the limiter owns its counter keys, the HTTP layer owns the headers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nimbus_core.domain.ports import CounterState, WriteOp
from nimbus_core.domain.ratelimits import RateLimit

if TYPE_CHECKING:
    from nimbus_core.domain.deployment_ports import CounterStore


@dataclass(frozen=True, slots=True)
class Hit:
    """One counted request: the decision and how to give it back if the response is not counted."""

    limit: RateLimit
    key: str
    state: CounterState


class RateLimiter:
    """Fixed windows counted atomically in a :class:`CounterStore`."""

    def __init__(self, counters: CounterStore) -> None:
        self._counters = counters

    @staticmethod
    def key(limit: RateLimit, subject: str) -> str:
        """The counter of ``limit`` for one IP address or user id."""
        return f"{limit.name}#{limit.per.value}#{subject}"

    def hit(self, limit: RateLimit, subject: str, now: float) -> Hit:
        """Count one request of ``subject`` against ``limit``."""
        key = self.key(limit, subject)
        return Hit(limit, key, self._counters.hit(key, limit=limit.limit, window=limit.window, now=now))

    def give_back(self, hit: Hit) -> CounterState:
        """Return the hit of a response the endpoint does not count; the state as it now is."""
        self._counters.release(hit.key, reset_at=hit.state.reset_at)
        return self.given_back(hit)

    def give_back_op(self, hit: Hit) -> WriteOp:
        """:meth:`give_back` as part of the transaction that answers the request."""
        return self._counters.release_op(hit.key, reset_at=hit.state.reset_at)

    @staticmethod
    def given_back(hit: Hit) -> CounterState:
        """The state once ``hit`` is given back."""
        state = hit.state
        return CounterState(state.allowed, max(state.count - 1, 0), state.limit, state.reset_at)
