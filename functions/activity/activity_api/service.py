"""Storing the activity events requests queued (CONTRACT section 17), with the bound on failures.

A failure (a wrong password, a refused sign-in or reverification) is counted per account and hour:
the first :data:`~nimbus_core.domain.activity.FAILURES_PER_HOUR` are stored one by one, and every
later one is counted by one event of type ``more-failures`` for that hour (its time and details the
latest failure's), so no one can grow an account's log, or its cost, by failing on purpose.
"""

from __future__ import annotations

from dataclasses import replace

from nimbus_core.domain.activity import FAILURES_PER_HOUR, ActivityEvent, EventType
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import iso_to_epoch
from nimbus_core.domain.useragent import device_name
from nimbus_core.platform import ids, metrics


def store(deps: Deps, event: ActivityEvent) -> None:
    """Store ``event``: a success at once; a failure once counted, or on its hour's summary past
    the bound. Storing the same event twice stores one item (a failure is then counted twice). A
    device known only by its User-Agent is named here, off the request's path."""
    if event.device is None and event.user_agent is not None:
        event = replace(event, device=device_name(event.user_agent), user_agent=None)
    if event.failed:
        hour = int(iso_to_epoch(event.at)) // 3600
        if deps.activity.count_failure(event.user_id, hour) > FAILURES_PER_HOUR:
            deps.activity.add_to_summary(summary_of(event, hour))
            return
    deps.activity.put_many([event])
    metrics.count(metrics.Event.ACTIVITY_RECORDED)


def summary_of(failure: ActivityEvent, hour: int) -> ActivityEvent:
    """The event that counts ``hour``'s failures beyond the bound: one per account and hour, its
    id the last of the hour's (it lists after the failures it follows)."""
    return replace(
        failure,
        id=ids.last_id_of((hour + 1) * 3600 * 1000 - 1),
        type=EventType.FAILURES.value,
        details=(f"Failures after the first {FAILURES_PER_HOUR} of this hour are counted here.",),
    )
