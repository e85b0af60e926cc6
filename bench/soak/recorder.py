"""What the soak records of every request (kind, status, latency, failures, from every thread), and
the answers a simulated user cannot go on from."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """An HTTP response, decoded."""

    status: int
    body: Any

    @property
    def code(self) -> str:
        """The body's ``code`` (errors and successes), or ''."""
        return str(self.body.get("code", "")) if isinstance(self.body, dict) else ""


@dataclass
class Failure:
    """A request that failed the soak, as it was sent and answered."""

    kind: str
    what: str
    request: str
    response: str


@dataclass
class KindFigures:
    """Counts and latencies of one kind of request."""

    statuses: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)


class Recorder:
    """Every request's kind, status and latency, and the failures, from every thread."""

    def __init__(self) -> None:
        self.kinds: dict[str, KindFigures] = {}
        self.failures: list[Failure] = []
        self.server_errors = 0
        self.transport_errors = 0
        self.accepted_hostile = 0
        self.soak_errors = 0
        self.aborted: Counter[str] = Counter()
        self.lives = 0
        self._lock = threading.Lock()

    @property
    def requests(self) -> int:
        """Requests answered so far."""
        with self._lock:
            return sum(k.statuses.total() for k in self.kinds.values())

    def record(self, kind: str, status: int, ms: float) -> None:
        """One answered request."""
        with self._lock:
            figures = self.kinds.setdefault(kind, KindFigures())
            figures.statuses[status] += 1
            figures.latencies_ms.append(ms)

    def fail(self, failure: Failure, counter: str) -> None:
        """A failing request (``counter``: which count it adds to)."""
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            if len(self.failures) < 1000:
                self.failures.append(failure)

    def abort(self, reason: str) -> None:
        """A user's life cut short by an answer it could not go on from (not a failure)."""
        with self._lock:
            self.aborted[reason] += 1

    def life_done(self) -> None:
        """One simulated user lived (to the end, or aborted)."""
        with self._lock:
            self.lives += 1


class LifeAbortedError(Exception):
    """An answer the simulated user cannot go on from (a 4xx where a success was needed)."""


def shorten(data: Any, limit: int = 600) -> str:
    """``data`` as text for a failure's report, cut at ``limit`` characters."""
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def expect(reply: Reply, *statuses: int, what: str) -> Reply:
    """``reply`` if its status is one of ``statuses``; else the life cannot go on."""
    if reply.status not in statuses:
        raise LifeAbortedError(f"{what}: {reply.status} {reply.code or shorten(reply.body, 80)}")
    return reply
