"""Conversion between records and DynamoDB items for the low-level client.

Records (``nimbus_core.models``) are pydantic models whose aliases are the stored attribute names,
so one pair of functions maps every entity. Attributes whose value is None are omitted rather than
stored as NULL, so condition expressions can use ``attribute_not_exists`` (e.g. "not banned").
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from nimbus_core.models import Record

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item from plain values, dropping None."""
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def to_value(value: Any) -> Any:
    """One DynamoDB attribute value."""
    return _serializer.serialize(value)


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """Plain values from a DynamoDB item; whole-number Decimals become int."""
    out: dict[str, Any] = {}
    for key, raw in item.items():
        # The common cases without the generic deserializer: strings as they are, whole numbers
        # straight to int (what the Decimal below would become; DynamoDB keeps 38 digits at most).
        if "S" in raw:
            out[key] = raw["S"]
            continue
        number = raw.get("N")
        if number is not None and number.removeprefix("-").isdigit():
            out[key] = int(number)
            continue
        value = _deserializer.deserialize(raw)
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[key] = value
    return out


def record_item(record: Record, *, exclude: frozenset[str] = frozenset(), **keys: Any) -> dict[str, Any]:
    """The stored form of a record: its aliased fields (but ``exclude``) plus the key/index attributes."""
    return to_item({**record.model_dump(by_alias=True, exclude_none=True, exclude=set(exclude)), **keys})


def read_record[R: Record](model: type[R], item: dict[str, Any]) -> R:
    """A record from its stored form (key attributes and unknown attributes are ignored)."""
    return model.model_validate(from_item(item))
