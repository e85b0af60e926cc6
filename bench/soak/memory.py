"""How the soak measures and judges memory: RSS samples, their slope, the growth and its allowance.

The RSS of the local API's process and its descendants (the moto emulator, the gateway and the HTTP
server live in the main process, each function's warm workers are its children) is read from /proc
every ``--sample-seconds``. moto keeps every item in memory, so a growing data set raises the RSS
legitimately. The data set is therefore kept bounded rather than judged per item: every user deletes
its account at the end of its life (its sessions, factors, tokens and stored mail go with it), the
staff member deletes its victims, the emulator's captured mail is cleared at every sample, and the
rate-limit counters of finished users (their addresses and ids: no request comes from them
again) are deleted every ``EXPIRY_SECONDS`` (sampler.py), as DynamoDB's TTL would once
their windows closed; moto has no TTL. What stays is counted and allowed for: items still added (sweeps
behind, counters of live users) and moto's own record of every email SES sent, which no API clears.

The figure judged is the growth over the second half of the run of the processes alive through all
of it (a worker spawned late is new memory, not growth), each less its largest rise between two
readings if that rise is a step of at least ``STEP_MIB``: a one-time step, not a leak (a worker's
first argon2 hash leaves 19 MiB mapped; its first request on a route imports that route's modules).
It must stay within

    allowance = 16 MiB + 8 KiB per item added + 16 KiB per email sent (over the second half)

The per-item and per-email figures are twice what moto was measured to keep (tracemalloc, in
process: 1.2 KiB per counter item, 4.8 KiB per outbox message, 7.7 KiB per email sent), so data
never fails the soak. The fixed 16 MiB is noise: RSS read between requests across some twenty
processes, and memory that settles late (pymalloc arenas kept after a peak, caches filling). With
moto's instance tracker emptied (see docs/performance.md, "Soak") the default run measured +6 MiB
and a five-minute run +3 MiB. At about 30 requests a second, 16 MiB is 8 KiB per request of the
default run's second half, and under 1 KiB per request for ``--minutes 20``: run longer to catch
smaller leaks.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The memory allowance over the second half, and the one-time step a process may take (module docstring).
FIXED_ALLOWANCE_MIB = 16.0
ITEM_ALLOWANCE_KIB = 8.0
MAIL_ALLOWANCE_KIB = 16.0
STEP_MIB = 4.0
MIB = 1024 * 1024


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(x, y)`` points (y per unit of x); 0.0 for fewer than two x."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


@dataclass(frozen=True)
class Sample:
    """One reading: seconds since the traffic started, RSS bytes per process, items, mail sent."""

    at: float
    rss: dict[int, int]
    items: int
    mails: int

    @property
    def total(self) -> int:
        """The RSS of every process of the local API, in bytes."""
        return sum(self.rss.values())


@dataclass(frozen=True)
class MemoryFigures:
    """What the samples say about memory, and whether the growth stays within the allowance."""

    start: int  # bytes, every process, the first sample after the warm-up
    peak: int
    end: int
    steady_processes: int  # alive through the whole second half
    spawned: int  # processes that appeared during the second half
    slope_per_minute: float  # bytes per minute, steady processes, second half (least squares)
    growth: int  # bytes, steady processes, second half, less each one's one-time step: judged
    main_growth: int  # bytes, the part of it in the main process (emulator, gateway, HTTP server)
    steps: int  # one-time steps discounted (processes whose largest rise was at least STEP_MIB)
    stepped: int  # bytes discounted
    items_added: int  # over the second half
    mails_sent: int  # over the second half
    allowance: float  # bytes

    @property
    def ok(self) -> bool:
        """Whether the growth stays within the allowance."""
        return self.growth <= self.allowance


def allowance_bytes(items_added: int, mails_sent: int) -> float:
    """The growth the second half may show for ``items_added`` and ``mails_sent`` (module docstring)."""
    return (
        FIXED_ALLOWANCE_MIB * MIB
        + max(items_added, 0) * ITEM_ALLOWANCE_KIB * 1024
        + max(mails_sent, 0) * MAIL_ALLOWANCE_KIB * 1024
    )


def stepless_growth(series: Sequence[int], step: int) -> tuple[int, int]:
    """The growth of one process's RSS ``series`` (first to last), less its largest rise between two
    readings when that rise is at least ``step``: a one-time step, not a leak (a worker's first
    argon2 hash keeps 19 MiB mapped, its first request on a route imports that route's modules).
    Returns (growth, the step discounted or 0)."""
    if len(series) < 2:
        return 0, 0
    largest = max(b - a for a, b in itertools.pairwise(series))
    discounted = largest if largest >= step else 0
    return series[-1] - series[0] - discounted, discounted


def memory_figures(samples: Sequence[Sample], warm_up: float, main: int) -> MemoryFigures | None:
    """The figures of ``samples`` (in time order): start after ``warm_up`` seconds, the second half
    from the midpoint of the sampled span; ``main`` is the local API's own pid. None without two
    samples in the second half."""
    if not samples:
        return None
    measured = [s for s in samples if s.at >= warm_up] or list(samples)
    middle = (samples[0].at + samples[-1].at) / 2
    second = [s for s in samples if s.at >= middle]
    if len(second) < 2:
        return None
    steady = set.intersection(*(set(s.rss) for s in second))
    spawned = set.union(*(set(s.rss) for s in second)) - set(second[0].rss)
    points = [(s.at, float(sum(s.rss[pid] for pid in steady))) for s in second]
    per_process = {pid: stepless_growth([s.rss[pid] for s in second], int(STEP_MIB * MIB)) for pid in steady}
    items_added = second[-1].items - second[0].items
    mails_sent = second[-1].mails - second[0].mails
    return MemoryFigures(
        start=measured[0].total,
        peak=max(s.total for s in measured),
        end=samples[-1].total,
        steady_processes=len(steady),
        spawned=len(spawned),
        slope_per_minute=slope(points) * 60,
        growth=sum(growth for growth, _ in per_process.values()),
        main_growth=per_process.get(main, (0, 0))[0],
        steps=sum(1 for _, step in per_process.values() if step),
        stepped=sum(step for _, step in per_process.values()),
        items_added=items_added,
        mails_sent=mails_sent,
        allowance=allowance_bytes(items_added, mails_sent),
    )


def process_tree_rss(root: int) -> dict[int, int]:
    """RSS bytes of ``root`` and every descendant (read from /proc; a process that exits while it is
    read is left out)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    family, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in family]
        family.update(children)
        frontier += children
    rss: dict[int, int] = {}
    for pid in family:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[pid] = int(line.split()[1]) * 1024
    return rss
