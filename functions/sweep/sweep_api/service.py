"""The session sweeper's rules: delete the stored sessions of a user that can never authenticate.

Revoking every session of a user is one write: its ``session_generation`` goes up, and
authentication refuses any session of an older generation on the read it already makes. The stale
session items stay stored until their TTL (up to years for long-lived scoped sessions), and a
deleted user's sessions can be left behind by a fault. The users table's stream (keys only) tells
this function which user changed; for each one it deletes:

* every stored session and every stored outbox message about the user (what an operator could
  replay; a message the stream already handed to the mail function may still go out), if the user
  is gone;
* otherwise the sessions below the user's current generation (the current ones are kept).

The user is read when the record is processed (strongly consistent), so one sweep covers every
change to that user written before it; a later change brings its own record. Deleting is
idempotent (a missing session is not an error), so a retried or replayed record is harmless, and a
failure raises for the handler to report the record as a batch item failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_lambda_powertools import Logger

from nimbus_core.domain.deps import Deps
from nimbus_core.platform import metrics

# A child of the function's Powertools logger. Counts and ids only: never tokens or hashes.
_log = Logger(child=True)


@dataclass(frozen=True, slots=True)
class Swept:
    """What one sweep of one user did."""

    user_id: str
    user_exists: bool  # False: the user is gone, so every stored session was deleted
    generation: int | None  # the user's current generation (None when the user is gone)
    deleted: int  # session items deleted (ids listed and removed; a missing one counts too)
    mail_discarded: int = 0  # outbox messages removed (the user is gone)


def sweep_user(deps: Deps, user_id: str) -> Swept:
    """Delete ``user_id``'s sessions that cannot authenticate; raise if the store fails.

    One GetItem, one Query (a further page per MB of stored sessions) and one BatchWriteItem per
    25 stale sessions; nothing is written when nothing is stale. A gone user also costs one Query
    of the outbox's UserIndex (and a BatchWriteItem per 25 messages found), and one Query per MB of
    its activity (and a BatchWriteItem per 25 events).
    """
    user = deps.users.get(user_id)
    discarded = 0
    if user is None:
        stale = deps.sessions.list_ids(user_id)
        discarded = deps.outbox.discard_for(user_id)
        deps.activity.delete_all(user_id)
    else:
        stale = deps.sessions.list_ids(user_id, below_generation=user.session_generation)
    if stale:
        deps.sessions.delete_many(user_id, stale)
        metrics.count(metrics.Event.SESSIONS_SWEPT, len(stale))
    swept = Swept(
        user_id=user_id,
        user_exists=user is not None,
        generation=user.session_generation if user is not None else None,
        deleted=len(stale),
        mail_discarded=discarded,
    )
    _log.info(
        "sessions swept",
        extra={
            "user_id": user_id,
            "user_exists": swept.user_exists,
            "generation": swept.generation,
            "deleted": swept.deleted,
            "mail_discarded": swept.mail_discarded,
        },
    )
    return swept


class Sweeper:
    """Sweeps the users of one invocation's records, each at most once after it succeeded.

    Every record of a batch was written before the batch was invoked, so the first successful
    sweep of a user (which reads the user afresh) covers that user's later records in the same
    batch. A failed sweep is not remembered: the user's next record tries again.
    """

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._done: dict[str, Swept] = {}

    def sweep(self, user_id: str) -> Swept:
        """Sweep ``user_id`` unless it was already swept by this sweeper."""
        done = self._done.get(user_id)
        if done is not None:
            return done
        swept = sweep_user(self._deps, user_id)
        self._done[user_id] = swept
        return swept
