"""A reverified change that must be rebuilt on a fresh read carries its challenge answer again,
unless the answer already landed: an answer is recorded exactly once."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nimbus_core.domain.errors import UserChangedError
from nimbus_core.domain.pending_answer import PendingAnswer
from nimbus_core.domain.ports import WriteOp

ANSWER: list[WriteOp] = [WriteOp()]
CHANGE: list[WriteOp] = [WriteOp()]


class Stale:
    """A transactor whose first joined commit finds the user changed; it records what landed."""

    def __init__(self, *, first_landed: bool) -> None:
        self.first_landed = first_landed
        self.calls: list[list[WriteOp]] = []

    def commit(self, ops: Sequence[WriteOp]) -> None:
        self.calls.append(list(ops))

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        self.calls.append([*first, *then])
        if len(self.calls) == 1:
            raise UserChangedError(first_landed=self.first_landed)


def test_a_stale_change_rebuilt_carries_the_unrecorded_answer_again() -> None:
    inner = Stale(first_landed=False)
    answer = PendingAnswer(ANSWER)

    with pytest.raises(UserChangedError):
        answer.commit(inner, CHANGE)
    answer.commit(inner, CHANGE)
    answer.record(inner)

    assert inner.calls == [[*ANSWER, *CHANGE], [*ANSWER, *CHANGE]]


def test_an_answer_that_landed_before_the_stale_change_is_not_written_twice() -> None:
    inner = Stale(first_landed=True)
    answer = PendingAnswer(ANSWER)

    with pytest.raises(UserChangedError):
        answer.commit(inner, CHANGE)
    answer.commit(inner, CHANGE)
    answer.record(inner)

    assert inner.calls == [[*ANSWER, *CHANGE], [*CHANGE]]
