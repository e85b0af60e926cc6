"""An account's activity as the account changes see it: the event of a change made by an
:class:`~nimbus_core.accounts.notices.Actor` (a staff member is "staff", never who nor from where),
and the page the owner and staff read (CONTRACT section 17). Recording is
:mod:`nimbus_core.domain.activity`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nimbus_core.domain.activity import ActivityEvent, new_event

if TYPE_CHECKING:
    from nimbus_core.accounts.notices import Actor
    from nimbus_core.domain.deps import Deps

STAFF_DEVICE = "staff"


def by(user_id: str, type_: str, *, actor: Actor, now: float, details: Sequence[str] = ()) -> ActivityEvent:
    """The event of a change ``actor`` made to ``user_id``'s account ``now``."""
    if actor.kind == "staff":
        return new_event(user_id, type_, now=now, device=STAFF_DEVICE, details=details)
    return new_event(
        user_id,
        type_,
        now=now,
        ip=actor.source_ip,
        device=actor.device or actor.kind,
        session_id=actor.session_id,
        details=details,
    )


def page(deps: Deps, user_id: str, *, limit: int, offset: int) -> tuple[int, list[ActivityEvent]]:
    """The account's events, newest first: the total and one page."""
    return deps.activity.page(user_id, limit=limit, offset=offset)
