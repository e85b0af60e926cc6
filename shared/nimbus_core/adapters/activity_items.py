"""Activity events as DynamoDB attribute values: in the outbox item that carries one to the activity
function (its ``event`` map), and as an item of the activity table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from nimbus_core.adapters.items import from_item
from nimbus_core.domain.activity import ActivityEvent, Outcome

_OPTIONAL = {
    "ip": "ip",
    "device": "device",
    "method": "method",
    "code": "code",
    "session_id": "sessionId",
    "user_agent": "userAgent",
}


def event_values(event: ActivityEvent) -> dict[str, Any]:
    """The event's attributes as plain values (unset ones left out)."""
    values: dict[str, Any] = {
        "id": event.id,
        "userId": event.user_id,
        "type": event.type,
        "at": event.at,
        "outcome": event.outcome,
        "count": event.count,
    }
    for field, name in _OPTIONAL.items():
        value = getattr(event, field)
        if value is not None:
            values[name] = value
    if event.details:
        values["details"] = list(event.details)
    return values


def event_from_values(values: Mapping[str, Any]) -> ActivityEvent:
    """An event from plain values; KeyError or ValueError when they are not one."""
    outcome = str(values["outcome"])
    if outcome not in ("success", "failure"):
        raise ValueError(f"not an outcome: {outcome!r}")
    optional = {field: str(values[name]) for field, name in _OPTIONAL.items() if values.get(name) is not None}
    return ActivityEvent(
        id=str(values["id"]),
        user_id=str(values["userId"]),
        type=str(values["type"]),
        at=str(values["at"]),
        outcome=cast(Outcome, outcome),
        count=int(values.get("count", 1)),
        details=tuple(str(d) for d in values.get("details") or ()),
        **optional,
    )


def event_from_image(image: Mapping[str, Any]) -> ActivityEvent:
    """The event an outbox item carries (its ``event`` map), from a stream record's ``NewImage``;
    KeyError or ValueError when it carries none."""
    values = from_item(dict(image))
    event = values["event"]
    if not isinstance(event, Mapping):
        raise ValueError("the outbox item's event is not a map")
    return event_from_values(event)
