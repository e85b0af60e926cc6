"""The printed figures (requests, latency percentiles per kind, failures, memory, invariants) and the
verdict: the reasons the soak fails."""

from __future__ import annotations

import argparse
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from bench.soak.client import Soak
from bench.soak.memory import ALLOWANCE, MIB, MemoryFigures, Sample, Sampler, table_items
from bench.table import render

SHOWN = 20  # failures and violations shown


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; NaN if empty."""
    if not values:
        return math.nan
    return [min(values), *statistics.quantiles(values, n=100, method="inclusive"), max(values)][q]


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def format_kinds(soak: Soak) -> str:
    """Per kind of request: count, statuses, latency percentiles."""
    rows = []
    for kind, answers in sorted(soak.kinds.items(), key=lambda k: (k[0].split(" ", 2)[1], k[0])):
        statuses, latencies = Counter(status for status, _ in answers), [ms for _, ms in answers]
        shown = " ".join(f"{status}x{count}" for status, count in sorted(statuses.items()))
        rows.append([kind, str(len(answers)), shown, *(_ms(percentile(latencies, q)) for q in (50, 95, 99))])
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
        f"  allowance: {ALLOWANCE} = {memory.allowance / MIB:.1f} MiB: {'OK' if memory.ok else 'EXCEEDED'}",
    ]
    return "\n".join(lines)


def report(
    soak: Soak, sampler: Sampler, memory: MemoryFigures | None, args: argparse.Namespace, elapsed: float
) -> None:
    """Print the figures."""
    requests, counts, settled = soak.requests, soak.counts, sampler.settled
    left = ", ".join(f"{table} {count}" for table, count in table_items(soak).items() if count)
    lines = [
        f"\n{requests} requests in {elapsed:.1f} s ({requests / elapsed:.1f} req/s) from {counts['lives']}"
        f" simulated users ({soak.aborted.total()} cut short), {args.clients} at a time, and one staff"
        " member",
        "A 401 on a kind that has a '2fa' row is mostly the second-factor challenge that row answers.\n",
        format_kinds(soak),
        f"\n5xx answers: {counts['server_errors']}; no answer: {counts['transport_errors']}; "
        f"hostile requests accepted: {counts['accepted_hostile']}",
        *soak.failures[:SHOWN],
        *([f"  ... and {len(soak.failures) - SHOWN} more"] if len(soak.failures) > SHOWN else []),
        *["Lives cut short (a 4xx where the user needed a success; counted, not failed):"]
        * bool(soak.aborted),
        *(f"  {count} x {reason}" for reason, count in soak.aborted.most_common(10)),
        f"\nMemory\n{format_memory(memory, sampler.samples)}",
        f"  ({len(sampler.samples)} samples while the traffic ran, every {args.sample_seconds:g} s)",
        f"  after the traffic, {sampler.settling:.0f} s for mail and sweeps to catch up: RSS"
        f" {settled.total / MIB:.1f} MiB, {settled.mails} emails sent in all, items left: {left or 'none'}",
        f"  rate-limit counters of finished users deleted (moto has no TTL): {sampler.expired}\n",
        f"Invariants (tests/invariants.py stack_violations): {len(sampler.check_seconds)} checks, the longest"
        f" {max(sampler.check_seconds, default=0):.2f} s; {len(sampler.violations)} violations",
        *(f"  {violation}" for violation in sampler.violations[:SHOWN]),
        *(f"Sampler error: {error}" for error in sampler.errors[:5]),
    ]
    print("\n".join(lines), flush=True)


REASONS = {
    "server_errors": "{} answers with a 5xx status",
    "transport_errors": "{} requests without an answer (connection errors, timeouts)",
    "accepted_hostile": "{} hostile requests answered with a 2xx",
    "soak_errors": "{} errors in the soak's own code (a bug here, see above)",
    "violations": "{} invariant violations",
}


def verdict(counts: Mapping[str, int], memory: MemoryFigures | None) -> list[str]:
    """Why the soak fails, one line per reason (empty when it passes): ``counts`` of :data:`REASONS`
    and ``invariant_checks``, and the memory figures."""
    reasons = [reason.format(counts[key]) for key, reason in REASONS.items() if counts.get(key)]
    if not counts.get("invariant_checks"):
        reasons.append("no invariant check ran")
    if memory is None:
        reasons.append("too few memory samples to judge growth (run longer)")
    elif not memory.ok:
        reasons.append(
            f"memory grew {memory.growth / MIB:.1f} MiB over the second half, "
            f"more than the {memory.allowance / MIB:.1f} MiB allowed"
        )
    return reasons
