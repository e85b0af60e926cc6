"""The sampler thread (RSS, items, mail, invariants) and how memory is judged (docs/performance.md)."""

from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.soak.client import Soak
from nimbus_tools.local.control import ControlError, clear_mail
from nimbus_tools.local.launcher import LocalApiProcess
from tests.invariants import stack_violations

# The memory allowance over the second half, and the one-time step a process may take (module docstring).
FIXED_ALLOWANCE_MIB = 16.0
ITEM_ALLOWANCE_KIB = 8.0
MAIL_ALLOWANCE_KIB = 16.0
STEP_MIB = 4.0
MIB, PAGE = 1024 * 1024, os.sysconf("SC_PAGE_SIZE")
ALLOWANCE = (
    f"{FIXED_ALLOWANCE_MIB:g} MiB + {ITEM_ALLOWANCE_KIB:g} KiB/item + {MAIL_ALLOWANCE_KIB:g} KiB/email"
)


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(x, y)`` points (y per unit of x); 0.0 for fewer than two x."""
    try:
        return statistics.linear_regression(*zip(*points, strict=True)).slope
    except (statistics.StatisticsError, TypeError):  # fewer than two points, or x constant
        return 0.0


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
    per_kib = max(items_added, 0) * ITEM_ALLOWANCE_KIB + max(mails_sent, 0) * MAIL_ALLOWANCE_KIB
    return FIXED_ALLOWANCE_MIB * MIB + per_kib * 1024


def stepless_growth(series: Sequence[int], step: int) -> tuple[int, int]:
    """(The growth of one process's RSS ``series``, less its largest rise between two readings if
    that is at least ``step``: a one-time step, not a leak; that step or 0)."""
    if len(series) < 2:
        return 0, 0
    largest = max(b - a for a, b in itertools.pairwise(series))
    discounted = largest if largest >= step else 0
    return series[-1] - series[0] - discounted, discounted


def memory_figures(samples: Sequence[Sample], warm_up: float, main: int) -> MemoryFigures | None:
    """The figures of ``samples`` (start after ``warm_up`` s; second half from the midpoint of the
    span; ``main``: the local API's pid), or None without two samples in the second half."""
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
    """RSS bytes of ``root`` and every live descendant, from /proc/<pid>/stat."""
    stats: dict[int, tuple[int, int]] = {}  # pid: (parent pid, resident pages)
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError, ValueError):  # not a process, or one that just exited
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            stats[int(entry.name)] = (int(fields[1]), int(fields[21]))
    family, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        frontier += [pid for pid, (ppid, _) in stats.items() if ppid == parent and pid not in family]
        family.update(frontier)
    return {pid: stats[pid][1] * PAGE for pid in family if stats.get(pid, (0, 0))[1]}  # no zombie


EVERY = {"expire": 10.0, "progress": 15.0}  # seconds between deleting finished users' counters, printing
SETTLE_SECONDS = 60.0  # at most, after the traffic, for the stream-fed functions to catch up


def table_items(soak: Soak) -> dict[str, int]:
    """Items per table of the stack (DescribeTable; moto counts them live)."""
    return {
        logical: int(soak.dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0))
        for logical, table in soak.state["tables"].items()
    }


class Sampler:
    """Memory, items and mail every ``every`` seconds; the invariants every ``invariant_every``."""

    def __init__(self, soak: Soak, api: LocalApiProcess | None, every: float, invariant_every: float) -> None:
        self.soak, self.api, self.pid, self.started = soak, api, soak.state["pid"], time.monotonic()
        self.every, self.periods = every, {"check": invariant_every, **EVERY}
        self.samples: list[Sample] = []
        self.violations, self.check_seconds = list[str](), list[float]()  # one duration per check
        self.expired = 0  # rate-limit counters of retired subjects deleted
        self.settled, self.settling = Sample(0, {}, 0, 0), 0.0  # after the traffic (finish)
        self.errors: list[str] = []

    def read(self) -> Sample:
        """One reading (the emulator's captured mail cleared first: it would grow without bound)."""
        try:
            clear_mail(self.soak.state["aws_endpoint_url"])
        except ControlError as error:
            self.errors.append(f"clearing the captured mail: {error}")
        if self.api is not None:  # the launcher keeps every line the server prints: the first will do
            del self.api.stdout[100:]
        mails = int(self.soak.ses.get_send_quota()["SentLast24Hours"])  # moto keeps every one sent
        items = sum(table_items(self.soak).values())
        return Sample(time.monotonic() - self.started, process_tree_rss(self.pid), items, mails)

    def check(self, *, settled: bool) -> None:
        """One check of tests/invariants.py. Its Scans are no snapshot: under traffic, a finding counts
        only if a second check at once repeats it (a real one persists); ``settled``, every one."""
        started, tables = time.perf_counter(), self.soak.state["tables"]
        found = stack_violations(self.soak.dynamodb, tables)
        if found and not settled:
            found = [f for f in found if f in set(stack_violations(self.soak.dynamodb, tables))]
        self.check_seconds.append(time.perf_counter() - started)
        self.violations += found

    def run(self) -> None:
        """Until the traffic has stopped."""
        due = {task: self.started + period for task, period in self.periods.items()}
        while not self.soak.stop.wait(
            max(0.0, self.started + len(self.samples) * self.every - time.monotonic())
        ):
            try:
                self.samples.append(reading := self.read())
                now, soak = time.monotonic(), self.soak
                for task in [task for task, at in due.items() if now >= at]:
                    due[task] = now + self.periods[task]
                    if task == "expire":
                        self.expired += soak.expire_counters()
                    elif task == "check":
                        self.check(settled=False)
                    else:
                        main, errors = reading.rss.get(self.pid, 0) / MIB, soak.counts["server_errors"]
                        print(
                            f"  {reading.at:5.0f} s {soak.requests:7d} requests  {errors} 5xx  RSS"
                            f" {reading.total / MIB:6.1f} MiB (main {main:5.1f})  {reading.items} items"
                            f"  {reading.mails} emails",
                            flush=True,
                        )
            except Exception:
                self.errors.append(traceback.format_exc())
                self.soak.counts["soak_errors"] += 1

    def finish(self) -> None:
        """After the traffic: a last judged sample; the stream-fed functions' catching up (mail
        sent, sweeps) until items and mail stop changing; the last invariant check."""
        self.samples.append(self.read())
        started = time.monotonic()
        self.expired += self.soak.expire_counters()
        last = self.read()
        while time.monotonic() - started < SETTLE_SECONDS:
            time.sleep(self.every)
            previous, last = last, self.read()
            if (last.items, last.mails) == (previous.items, previous.mails):
                break
        self.settled, self.settling = last, time.monotonic() - started
        self.check(settled=True)
