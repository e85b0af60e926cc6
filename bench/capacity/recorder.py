"""Every DynamoDB call made while recording, turned into units by key class and by table or index
(botocore events, the same public extension point the calls part counts with): the items a call
touches are looked up in moto before and after it."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.handlers import BUILTIN_HANDLERS, REGISTER_FIRST

from bench.capacity.costs import RequestCost, item_size, key_class
from nimbus_core.adapters.outbox import ACTIVITY as ACTIVITY_KIND
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.platform.settings import get_settings


class Recorder:
    """Turns every DynamoDB call made while recording into units by key class (botocore events,
    the same public extension point the calls part counts with)."""

    def __init__(self, peek: Any, *, users_table: str | None = None, outbox_table: str | None = None) -> None:
        self._peek = peek  # an unrecorded client on the same moto
        # The tables whose streams feed functions (the functions' own settings by default).
        self._users_table, self._outbox_table = users_table, outbox_table
        # table -> its key attributes, and each index's key attributes and whether it projects all
        self._schemas: dict[str, tuple[list[str], dict[str, tuple[list[str], bool]]]] = {}
        self.cost: RequestCost | None = None
        # CPU time of the measuring thread spent in moto's answers and in the recorder's own
        # lookups, which a deployed function does not spend (thread CPU time: what the machine's
        # other load does not stretch).
        self.thread = 0
        self.sent_at = 0.0
        self.aws_cpu_s = 0.0

    def schema(self, table: str) -> tuple[list[str], dict[str, tuple[list[str], bool]]]:
        """The table's key attributes and each index's (read once from DescribeTable)."""
        if table not in self._schemas:
            desc = self._peek.describe_table(TableName=table)["Table"]
            keys = [k["AttributeName"] for k in desc["KeySchema"]]
            indexes = {
                i["IndexName"]: (
                    [k["AttributeName"] for k in i["KeySchema"]],
                    i["Projection"]["ProjectionType"] == "ALL",
                )
                for i in desc.get("GlobalSecondaryIndexes", [])
            }
            self._schemas[table] = (keys, indexes)
        return self._schemas[table]

    def _get(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._peek.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return found

    def _writes(self, params: Mapping[str, Any], operation: str) -> list[tuple[str, dict[str, Any], float]]:
        """(table, key, unit factor) of every item a write call touches."""
        if operation == "TransactWriteItems":
            return [
                (op["TableName"], self._key_of(op["TableName"], op), 2.0)
                for entry in params["TransactItems"]
                for op in entry.values()
            ]
        if operation == "BatchWriteItem":
            return [
                (table, self._key_of(table, next(iter(request.values()))), 1.0)
                for table, requests in params["RequestItems"].items()
                for request in requests
            ]
        return [(params["TableName"], self._key_of(params["TableName"], params), 1.0)]

    def _key_of(self, table: str, op: Mapping[str, Any]) -> dict[str, Any]:
        if "Key" in op:
            return dict(op["Key"])
        keys, _ = self.schema(table)
        return {name: op["Item"][name] for name in keys}

    def before(self, params: dict[str, Any], operation: str, context: dict[str, Any]) -> None:
        """Before a write: the items it touches as they are."""
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"):
            writes = self._writes(params, operation)
            context["capacity"] = [
                (table, key, factor, self._get(table, key)) for table, key, factor in writes
            ]
        context["capacity_params"] = params

    def after(self, parsed: Mapping[str, Any], operation: str, context: dict[str, Any]) -> None:
        """After a call: its units, by key class."""
        assert self.cost is not None
        for table, key, factor, old in context.get("capacity", []):
            new = self._get(table, key)
            self._write(table, key, factor, old, new)
            self._streamed(table, key, old, new)
        params = context["capacity_params"]
        if operation == "GetItem":
            self._read(params["TableName"], params["Key"], [parsed.get("Item")], params.get("ConsistentRead"))
        elif operation == "BatchGetItem":
            for table, request in params["RequestItems"].items():
                found = {self._key_text(table, i): i for i in parsed.get("Responses", {}).get(table, [])}
                for key in request["Keys"]:
                    item = found.get(self._key_text(table, key))
                    self._read(table, key, [item], request.get("ConsistentRead"))
        elif operation == "Query":
            partition = next(iter(params["ExpressionAttributeValues"].values()))
            where = f"{params['TableName']}{'/' + params['IndexName'] if 'IndexName' in params else ''}"
            units = max(1, math.ceil(sum(item_size(i) for i in self._items_read(params)) / 4096))
            self._add(f"{where} {partition['S']}", reads=units * (1 if params.get("ConsistentRead") else 0.5))

    def _items_read(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The items a Query reads, whole: DynamoDB bills the items it reads before a filter drops
        some and a projection trims them (the same Query, without either)."""
        kept = {
            k: v for k, v in params.items() if k not in ("FilterExpression", "ProjectionExpression", "Select")
        }
        used = params["KeyConditionExpression"]
        if names := params.get("ExpressionAttributeNames"):
            kept["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in used}
            if not kept["ExpressionAttributeNames"]:
                del kept["ExpressionAttributeNames"]
        kept["ExpressionAttributeValues"] = {
            k: v for k, v in params["ExpressionAttributeValues"].items() if k in used
        }
        items: list[dict[str, Any]] = self._peek.query(**kept).get("Items", [])
        return items

    def _streamed(self, table: str, key: Mapping[str, Any], old: Any, new: Any) -> None:
        """What the stream functions get from one item written: a new outbox message is mail (or a
        recovery request), and an activity event when it carries one; a user item changed or
        removed is a sweep; an unchanged item makes no stream record. Also what the item adds to
        the table."""
        assert self.cost is not None
        self.cost.stored_bytes += item_size(new or {}) - item_size(old or {})
        outbox = self._outbox_table or get_settings().outbox_table
        users = self._users_table or get_settings().users_table
        if table == outbox and new and not old:
            kind = new.get("kind", {}).get("S")
            if kind == RECOVERY_REQUEST:
                self.cost.recovery_requests += 1
            elif kind != ACTIVITY_KIND:
                self.cost.mails += 1
            if "event" in new:
                self.cost.activity_events += 1
        pk = str(next(iter(key.get("pk", {"S": ""}).values())))
        if table == users and pk.startswith("USER#") and old and old != new:
            self.cost.user_changes += 1

    def _key_text(self, table: str, key: Mapping[str, Any]) -> str:
        keys, _ = self.schema(table)
        return "|".join(str(key[name]) for name in keys)

    def _read(self, table: str, key: Mapping[str, Any], items: list[Any], consistent: bool | None) -> None:
        size = sum(item_size(i) for i in items if i)
        units = max(1, math.ceil(size / 4096)) * (1 if consistent else 0.5)
        self._add(f"{table} {self._partition(table, key)}", reads=units)

    def _partition(self, table: str, key: Mapping[str, Any]) -> str:
        keys, _ = self.schema(table)
        return str(next(iter(key[keys[0]].values())))

    def _write(self, table: str, key: dict[str, Any], factor: float, old: Any, new: Any) -> None:
        size = max(item_size(old or {}), item_size(new or {}))
        where = f"{table} {self._partition(table, key)}"
        self._add(where, writes=factor * max(1, math.ceil(size / 1024)))
        if factor > 1 and self.cost is not None:  # inside a transaction
            self.cost.classes[key_class(where)[0]].transactions += 1
        _, indexes = self.schema(table)
        for index, (attributes, projects_all) in indexes.items():
            before, after = _entry(old, attributes), _entry(new, attributes)
            # An index entry is written when it appears, goes or moves, and when an item it
            # projects in full changes.
            changed = before != after or (projects_all and old != new)
            for entry, item in ((before, old), (after, new)) if before != after else ((after, new),):
                if changed and entry is not None:
                    size = item_size(item) if projects_all else 100
                    self._add(f"{table}/{index} {entry}", writes=max(1, math.ceil(size / 1024)))

    def _add(self, where: str, *, reads: float = 0.0, writes: float = 0.0) -> None:
        assert self.cost is not None
        name, _ = key_class(where)
        for access in (self.cost.classes[name], self.cost.tables[where.split(" ", maxsplit=1)[0]]):
            access.reads += reads
            access.writes += writes

    @contextmanager
    def recording(self, cost: RequestCost) -> Iterator[RequestCost]:
        """Record the calls of the block into ``cost``."""
        self.cost, self.aws_cpu_s, self.thread = cost, 0.0, threading.get_ident()
        try:
            yield cost
        finally:
            self.cost = None


def _entry(item: Mapping[str, Any] | None, attributes: list[str]) -> str | None:
    """The partition key value of ``item``'s entry in an index keyed by ``attributes`` (None: the
    item is not in it: DynamoDB indexes only items holding every key attribute)."""
    if not item or any(a not in item for a in attributes):
        return None
    return str(next(iter(item[attributes[0]].values())))


_RECORDER: list[Recorder] = []
# The recorder's own lookups (in moto, around a call) are not recorded: suspended in the thread
# that makes them, while the functions' other threads (parallel Queries) go on being recorded.
_OWN = threading.local()


@contextmanager
def _own_calls(recorder: Recorder) -> Iterator[None]:
    _OWN.active = True
    started = time.thread_time()
    try:
        yield
    finally:
        _OWN.active = False
        if threading.get_ident() == recorder.thread:
            recorder.aws_cpu_s += time.thread_time() - started


def _recording() -> Recorder | None:
    if _RECORDER and _RECORDER[0].cost is not None and not getattr(_OWN, "active", False):
        return _RECORDER[0]
    return None


def _before_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if (recorder := _recording()) is not None and model.service_model.service_name == "dynamodb":
        with _own_calls(recorder):
            recorder.before(params, model.name, context)


def _after_call(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if (recorder := _recording()) is not None and (cost := recorder.cost) is not None:
        service = model.service_model.service_name
        cost.round_trips += 1
        cost.ssm += service == "ssm"
        cost.ses += service in ("sesv2", "ses")
        cost.other_calls += service not in ("dynamodb", "ssm", "sesv2", "ses")
        if service == "dynamodb" and "capacity_params" in context:
            with _own_calls(recorder):
                recorder.after(parsed, model.name, context)


def _before_send(**_: Any) -> None:
    if (recorder := _recording()) is not None and threading.get_ident() == recorder.thread:
        recorder.sent_at = time.thread_time()


def _received(**_: Any) -> None:
    if (recorder := _recording()) is not None and threading.get_ident() == recorder.thread:
        recorder.aws_cpu_s += time.thread_time() - recorder.sent_at


BUILTIN_HANDLERS.extend(
    [
        ("before-parameter-build", _before_build, REGISTER_FIRST),
        ("after-call", _after_call),
        ("before-send", _before_send, REGISTER_FIRST),
        ("response-received", _received),
    ]
)


@contextmanager
def installed(recorder: Recorder) -> Iterator[Recorder]:
    """Let ``recorder`` see every AWS call of every client while the block runs."""
    _RECORDER.append(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.clear()
