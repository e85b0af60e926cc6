"""Our DynamoDB attribute-value mapping answers as boto3's TypeSerializer/TypeDeserializer do.

``nimbus_core.adapters.items`` maps values itself so that no function imports boto3 (see its
docstring); these tests hold it to boto3's own mapping on every kind of value a record can hold.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from nimbus_core.adapters.items import from_item, from_value, to_item, to_value

VALUES: list[Any] = [
    "",
    "plain",
    "ünïcödé 🚀 \u0000 and \U0010ffff",
    True,
    False,
    0,
    -7,
    10**37,
    Decimal("1.5"),
    Decimal("-0.000001"),
    None,
    b"\x00\xffbytes",
    [],
    ["a", 1, True, None, {"nested": ["deep", {"x": 2}]}],
    {},
    {"totp": {"id": "f1", "type": "totp", "createdAt": "2026-11-23T10:00:00.000Z", "signCount": 3}},
    {"a", "b"},
    frozenset({"only"}),
    {1, 2, 3},
    {b"x", b"y"},
]


def _sorted_sets(value: Any) -> Any:
    """Attribute values with set members in one order (sets have none; boto3 and we list them)."""
    if isinstance(value, dict):
        return {k: sorted(v) if k in {"SS", "NS", "BS"} else _sorted_sets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sorted_sets(v) for v in value]
    return value


def _id(value: Any) -> str:
    """A stable test id (set order and object addresses vary between xdist workers)."""
    return type(value).__name__ + str(VALUES.index(value) if value in VALUES else "")


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_every_value_serializes_as_boto3_would(value: Any) -> None:
    assert _sorted_sets(to_value(value)) == _sorted_sets(TypeSerializer().serialize(value))


def _plain(value: Any) -> Any:
    """boto3's deserialized value as ours reads: Decimal as int or float, Binary as bytes."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Binary):
        return bytes(value.value)  # type: ignore[attr-defined]  # untyped in the stubs
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_every_value_deserializes_as_boto3_would(value: Any) -> None:
    wire = TypeSerializer().serialize(value)

    assert from_value(wire) == _plain(TypeDeserializer().deserialize(wire))


@pytest.mark.parametrize(
    ("wire", "expected"),
    [("12", 12), ("-3", -3), ("1E+2", 100), ("2.50", 2.5), ("-0.125", -0.125), ("1e-3", 0.001)],
)
def test_numbers_read_as_int_when_whole_else_float(wire: str, expected: float) -> None:
    value = from_value({"N": wire})

    assert value == expected
    assert type(value) is type(expected)


def test_an_item_round_trips_and_drops_none_attributes() -> None:
    values = {"pk": "USER#1", "count": 3, "staff": False, "bannedAt": None, "flags": {"a": True}}

    item = to_item(values)

    assert "bannedAt" not in item
    assert from_item(item) == {k: v for k, v in values.items() if v is not None}


@pytest.mark.parametrize(
    "value",
    [1.5, set(), {"a", 1}, {True, False}, object()],
    ids=["float", "empty set", "mixed set", "set of bools", "object"],
)
def test_values_dynamodb_cannot_store_exactly_are_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        to_value(value)


def test_an_unknown_attribute_type_is_refused() -> None:
    with pytest.raises(TypeError):
        from_value({"X": "?"})
