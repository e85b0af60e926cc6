"""Conversion between Python values and DynamoDB attribute values for the low-level client.

Attributes whose value is None are omitted rather than stored as NULL, so that condition
expressions can use ``attribute_not_exists`` (e.g. "not banned").
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

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
        value = _deserializer.deserialize(raw)
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[key] = value
    return out
