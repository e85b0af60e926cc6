"""The parallel run's order (tests/conftest.py): the tests marked ``long`` or ``waits`` head every
xdist worker's share, whatever the number of workers, and every test is still run once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import pytest_collection_modifyitems


@dataclass
class _Item:
    name: str
    marks: tuple[str, ...] = ()

    def iter_markers(self, name: str) -> Iterator[str]:
        return iter([mark for mark in self.marks if mark == name])


def _ordered(items: list[_Item], workers: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    listed: list[Any] = list(items)
    pytest_collection_modifyitems(listed)
    return [item.name for item in listed]


def _suite() -> list[_Item]:
    plain = [_Item(f"t{n}") for n in range(20)]
    long_1, long_2 = _Item("L1", ("long",)), _Item("L2", ("long",))
    waits = [_Item(f"W{n}", ("waits",)) for n in (1, 2, 3)]
    return [*plain[:5], long_1, *plain[5:12], waits[0], *plain[12:], long_2, *waits[1:]]


def test_two_workers_each_start_their_half_with_the_long_and_waiting_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ordered = _ordered(_suite(), 2, monkeypatch)

    first, second = ordered[:12], ordered[12:]  # worksteal's first split: 25 tests, 12 and 13
    assert first[:3] == ["L1", "L2", "W3"]
    assert second[:2] == ["W1", "W2"]
    assert [name for name in ordered if name.startswith("t")] == [f"t{n}" for n in range(20)]


def test_three_workers_get_one_head_each_and_no_test_is_lost_or_repeated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    suite = _suite()
    ordered = _ordered(suite, 3, monkeypatch)

    shares = [ordered[:8], ordered[8:16], ordered[16:]]  # 25 tests: 8, 8 and 9
    assert [share[:2] for share in shares] == [["L1", "W2"], ["W1", "W3"], ["L2", "t12"]]
    assert sorted(ordered) == sorted(item.name for item in suite)


def test_without_xdist_the_long_and_waiting_tests_simply_go_first(monkeypatch: pytest.MonkeyPatch) -> None:
    ordered = _ordered(_suite(), 1, monkeypatch)

    assert ordered[:5] == ["L1", "W1", "L2", "W2", "W3"]
