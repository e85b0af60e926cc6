"""The soak's arithmetic (bench/soak/memory.py, report.py): percentiles, slopes, memory
growth and the verdict."""

from __future__ import annotations

import math

import pytest

from bench.soak.memory import (
    FIXED_ALLOWANCE_MIB,
    MIB,
    STEP_MIB,
    MemoryFigures,
    Sample,
    allowance_bytes,
    memory_figures,
    slope,
    stepless_growth,
)
from bench.soak.report import percentile, verdict

MAIN, WORKER, LATE = 100, 200, 300


def test_percentiles_interpolate_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0) == 1
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 100) == 100
    assert percentile([7.0], 95) == 7
    assert percentile([3.0, 1.0, 2.0], 50) == 2  # order does not matter
    assert math.isnan(percentile([], 50))


def test_slope_is_the_least_squares_fit() -> None:
    assert slope([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2)
    assert slope([(0, 0), (1, 1), (2, 0), (3, 1)]) == pytest.approx(0.2)
    assert slope([(5, 1)]) == 0
    assert slope([(1, 1), (1, 9)]) == 0  # no spread in x


def test_one_step_is_discounted_but_a_steady_rise_is_not() -> None:
    step = 4 * MIB
    assert stepless_growth([10 * MIB, 10 * MIB, 30 * MIB, 30 * MIB], step) == (0, 20 * MIB)
    rising = [i * MIB for i in range(10)]
    assert stepless_growth(rising, step) == (9 * MIB, 0)  # no rise reaches a step: all of it counts
    # A leak that also took a step still counts, less that one step.
    assert stepless_growth([0, MIB, 2 * MIB, 12 * MIB, 13 * MIB], step) == (3 * MIB, 10 * MIB)
    assert stepless_growth([5 * MIB], step) == (0, 0)


def _samples(main: list[int], worker: list[int], *, items: int = 0, mails: int = 0) -> list[Sample]:
    return [
        Sample(at=float(i * 10), rss={MAIN: m * MIB, WORKER: w * MIB}, items=items * i, mails=mails * i)
        for i, (m, w) in enumerate(zip(main, worker, strict=True))
    ]


def test_flat_memory_passes_and_the_figures_read_the_samples() -> None:
    samples = _samples([200, 250, 260, 260, 261, 260, 261], [50, 80, 90, 90, 90, 91, 90])

    memory = memory_figures(samples, warm_up=15, main=MAIN)

    assert memory is not None
    assert (memory.start, memory.peak, memory.end) == (350 * MIB, 351 * MIB, 351 * MIB)
    assert memory.steady_processes == 2
    assert memory.growth == 1 * MIB  # from the midpoint (30 s) on: main 260 -> 261, worker 90 -> 90
    assert memory.main_growth == 1 * MIB
    assert memory.ok


def test_a_leak_fails_and_a_worker_spawned_late_is_not_growth() -> None:
    samples = _samples([200, 220, 240, 260, 280, 300, 320], [50] * 7)
    late = Sample(at=70, rss={MAIN: 340 * MIB, WORKER: 50 * MIB, LATE: 90 * MIB}, items=0, mails=0)

    memory = memory_figures([*samples, late], warm_up=0, main=MAIN)

    assert memory is not None
    assert memory.spawned == 1
    assert memory.growth == memory.main_growth  # the late worker's 90 MiB are not counted
    assert memory.growth > memory.allowance
    assert not memory.ok
    assert memory.slope_per_minute == pytest.approx(120 * MIB)  # 20 MiB per 10 s


def test_data_added_raises_the_allowance() -> None:
    assert allowance_bytes(0, 0) == FIXED_ALLOWANCE_MIB * MIB
    assert allowance_bytes(-50, -1) == FIXED_ALLOWANCE_MIB * MIB  # data removed earns nothing
    assert allowance_bytes(1000, 100) > allowance_bytes(1000, 0) > allowance_bytes(0, 0)
    samples = _samples([200] * 6, [50] * 6, items=100, mails=10)
    memory = memory_figures(samples, warm_up=0, main=MAIN)
    assert memory is not None
    assert (memory.items_added, memory.mails_sent) == (200, 20)  # from the midpoint, 25 s, on
    assert memory.allowance == allowance_bytes(200, 20)


def test_too_few_samples_are_no_figures() -> None:
    assert memory_figures([], warm_up=0, main=MAIN) is None
    assert memory_figures(_samples([200], [50]), warm_up=0, main=MAIN) is None


FLAT = memory_figures(_samples([200] * 6, [50] * 6), warm_up=0, main=MAIN)


def _verdict(memory: MemoryFigures | None = FLAT, **changes: int) -> list[str]:
    return verdict({"invariant_checks": 3, **changes}, memory)  # nothing wrong unless changed


def test_the_verdict_names_every_reason_to_fail() -> None:
    assert _verdict() == []
    assert _verdict(server_errors=2) == ["2 answers with a 5xx status"]
    assert len(_verdict(transport_errors=1, accepted_hostile=1, soak_errors=1)) == 3
    assert _verdict(invariant_checks=0) == ["no invariant check ran"]
    assert _verdict(violations=4) == ["4 invariant violations"]
    assert _verdict(memory=None) == ["too few memory samples to judge growth (run longer)"]
    leaking = memory_figures(_samples([200, 240, 280, 320, 360, 400], [50] * 6), warm_up=0, main=MAIN)
    (reason,) = _verdict(memory=leaking)
    assert reason.startswith("memory grew 40.0 MiB over the second half")  # less one 40 MiB step


def test_the_step_a_process_may_take_is_smaller_than_the_fixed_allowance() -> None:
    # Otherwise a single process could hide a leak as large as the allowance in one rise.
    assert STEP_MIB < FIXED_ALLOWANCE_MIB
