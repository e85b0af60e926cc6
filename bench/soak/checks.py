"""The invariant checks of tests/invariants.py, run against the stack while the soak runs."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bench.soak.client import Soak
from tests.invariants import stack_violations


def invariant_violations(soak: Soak) -> list[str]:
    """What tests/invariants.py finds broken in the stack's tables (users, sessions, tokens, outbox)."""
    return stack_violations(soak.dynamodb, soak.state["tables"])


@dataclass
class Checks:
    """Invariant checks run, and the violations they found."""

    name: str = "tests/invariants.py stack_violations"
    runs: int = 0
    violations: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def check(self, soak: Soak, *, settled: bool) -> None:
        """One check. Its Scans are no snapshot, so while traffic runs one can read a table before a
        transaction and the next after it: a finding then counts only if a second check at once finds
        it too (a real one persists). ``settled``: no traffic runs, every finding counts."""
        started = time.perf_counter()
        found = invariant_violations(soak)
        if found and not settled:
            again = set(invariant_violations(soak))
            found = [f for f in found if f in again]
        self.seconds.append(time.perf_counter() - started)
        self.runs += 1
        self.violations += found
