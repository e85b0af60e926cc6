"""nimbus_tools.moto_scale against the pinned moto: the same answers and stream records as stock
moto for random operation sequences, and a transaction or query that no longer costs the table.

Each run uses its own tables in a ``mock_aws`` (nested in a worker's session mock, possibly) and
deletes them after; each run installs or removes the patch for itself and leaves it as it found it
(tests/conftest.py installs it for the whole suite).
"""

from __future__ import annotations

import contextlib
import cProfile
import pstats
import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from nimbus_tools import moto_scale

REGION = "us-east-1"
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


def _tables(client: Any, prefix: str) -> tuple[str, str]:
    """A users-like table (hash key, two GSIs) and a sessions-like one (hash and range, one GSI)."""
    users, sessions = f"{prefix}-users", f"{prefix}-sessions"
    client.create_table(
        TableName=users,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": "S"} for n in ("pk", "name", "part", "order")
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "Name",
                "KeySchema": [{"AttributeName": "name", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "Created",
                "KeySchema": [
                    {"AttributeName": "part", "KeyType": "HASH"},
                    {"AttributeName": "order", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=STREAM,
    )
    client.create_table(
        TableName=sessions,
        KeySchema=[
            {"AttributeName": "user", "KeyType": "HASH"},
            {"AttributeName": "sid", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("user", "sid", "device")],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "Device",
                "KeySchema": [{"AttributeName": "device", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=STREAM,
    )
    return users, sessions


def _s(value: str) -> dict[str, str]:
    return {"S": value}


class _Script:
    """Random operations on the two tables, as request parameters (table names filled in later)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, prefix: str, count: int) -> str:
        return f"{prefix}{self.rng.randrange(count)}"

    def user_key(self) -> dict[str, Any]:
        return {"pk": _s(self.pick("u", 6))}

    def session_key(self) -> dict[str, Any]:
        return {"user": _s(self.pick("u", 3)), "sid": _s(self.pick("s", 5))}

    def write(self) -> tuple[str, dict[str, Any]]:
        """One Put, Update or Delete on either table, maybe conditional."""
        users = self.rng.random() < 0.5
        key = self.user_key() if users else self.session_key()
        table = "users" if users else "sessions"
        kind = self.rng.choice(["Put", "Put", "Update", "Update", "Delete"])
        condition: dict[str, Any] = {}
        if self.rng.random() < 0.3:
            condition = {"ConditionExpression": f"attribute_{self.rng.choice(['', 'not_'])}exists(n)"}
        if kind == "Put":
            item = dict(key, n={"N": str(self.rng.randrange(9))})
            if users:
                item |= {"name": _s(self.pick("n", 3)), "part": _s("USERS"), "order": _s(self.pick("o", 9))}
            else:
                item |= {"device": _s(self.pick("d", 3))}
            return kind, {"TableName": table, "Item": item, **condition}
        if kind == "Update":
            attribute = "name" if users else "device"
            update = {
                "UpdateExpression": "SET #a = :v ADD n :one",
                "ExpressionAttributeNames": {"#a": attribute},
                "ExpressionAttributeValues": {":v": _s(self.pick(attribute[0], 3)), ":one": {"N": "1"}},
            }
            return kind, {"TableName": table, "Key": key, **update, **condition}
        return kind, {"TableName": table, "Key": key, **condition}

    def query(self) -> dict[str, Any]:
        """A Query of a base table or an index, either direction, maybe with Limit."""
        choices = [
            ("users", None, "pk", self.pick("u", 6)),
            ("users", "Name", "name", self.pick("n", 3)),
            ("users", "Created", "part", "USERS"),
            ("sessions", None, "user", self.pick("u", 3)),
            ("sessions", "Device", "device", self.pick("d", 3)),
        ]
        table, index, attribute, value = self.rng.choice(choices)
        request: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": attribute},
            "ExpressionAttributeValues": {":h": _s(value)},
            "ScanIndexForward": self.rng.random() < 0.5,
        }
        if index:
            request["IndexName"] = index
        if self.rng.random() < 0.5:
            request["Limit"] = self.rng.randrange(1, 4)
        return request

    def steps(self, count: int) -> Iterator[tuple[str, Any]]:
        for _ in range(count):
            roll = self.rng.random()
            if roll < 0.4:
                yield "write", self.write()
            elif roll < 0.65:
                # Two to four operations; a repeated key makes moto refuse the whole transaction.
                yield "transact", [self.write() for _ in range(self.rng.randrange(2, 5))]
            else:
                yield "query", self.query()


def _named(request: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return dict(request, TableName=names[request["TableName"]])


def _error(error: ClientError) -> Any:
    reasons = error.response.get("CancellationReasons") or []
    return error.response["Error"]["Code"], [reason.get("Code") for reason in reasons]


def _run(client: Any, names: dict[str, str], step: tuple[str, Any]) -> Any:
    kind, payload = step
    try:
        if kind == "write":
            operation, request = payload
            method = {"Put": client.put_item, "Update": client.update_item, "Delete": client.delete_item}
            return method[operation](**_named(request, names)).get("Attributes")
        if kind == "transact":
            client.transact_write_items(
                TransactItems=[{operation: _named(request, names)} for operation, request in payload]
            )
            return "committed"
        pages, request = [], _named(payload, names)
        while True:  # every page, each resumed from the previous one's LastEvaluatedKey
            answer = client.query(**request)
            pages.append((answer["Items"], answer["Count"], answer.get("LastEvaluatedKey")))
            if "LastEvaluatedKey" not in answer or len(pages) > 20:
                return pages
            request = dict(request, ExclusiveStartKey=answer["LastEvaluatedKey"])
    except ClientError as error:
        return _error(error)


def _stream(client: Any, table: str) -> list[Any]:
    """Every record of ``table``'s stream but its event id and time."""
    streams = boto3.client(
        "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
    )
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)["Records"]
    return [(r["eventName"], r["dynamodb"].get("OldImage"), r["dynamodb"].get("NewImage")) for r in records]


def _play(seed: int, steps: int, patched: bool) -> list[Any]:
    """Every answer of the seed's script, then every stream record, on stock or patched moto."""
    with _moto(patched=patched), mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, sessions = _tables(client, f"t{seed}{'p' if patched else 's'}")
        names = {"users": users, "sessions": sessions}
        try:
            answers = [_run(client, names, step) for step in _Script(seed).steps(steps)]
            return [*answers, _stream(client, users), _stream(client, sessions)]
        finally:
            client.delete_table(TableName=users)
            client.delete_table(TableName=sessions)


@contextlib.contextmanager
def _moto(*, patched: bool) -> Iterator[None]:
    """Patched or stock moto for the block; then as it was before."""
    was = moto_scale.installed()
    (moto_scale.install if patched else moto_scale.uninstall)()
    try:
        yield
    finally:
        (moto_scale.install if was else moto_scale.uninstall)()


@pytest.mark.parametrize("seed", range(6))
def test_patched_moto_answers_and_streams_exactly_as_stock_moto(seed: int) -> None:
    stock = _play(seed, 150, patched=False)
    assert any(answer == "committed" for answer in stock)  # the scripts do commit and cancel
    assert any(isinstance(answer, tuple) and answer[0] == "TransactionCanceledException" for answer in stock)

    assert _play(seed, 150, patched=True) == stock


# Items of every attribute type, as stored and as answered: empty and odd strings, numbers as
# DynamoDB spells them, binaries, sets, nested maps and lists, booleans and nulls.
RICH_ITEMS: list[dict[str, Any]] = [
    {
        "pk": _s("rich0"),
        "name": _s('é ☃ 𝄞 \u0000 "quoted" \\ </script>'),
        "empty": _s(""),
        "n": {"N": "-0.000123e5"},
        "big": {"N": "12345678901234567890123456789012345678"},
        "b": {"B": b"\x00\xffbinary"},
        "ss": {"SS": ["a", "", "☃"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"\x01", b"\x02"]},
        "t": {"BOOL": True},
        "f": {"BOOL": False},
        "nul": {"NULL": True},
        "m": {"M": {"s": _s("x"), "e": _s(""), "n": {"N": "0"}, "l": {"L": [{"N": "1"}, _s(""), {"M": {}}]}}},
        "l": {"L": [{"L": []}, {"B": b"z"}, {"BOOL": False}, {"NULL": True}]},
    },
    {"pk": _s("rich1"), "name": _s("rich"), "part": _s("p"), "order": _s("0")},
]


def _kept(bodies: list[bytes]) -> Any:
    """A botocore ``after-call`` handler keeping each answer's bytes."""
    return lambda http_response, **_: bodies.append(http_response.content)


def _answers_for_rich_items(patched: bool) -> list[Any]:
    """The raw answers (bytes on the wire) to writes and reads of RICH_ITEMS, then its stream."""
    bodies: list[bytes] = []
    with _moto(patched=patched), mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, sessions = _tables(client, "rich")  # one name: the answers name it
        client.meta.events.register("after-call", _kept(bodies))
        try:
            for item in RICH_ITEMS:
                client.put_item(TableName=users, Item=item, ReturnValues="ALL_OLD")
                client.put_item(TableName=users, Item=item, ReturnValues="ALL_OLD")
            key = {"pk": _s("rich0")}
            client.get_item(TableName=users, Key=key)
            client.scan(TableName=users)
            query: dict[str, Any] = {"TableName": users, "KeyConditionExpression": "pk = :k"}
            client.query(**query, ExpressionAttributeValues={":k": key["pk"]})
            client.batch_get_item(RequestItems={users: {"Keys": [key, {"pk": _s("rich1")}]}})
            client.transact_get_items(TransactItems=[{"Get": {"TableName": users, "Key": key}}])
            client.update_item(
                TableName=users,
                Key=key,
                UpdateExpression="SET #e = :e, m.l[0] = :n REMOVE b",
                ExpressionAttributeNames={"#e": "empty"},
                ExpressionAttributeValues={":e": _s("now"), ":n": {"N": "2"}},
                ReturnValues="ALL_NEW",
            )
            client.delete_item(TableName=users, Key=key, ReturnValues="ALL_OLD")
            return [*bodies, _stream(client, users)]
        finally:
            client.delete_table(TableName=users)
            client.delete_table(TableName=sessions)


def test_patched_moto_answers_items_of_every_attribute_type_byte_for_byte_as_stock_moto() -> None:
    stock = _answers_for_rich_items(patched=False)
    answered = b"".join(body for body in stock if isinstance(body, bytes))
    assert answered.count(b'"empty": {"S": ""}') >= 6  # each read answers the empty string

    assert _answers_for_rich_items(patched=True) == stock


def _calls(operation: Any) -> int:
    """The Python function calls ``operation()`` makes, counted by the profiler: the work done,
    the same on every run whatever the machine's load (a clock would not be)."""
    profile = cProfile.Profile()
    profile.runcall(operation)
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def _query_calls(client: Any, table: str, index: str | None, attribute: str, value: str) -> int:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#h = :h",
        "ExpressionAttributeNames": {"#h": attribute},
        "ExpressionAttributeValues": {":h": _s(value)},
    }
    if index:
        request["IndexName"] = index
    assert client.query(**request)["Count"] == 1  # warm: first-use caches are no part of the cost
    return _calls(lambda: client.query(**request))


def _transaction_calls(client: Any, table: str) -> int:
    def put(n: int) -> None:
        item = {"TableName": table, "Item": {"pk": _s(f"new{n}"), "name": _s(f"new{n}")}}
        client.transact_write_items(TransactItems=[{"Put": item}])

    put(0)
    return _calls(lambda: put(1))


def test_a_query_and_a_transaction_cost_what_they_touch_not_the_table() -> None:
    """From 20 items to 4,000 (and their stream records) a GSI query, a base-table query and a
    transaction do about the same work; stock moto's walk and table copies do tens of times more."""
    with _moto(patched=True), mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, _ = names = _tables(client, "scale")
        try:
            figures = []
            for first, last in ((0, 20), (20, 4000)):
                for start in range(first, last, 25):
                    batch = range(start, min(last, start + 25))
                    puts: list[Any] = [
                        {"PutRequest": {"Item": {"pk": _s(f"u{i}"), "name": _s(f"n{i}")}}} for i in batch
                    ]
                    client.batch_write_item(RequestItems={users: puts})
                figures.append(
                    (
                        _query_calls(client, users, "Name", "name", "n7"),
                        _query_calls(client, users, None, "pk", "u7"),
                        _transaction_calls(client, users),
                    )
                )
                for n in range(2):
                    client.delete_item(TableName=users, Key={"pk": _s(f"new{n}")})
        finally:
            for name in names:
                client.delete_table(TableName=name)
    small, large = figures
    ratios = [round(b / a, 1) for a, b in zip(small, large, strict=True)]
    assert all(ratio < 3 for ratio in ratios), f"GSI query, base query, transaction: {ratios}"
