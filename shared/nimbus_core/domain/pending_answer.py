"""The writes that record a reverification, waiting for the change it allows.

A reverified request (CONTRACT section 9) passes with writes of its own: the challenge its second
factor answered, used up; the factor's replay guard, moved; a password's stored hash of another
profile, replaced. They belong in the change's first transaction, so the change and the used-up
challenge land together or not at all, at no round trip of their own.

The guard hands them to the route as ``request.answer``; the route passes it to its service, and the
service commits through it (:meth:`PendingAnswer.commit`) where it would commit alone. Nothing swaps
the request's transactor: a reader of a service sees what its commit carries. Whatever no commit
carried (a route whose change is no DynamoDB write, or a refusal before the write) the guard records
on its own once the route has answered (:meth:`PendingAnswer.record`).
"""

from __future__ import annotations

from collections.abc import Sequence

from nimbus_core.domain.errors import UserChangedError
from nimbus_core.domain.ports import Transactor, WriteOp


class PendingAnswer:
    """A reverification's writes, recorded at most once: with the first commit made through it,
    or alone by :meth:`record`. A commit attempted through it takes them, landed or not (a commit
    refused by a condition wrote nothing, so the challenge stays as it was), except a stale read's,
    which the change rebuilds and commits again: the rebuilt one carries them, unless they landed
    on their own already."""

    def __init__(self, writes: Sequence[WriteOp] = ()) -> None:
        self._waiting: list[WriteOp] | None = list(writes) or None

    @property
    def waiting(self) -> bool:
        """Whether there are writes no commit has carried yet."""
        return self._waiting is not None

    def commit(self, tx: Transactor, ops: Sequence[WriteOp]) -> None:
        """Commit the change ``ops`` with ``tx``, the waiting writes first in the same transaction."""
        if self._waiting is None:
            tx.commit(ops)
        else:
            self.commit_joined(tx, [], ops)

    def commit_joined(self, tx: Transactor, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """As :meth:`Transactor.commit_joined`, the waiting writes first (they may write an item
        ``then`` writes too: a rehash of the user the change updates)."""
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            tx.commit_joined(first, then)
            return
        try:
            tx.commit_joined([*waiting, *first], then)
        except UserChangedError as stale:
            # The change is rebuilt on a fresh read and committed again: unless the waiting writes
            # landed on their own already, the rebuilt change must carry them.
            if not stale.first_landed:
                self._waiting = waiting
            raise

    def record(self, tx: Transactor) -> None:
        """Commit the waiting writes alone, if no change carried them."""
        waiting, self._waiting = self._waiting, None
        if waiting:
            tx.commit(waiting)


NO_ANSWER = PendingAnswer()
"""Nothing to record (a request that did not reverify): commits through it go straight to the
transactor, and it never holds writes, so one instance serves every caller."""
