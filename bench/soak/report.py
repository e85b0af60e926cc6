"""The printed figures: requests, latency percentiles per kind, failures, memory, invariants."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from bench.soak.client import Soak
from bench.soak.memory import (
    FIXED_ALLOWANCE_MIB,
    ITEM_ALLOWANCE_KIB,
    MAIL_ALLOWANCE_KIB,
    MIB,
    MemoryFigures,
    Sample,
)
from bench.soak.recorder import Recorder
from bench.soak.sampler import Sampler
from bench.table import render

SHOWN_FAILURES = 20


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; NaN if empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * min(max(q, 0.0), 100.0) / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def format_kinds(recorder: Recorder) -> str:
    """Per kind of request: count, statuses, latency percentiles."""
    rows = []
    for kind in sorted(recorder.kinds, key=lambda k: (k.split(" ", 1)[1].split(" [")[0], k)):
        figures = recorder.kinds[kind]
        statuses = " ".join(f"{status}x{count}" for status, count in sorted(figures.statuses.items()))
        latencies = figures.latencies_ms
        rows.append(
            [
                kind,
                str(figures.statuses.total()),
                statuses,
                *(_ms(percentile(latencies, q)) for q in (50, 95, 99)),
            ]
        )
    headers = ["request", "count", "statuses", "p50 ms", "p95 ms", "p99 ms"]
    return render(headers, rows, right=frozenset({1, 3, 4, 5}))


def format_memory(memory: MemoryFigures | None, samples: Sequence[Sample]) -> str:
    """The memory figures, in MiB."""
    if memory is None:
        return "  too few samples"
    first, last = samples[0], samples[-1]
    workers = memory.growth - memory.main_growth
    lines = [
        f"  RSS of the local API and its {len(last.rss) - 1} child processes: start {memory.start / MIB:.1f}"
        f" MiB (after the warm-up), peak {memory.peak / MIB:.1f} MiB, end {memory.end / MIB:.1f} MiB",
        f"  second half, the {memory.steady_processes} processes alive throughout ({memory.spawned} spawned"
        f" meanwhile, not counted): slope {memory.slope_per_minute / MIB:+.2f} MiB/min;",
        f"    growth {memory.growth / MIB:+.2f} MiB ({memory.main_growth / MIB:+.2f} in the main process:"
        f" emulator, gateway; {workers / MIB:+.2f} in the workers), less {memory.steps} one-time"
        f" steps of {memory.stepped / MIB:.1f} MiB in all",
        f"  data: {first.items} items at the first sample, {last.items} at the end"
        f" ({memory.items_added:+d} in the second half); {last.mails - first.mails} emails sent"
        f" ({memory.mails_sent} in the second half)",
        f"  allowance: {FIXED_ALLOWANCE_MIB:g} MiB + {ITEM_ALLOWANCE_KIB:g} KiB/item + {MAIL_ALLOWANCE_KIB:g}"
        f" KiB/email = {memory.allowance / MIB:.1f} MiB: {'OK' if memory.ok else 'EXCEEDED'}",
    ]
    return "\n".join(lines)


def report(
    soak: Soak, sampler: Sampler, memory: MemoryFigures | None, elapsed: float, args: argparse.Namespace
) -> None:
    """Print the figures."""
    recorder = soak.recorder
    requests = recorder.requests
    print()
    print(
        f"{requests} requests in {elapsed:.1f} s ({requests / elapsed:.1f} req/s) from {recorder.lives}"
        f" simulated users ({sum(recorder.aborted.values())} cut short), {args.clients} at a time,"
        " and one staff member"
    )
    print("A 401 on a kind that has a '2fa' row is mostly the second-factor challenge that row answers.")
    print()
    print(format_kinds(recorder))
    print()
    print(
        f"5xx answers: {recorder.server_errors}; no answer: {recorder.transport_errors}; "
        f"hostile requests accepted: {recorder.accepted_hostile}"
    )
    for failure in recorder.failures[:SHOWN_FAILURES]:
        print(f"  {failure.what}: {failure.kind}")
        print(f"    request:  {failure.request}")
        print(f"    response: {failure.response}")
    if len(recorder.failures) > SHOWN_FAILURES:
        print(f"  ... and {len(recorder.failures) - SHOWN_FAILURES} more")
    if recorder.aborted:
        print("Lives cut short (a 4xx where the user needed a success; counted, not failed):")
        for reason, count in recorder.aborted.most_common(10):
            print(f"  {count} x {reason}")
    print()
    print("Memory")
    print(format_memory(memory, sampler.samples))
    print(f"  ({len(sampler.samples)} samples while the traffic ran, every {args.sample_seconds:g} s)")


def print_invariants(sampler: Sampler) -> None:
    """The invariant checks and what they found."""
    checks = sampler.checks
    print(
        f"Invariants ({checks.name}): {checks.runs} checks,"
        f" the longest {max(checks.seconds, default=0):.2f} s;"
        f" {len(checks.violations)} violations"
    )
    for violation in checks.violations[:SHOWN_FAILURES]:
        print(f"  {violation}")
    for error in sampler.errors[:5]:
        print(f"Sampler error: {error}")
