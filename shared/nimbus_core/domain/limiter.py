"""Endpoint rate limits: the limiter owns its counter keys, the HTTP layer owns the headers."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nimbus_core.domain.ports import CounterState, CounterThrottledError, WriteOp
from nimbus_core.domain.ratelimits import RateLimit

if TYPE_CHECKING:
    from nimbus_core.domain.deployment_ports import CounterStore


@dataclass(frozen=True, slots=True)
class Hit:
    """One counted request: the decision and how to give it back if the response is not counted."""

    limit: RateLimit
    key: str
    state: CounterState


class RefusalMemo:
    """Refusals the counter store already made, repeated until their window ends.

    A fixed window that refused stays refused until it resets (the store never counts past the
    limit), so repeating that answer lets nothing through that the store would have let through;
    it only spares the flooding address's counter item the write a refusal costs. Bounded: the
    least recently refused key is forgotten first, and a forgotten key is simply asked again.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._refusals: OrderedDict[str, CounterState] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._refusals)

    def refusal(self, key: str, now: float) -> CounterState | None:
        """The refusal of ``key`` if its window is still open at ``now`` (the store's own test)."""
        with self._lock:
            state = self._refusals.get(key)
            if state is None:
                return None
            if state.reset_at <= int(now):
                del self._refusals[key]
                return None
            self._refusals.move_to_end(key)
            return state

    def remember(self, key: str, state: CounterState) -> None:
        """Keep a refusal the store made, forgetting the least recent one beyond the bound."""
        if self._size <= 0:
            return
        with self._lock:
            self._refusals[key] = state
            self._refusals.move_to_end(key)
            while len(self._refusals) > self._size:
                self._refusals.popitem(last=False)

    def forget(self, key: str) -> None:
        """Drop ``key`` (a hit given back on this instance may have reopened its window)."""
        with self._lock:
            self._refusals.pop(key, None)

    def clear(self) -> None:
        """Forget every refusal, as a new instance starts (the counters were put back to a state
        in which they may not hold)."""
        with self._lock:
            self._refusals.clear()


# One memo per counter store: the production store lives as long as the Lambda instance, so the
# memo does too, and each test's fresh store starts with an empty one.
_MEMOS: weakref.WeakKeyDictionary[CounterStore, RefusalMemo] = weakref.WeakKeyDictionary()
_MEMOS_LOCK = threading.Lock()


def memo_for(counters: CounterStore) -> RefusalMemo:
    """The refusal memo of ``counters`` on this instance."""
    with _MEMOS_LOCK:
        memo = _MEMOS.get(counters)
        if memo is None:
            memo = _MEMOS[counters] = RefusalMemo()
        return memo


# When the store throttles the counter item itself, the caller is told to come back in a second:
# the partition's capacity is per second, and no window is known to quote.
THROTTLED_RETRY_AFTER = 1


class RateLimiter:
    """Fixed windows counted atomically in a :class:`CounterStore`, refusals repeated from memory."""

    def __init__(self, counters: CounterStore, memo: RefusalMemo | None = None) -> None:
        self._counters = counters
        self._memo = memo if memo is not None else memo_for(counters)

    @staticmethod
    def key(limit: RateLimit, subject: str) -> str:
        """The counter of ``limit`` for one IP address or user id."""
        return f"{limit.name}#{limit.per.value}#{subject}"

    def hit(self, limit: RateLimit, subject: str, now: float) -> Hit:
        """Count one request of ``subject`` against ``limit``.

        A refusal this instance already saw in the same window is answered without the store; a
        throttled counter item is a refusal for :data:`THROTTLED_RETRY_AFTER` seconds.
        """
        key = self.key(limit, subject)
        remembered = self._memo.refusal(key, now)
        if remembered is not None:
            return Hit(limit, key, remembered)
        try:
            state = self._counters.hit(key, limit=limit.limit, window=limit.window, now=now)
        except CounterThrottledError:
            return Hit(
                limit, key, CounterState(False, limit.limit, limit.limit, int(now) + THROTTLED_RETRY_AFTER)
            )
        if not state.allowed:
            self._memo.remember(key, state)
        return Hit(limit, key, state)

    def give_back(self, hit: Hit) -> CounterState:
        """Return the hit of a response the endpoint does not count; the state as it now is.

        A refused hit counted nothing (the store refused it, or the memo repeated that), so there is
        nothing to give back.
        """
        if not hit.state.allowed:
            return hit.state
        self._memo.forget(hit.key)
        self._counters.release(hit.key, reset_at=hit.state.reset_at)
        return self.given_back(hit)

    def give_back_op(self, hit: Hit) -> WriteOp:
        """:meth:`give_back` as part of the transaction that answers the request."""
        self._memo.forget(hit.key)
        return self._counters.release_op(hit.key, reset_at=hit.state.reset_at)

    @staticmethod
    def given_back(hit: Hit) -> CounterState:
        """The state once ``hit`` is given back."""
        state = hit.state
        return CounterState(state.allowed, max(state.count - 1, 0), state.limit, state.reset_at)
