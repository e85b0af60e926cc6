"""Time, in one place, so every timestamp has the contract's format and tests can move the clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now() -> float:
    """Seconds since the epoch (float). The single source of time for services."""
    return time.time()


def sleep(seconds: float) -> None:
    """Wait ``seconds``: the one place a service waits (a test hands in a recorder instead)."""
    time.sleep(seconds)


def iso(ts: float) -> str:
    """ISO-8601 UTC with milliseconds and a Z suffix, e.g. ``2026-11-21T22:01:11.525Z``."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SystemClock:
    """The :class:`nimbus_core.domain.ports.Clock` of a running function: the wall clock."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return now()
