"""Conversion between records and DynamoDB items for the low-level client.

Records (``nimbus_core.domain.models``) are dataclasses whose field names in camelCase are the stored
attribute names, so one pair of functions maps every entity. Attributes whose value is None are
omitted rather than stored as NULL, so condition expressions can use ``attribute_not_exists`` (e.g.
"not banned"). Stored attributes a record has no field for (keys, index attributes) are ignored.

The attribute-value mapping is DynamoDB's JSON wire format, written here rather than taken from
``boto3.dynamodb.types``: importing that module runs boto3's package ``__init__``, which loads
s3transfer and boto3's resource layer on every cold start, for a mapping of a dozen
lines. Its behaviour is boto3's (a unit test compares the two on every type we store), except that
numbers come back as int or float instead of Decimal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Set
from decimal import Decimal
from typing import Any

from nimbus_core.domain.models import PREFIXED, RECORDS, Record


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item from plain values, dropping None."""
    return {k: to_value(v) for k, v in values.items() if v is not None}


def to_value(value: Any) -> dict[str, Any]:
    """One DynamoDB attribute value (what boto3's TypeSerializer would give)."""
    if isinstance(value, str):  # most attributes: first
        return {"S": value}
    for kinds, tag, encode in _ENCODERS:
        if isinstance(value, kinds):
            return {tag: encode(value)}
    if isinstance(value, Set) and value:
        for kinds, tag, encode in _SET_ENCODERS:
            if all(isinstance(v, kinds) and not isinstance(v, bool) for v in value):
                return {tag: [encode(v) for v in value]}
    # Floats too, as boto3 refuses them: a binary float is not the decimal DynamoDB would store.
    raise TypeError(f"no DynamoDB type for {type(value).__name__} values: {value!r}")


# In order: bool before int (bool is an int subclass).
_ENCODERS: tuple[tuple[type | tuple[type, ...], str, Callable[[Any], Any]], ...] = (
    (bool, "BOOL", bool),
    ((int, Decimal), "N", str),
    (type(None), "NULL", lambda _: True),
    ((bytes, bytearray), "B", bytes),
    (Mapping, "M", lambda m: {str(k): to_value(v) for k, v in m.items()}),
    ((list, tuple), "L", lambda items: [to_value(v) for v in items]),
)
# A set holds strings, numbers or binaries, all of one kind (and never nothing).
_SET_ENCODERS: tuple[tuple[type | tuple[type, ...], str, Callable[[Any], Any]], ...] = (
    (str, "SS", str),
    ((int, Decimal), "NS", str),
    ((bytes, bytearray), "BS", bytes),
)


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """Plain values from a DynamoDB item; numbers become int when whole, else float."""
    return {key: from_value(raw) for key, raw in item.items()}


def from_value(raw: Mapping[str, Any]) -> Any:
    """The plain value of one DynamoDB attribute value."""
    if "S" in raw:  # most attributes, and the warm path of every read: no lookup
        return raw["S"]
    ((tag, value),) = raw.items()
    decode = _DECODERS.get(tag)
    if decode is None:
        raise TypeError(f"unknown DynamoDB attribute value: {raw!r}")
    return decode(value)


def _number(text: str) -> int | float:
    # Whole numbers straight to int (DynamoDB keeps at most 38 digits); others through Decimal,
    # which reads DynamoDB's exponent forms exactly as boto3 does before the float conversion.
    if text.removeprefix("-").isdigit():
        return int(text)
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "N": _number,
    "BOOL": bool,
    "NULL": lambda _: None,
    "M": lambda m: {k: from_value(v) for k, v in m.items()},
    "L": lambda items: [from_value(v) for v in items],
    "SS": set,
    "NS": lambda numbers: {_number(n) for n in numbers},
    "B": bytes,
    "BS": lambda blobs: {bytes(b) for b in blobs},
}


def record_item(record: Record, *, exclude: frozenset[str] = frozenset(), **keys: Any) -> dict[str, Any]:
    """The stored form of a record: its fields (but ``exclude``) plus the key/index attributes."""
    return to_item({**stored_values(record, exclude=exclude), **keys})


def stored_values(record: Record, *, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A record's fields as plain values under their stored names (nested records too), None dropped."""
    values: dict[str, Any] = {}
    for name, stored, nested, prefix in _layout(type(record)):
        value = getattr(record, name)
        if value is None or name in exclude:
            continue
        if prefix:
            values.update({prefix + k: v for k, v in value.items()})
            continue
        values[stored] = {k: stored_values(v) for k, v in value.items()} if nested else value
    return values


def read_record[R: Record](model: type[R], item: dict[str, Any]) -> R:
    """A record from its stored form (key attributes and unknown attributes are ignored)."""
    return from_stored(model, from_item(item))


def from_stored[R: Record](model: type[R], values: Mapping[str, Any]) -> R:
    """A record from plain values under their stored names (absent ones take the field's default)."""
    fields: dict[str, Any] = {}
    for name, stored, nested, prefix in _layout(model):
        if prefix:
            fields[name] = {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}
        elif stored in values:
            value = values[stored]
            fields[name] = {k: from_stored(nested, v) for k, v in value.items()} if nested else value
    return model(**fields)


type _Layout = tuple[tuple[str, str, type[Record] | None, str], ...]
_LAYOUTS: dict[type[Record], _Layout] = {}


def _layout(model: type[Record]) -> _Layout:
    """Per field: its name, its stored name (camelCase), the record type of its values, if any, and
    the prefix of its attributes when it is stored one attribute per entry (else "")."""
    layout = _LAYOUTS.get(model)
    if layout is None:
        layout = _LAYOUTS[model] = tuple(
            (f.name, stored_name(f.name), f.metadata.get(RECORDS), f.metadata.get(PREFIXED, ""))
            for f in dataclasses.fields(model)  # type: ignore[arg-type]
        )
    return layout


def stored_name(field_name: str) -> str:
    """The stored attribute name of a record field: ``password_hash`` -> ``passwordHash``."""
    first, *rest = field_name.split("_")
    return first + "".join(part.capitalize() for part in rest)
