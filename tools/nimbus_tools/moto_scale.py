"""moto's DynamoDB at real table sizes: :func:`install` makes a transaction and a query cost what
they touch instead of the whole table, with the same answers and stream records as the pinned moto.

The pinned moto (5.2.5) deep-copies every table a TransactWriteItems touches, for its rollback, and
its ``Table.query`` walks ``all_items()`` (every item, sorted) to find those of the queried hash key,
on the base table and on every index. This module, with nimbus_tools.moto_internals the only one
touching moto internals, changes exactly those two things and leaves the rest to moto's own code:

- a transaction keeps an undo log instead: a copy of each item it names and each touched table's
  stream length; a cancelled transaction puts those items back and drops the stream records it
  appended (moto's own rollback, run as before, is handed no table copies to restore);
- a query is handed only its candidates as ``all_items()``: the items of the queried hash key
  (``Table.items`` is keyed by it), or for an index keyed on another attribute, the items a
  per-table index of that attribute's values names. moto's query still checks every condition on
  each candidate, so a stale candidate is harmless; the index is kept a superset by recording each
  item written (``Table.put_item``, which BatchWriteItem, PartiQL and an update of a missing item
  use too, and ``DynamoDBBackend.update_item``, which changes an item in place) and each item a
  rollback restores; entries of deleted or changed items are dropped when a query meets them.

And two things of moto's response serializer (moto.core.serialize), which every answer passes
through: for each member of each structure it makes alias providers anew to list the names to try
on the result object (most of an answer's cost, items and scans above all). For a result that is a
dict, as DynamoDB's are, that list depends only on the key, the shape and the shape's parent, so
``AttributePicker.get_possible_keys`` (and its XFormed subclass's) is remembered per those. And an
attribute value that is a string or a number, ``{"S": ...}`` or ``{"N": ...}`` (nearly every value of
every item), is written as the walk of the AttributeValue shape's ten members would end, without
the walk (``BaseJSONSerializer._serialize_type_structure``); every other value is moto's walk.

And one thing of moto's dispatch (moto.core.responses), which every request passes through: the
names of a response class's methods, which it lists anew for each request to find the action's
method (``method_names_from_class``), are listed once per class.

Relies on ``moto.dynamodb.models``: ``DynamoDBBackend.transact_write_items`` (its ``self.tables``
backup and rollback lines), ``update_item`` and ``get_keys_value``; ``Table.query``,
``put_item``, ``all_indexes``, ``items`` (hash key to item, or to a dict of range
key to item), ``stream_shard.items``; ``Item.attrs``, ``hash_key`` and ``range_key``; and
``moto.core.serialize``'s ``AttributePicker`` (``get_possible_keys``, ``alias_providers``),
``XFormedAttributePicker``, ``AttributePickerContext`` (the ``parent`` moto sets on shapes) and
``BaseJSONSerializer`` (``_serialize_type_structure``, ``get_serialized_name``); and
``moto.core.responses.method_names_from_class``.
tests/tools/unit/test_moto_scale.py runs random operation sequences on stock and patched moto and
compares every answer and stream record, and the bytes of every answer about items of every
attribute type. The DynamoDB changes (transactions, queries) as a patch to moto, with its test, are
patches/moto-dynamodb-scale.patch (docs/decisions/2026-11-26-local-aws-emulator.md).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from moto.core import responses as moto_responses
from moto.core.serialize import (
    AttributePicker,
    AttributePickerContext,
    BaseJSONSerializer,
    XFormedAttributePicker,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

Key = tuple[DynamoType, DynamoType | None]

_STOCK: dict[str, Callable[..., Any]] = {}
_lock = threading.RLock()  # the attribute indexes; moto's own state is as thread-safe as moto
# Per table, per indexed attribute: value -> keys of the items that had it when written.
_indexes: weakref.WeakKeyDictionary[Table, dict[str, dict[DynamoType, set[Key]]]] = (
    weakref.WeakKeyDictionary()
)
_INDEXABLE = frozenset({"S", "N", "B"})  # the key types DynamoDB allows
# The response serializer's keys to try, per picker, key and shape (see _possible_keys); bounded,
# should a long session meet shapes without end.
_aliases: dict[tuple[Any, ...], tuple[str, ...]] = {}
_ALIASES_KEPT = 100_000


def install() -> None:
    """Replace the moto methods named in the module docstring (idempotent)."""
    for owner, name, replacement in _replacements():
        if f"{owner.__name__}.{name}" not in _STOCK:
            _STOCK[f"{owner.__name__}.{name}"] = owner.__dict__[name]
            setattr(owner, name, replacement)


def uninstall() -> None:
    """Put moto's own methods back (the differential test compares both)."""
    for owner, name, _ in _replacements():
        if f"{owner.__name__}.{name}" in _STOCK:
            setattr(owner, name, _STOCK.pop(f"{owner.__name__}.{name}"))
    with _lock:
        _indexes.clear()
        _aliases.clear()
    _methods.clear()


def installed() -> bool:
    """Whether moto's methods are replaced now."""
    return bool(_STOCK)


def forget(table: Table) -> None:
    """Drop ``table``'s attribute indexes, after its items were replaced without moto's methods
    (nimbus_tools.moto_internals.restore_tables): the next query on an attribute rebuilds its index
    from every item, so an item put back is a candidate again."""
    with _lock:
        _indexes.pop(table, None)


def _replacements() -> tuple[tuple[type | ModuleType, str, Callable[..., Any]], ...]:
    return (
        (moto_responses, "method_names_from_class", _method_names),
        (Table, "query", _query),
        (Table, "put_item", _put_item),
        (DynamoDBBackend, "update_item", _update_item),
        (DynamoDBBackend, "transact_write_items", _transact_write_items),
        (AttributePicker, "get_possible_keys", _possible_keys(AttributePicker)),
        (XFormedAttributePicker, "get_possible_keys", _possible_keys(XFormedAttributePicker)),
        (BaseJSONSerializer, "_serialize_type_structure", _serialize_type_structure),
    )


# The names of each response class's methods, as moto's dispatch lists them for every request.
_methods: dict[type, list[str]] = {}


def _method_names(clazz: type) -> list[str]:
    """``method_names_from_class``, once per class: moto's dispatch calls it on every request to
    find the action's method, and it walks every member of the class (``inspect.getmembers``),
    whose methods do not change."""
    names = _methods.get(clazz)
    if names is None:
        names = _methods[clazz] = _STOCK["moto.core.responses.method_names_from_class"](clazz)
    return list(names)


# The members of DynamoDB's AttributeValue whose value is a string on the wire, as moto holds it.
_STRING_VALUES = frozenset({"S", "N"})


def _serialize_type_structure(
    self: BaseJSONSerializer, serialized: dict[str, Any], value: Any, shape: Any, key: str
) -> None:
    """A DynamoDB attribute value of a string or a number (an item's or a stream record's image, a
    key) serialized as moto's walk of the AttributeValue shape ends, without the walk: it asks the
    picker for each of its ten members in turn, most of the cost of an answer with items. Every
    other value, and every other structure, is moto's own walk."""
    if key and shape.name == "AttributeValue" and type(value) is dict and len(value) == 1:
        ((kind, inner),) = value.items()
        if kind in _STRING_VALUES and type(inner) is str:
            serialized[self.get_serialized_name(shape, key)] = {kind: inner}
            return
    _STOCK["BaseJSONSerializer._serialize_type_structure"](self, serialized, value, shape, key)


def _possible_keys(owner: type[AttributePicker]) -> Callable[..., Any]:
    """``owner.get_possible_keys``, remembered for a result that is a dict (DynamoDB's are): the
    keys it tries depend on the key, the shape and the shape's parent at the time (moto sets it as
    it walks), and on the object only through its class and a ``Meta``, which a dict has not."""

    def get_possible_keys(self: AttributePicker, context: AttributePickerContext) -> Iterable[str]:
        stock = _STOCK[f"{owner.__name__}.get_possible_keys"]
        if type(context.obj) is not dict:
            return stock(self, context)  # type: ignore[no-any-return]
        shape = context.shape
        remembered = (owner, tuple(self.alias_providers), context.key, shape, getattr(shape, "parent", None))
        with _lock:
            keys = _aliases.get(remembered)
        if keys is None:
            keys = tuple(stock(self, context))
            with _lock:
                if len(_aliases) >= _ALIASES_KEPT:
                    _aliases.clear()
                _aliases[remembered] = keys
        return keys

    return get_possible_keys


def _lookup(table: Table, key: Key) -> Item | None:
    """The item stored under ``key``, without moto's ``get_item`` adding empty hash entries."""
    found = table.items.get(key[0])
    if key[1] is None:
        return found if isinstance(found, Item) else None
    return found.get(key[1]) if isinstance(found, dict) else None


def _every_item(table: Table) -> Iterator[Item]:
    for entry in list(table.items.values()):
        yield from (list(entry.values()) if isinstance(entry, dict) else [entry])


def _record(table: Table, item: Item) -> None:
    """Name ``item`` under its value of every attribute indexed for ``table``."""
    with _lock:
        for attribute, by_value in _indexes.get(table, {}).items():
            value = item.attrs.get(attribute)
            if value is not None and value.type in _INDEXABLE:
                by_value.setdefault(value, set()).add((item.hash_key, item.range_key))


def _by_value(table: Table, attribute: str) -> dict[DynamoType, set[Key]]:
    """The index of ``attribute`` for ``table``, built from every item the first time."""
    with _lock:
        per_table = _indexes.setdefault(table, {})
        if attribute not in per_table:
            per_table[attribute] = {}
            for item in _every_item(table):
                _record(table, item)
        return per_table[attribute]


def _candidates(table: Table, hash_key: Any, index_name: Any, conditions: Any) -> list[Item] | None:
    """A superset of the items a query can answer, or None where moto's own walk must decide."""
    attribute: str | None = table.hash_key_attr
    value = hash_key
    if index_name:
        index = next((i for i in table.all_indexes() if i.name == index_name), None)
        hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] if index else []
        attribute = hashes[0] if hashes else None
        value = dict(conditions or []).get(attribute)
    if not isinstance(value, DynamoType) or attribute is None:
        return None
    if attribute == table.hash_key_attr:
        entry = table.items.get(value)
        return list(entry.values()) if isinstance(entry, dict) else [entry] if entry is not None else []
    found: list[Item] = []
    with _lock:
        keys = _by_value(table, attribute).get(value, set())
        for key in list(keys):
            item = _lookup(table, key)
            if item is not None and item.attrs.get(attribute) is not None and item.attrs[attribute] == value:
                found.append(item)
            else:
                keys.discard(key)  # deleted, or written since with another value
    return found


class _OnlyCandidates:
    """The table as moto's query sees it: ``all_items()`` is the candidates, all else the table."""

    def __init__(self, table: Table, items: list[Item]) -> None:
        self._table, self._items = table, items

    def all_items(self) -> list[Item]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _query(self: Table, *args: Any, **kwargs: Any) -> Any:
    given = _QUERY.bind(self, *args, **kwargs).arguments
    found = _candidates(
        self, given.get("hash_key"), given.get("index_name"), given.get("hash_key_conditions")
    )
    return _STOCK["Table.query"](self if found is None else _OnlyCandidates(self, found), *args, **kwargs)


def _put_item(self: Table, *args: Any, **kwargs: Any) -> Item:
    item: Item = _STOCK["Table.put_item"](self, *args, **kwargs)
    _record(self, item)
    return item


def _update_item(self: DynamoDBBackend, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Item:
    table = self.get_table(table_name)
    try:
        return _STOCK["DynamoDBBackend.update_item"](self, table_name, key, *args, **kwargs)  # type: ignore[no-any-return]
    finally:  # moto changes the stored item in place, and may have created it before failing
        with contextlib.suppress(Exception):
            item = _lookup(table, self.get_keys_value(table, key))
            if item is not None:
                _record(table, item)


class _NoTableCopies:
    """``self.tables`` as moto's transact_write_items sees it: its rollback copy of a table is a
    token and restoring it does nothing, because the undo log restores."""

    def __init__(self, tables: dict[str, Table]) -> None:
        self._tables = tables

    def __contains__(self, name: object) -> bool:
        return name in self._tables

    def __getitem__(self, name: str) -> _NoTableCopies:
        return self

    def __setitem__(self, name: str, value: object) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, Any]) -> _NoTableCopies:
        return self


class _WithoutTableCopies:
    """The backend as moto's transact_write_items sees it: all but ``tables`` is the backend."""

    def __init__(self, backend: DynamoDBBackend) -> None:
        self._backend, self.tables = backend, _NoTableCopies(backend.tables)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def _transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    undo = _undo_log(self, transact_items)
    if undo is None:  # an operation's key cannot be read here: moto copies the tables itself
        _STOCK["DynamoDBBackend.transact_write_items"](self, transact_items)
        return
    items, streams = undo
    try:
        _STOCK["DynamoDBBackend.transact_write_items"](_WithoutTableCopies(self), transact_items)
    except BaseException:
        for (table, key), before in items.items():
            _restore(table, key, before)
        for table, length in streams.items():
            if table.stream_shard is not None:
                del table.stream_shard.items[length:]
        raise


def _undo_log(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> tuple[dict[tuple[Table, Key], Item | None], dict[Table, int]] | None:
    """A copy of each item the transaction names (None where there is none), and each touched
    table's stream length; None if an operation's table or key cannot be read."""
    items: dict[tuple[Table, Key], Item | None] = {}
    streams: dict[Table, int] = {}
    try:
        for entry in transact_items:
            for kind, operation in entry.items():
                table = backend.tables[operation["TableName"]]
                given = operation["Item"] if kind == "Put" else operation["Key"]
                key = backend.get_keys_value(table, given)
                items[(table, key)] = copy.deepcopy(_lookup(table, key))
                if table.stream_shard is not None:
                    streams.setdefault(table, len(table.stream_shard.items))
    except Exception:
        return None
    return items, streams


def _restore(table: Table, key: Key, before: Item | None) -> None:
    hash_key, range_key = key
    stored: dict[Any, Any] = table.items  # hash key -> item, or -> {range key -> item}
    if before is None:
        if range_key is None:
            if isinstance(stored.get(hash_key), Item):
                stored.pop(hash_key)
        elif isinstance(stored.get(hash_key), dict):
            stored[hash_key].pop(range_key, None)
        return
    if range_key is None:
        stored[hash_key] = before
    else:
        stored[hash_key][range_key] = before
    _record(table, before)  # a query meanwhile may have dropped its entry as stale


_QUERY = inspect.signature(Table.query)
