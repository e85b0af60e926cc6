"""Plays DynamoDB operations on whichever moto Python imports and writes what moto answered:
run as ``python moto_play.py OUT`` by tests/tools/unit/test_moto_patches.py, once on the project
environment's patched moto and once on stock moto (its files with patches/ reversed, first on
PYTHONPATH), so the two can be compared.

What it writes to OUT (Python literals, for ``ast.literal_eval``): where moto was imported from;
for each seed, every answer of that seed's random script and then every stream record; the raw
answers (bytes on the wire) to writes and reads of items of every attribute type; and the Python
calls a GetItem of such an item makes, client and moto (the serializer's work); and the answers,
error messages included, to update and condition expressions of every kind, valid and refused,
each asked twice (patched moto keeps what it parsed of a text).
"""

from __future__ import annotations

import cProfile
import pstats
import random
import re
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import moto
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

SEEDS = range(6)
STEPS = 150

REGION = "us-east-1"
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


def tables(client: Any, prefix: str) -> tuple[str, str]:
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


def s(value: str) -> dict[str, str]:
    return {"S": value}


class _Script:
    """Random operations on the two tables, as request parameters (table names filled in later)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, prefix: str, count: int) -> str:
        return f"{prefix}{self.rng.randrange(count)}"

    def user_key(self) -> dict[str, Any]:
        return {"pk": s(self.pick("u", 6))}

    def session_key(self) -> dict[str, Any]:
        return {"user": s(self.pick("u", 3)), "sid": s(self.pick("s", 5))}

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
                item |= {"name": s(self.pick("n", 3)), "part": s("USERS"), "order": s(self.pick("o", 9))}
            else:
                item |= {"device": s(self.pick("d", 3))}
            return kind, {"TableName": table, "Item": item, **condition}
        if kind == "Update":
            attribute = "name" if users else "device"
            update = {
                "UpdateExpression": "SET #a = :v ADD n :one",
                "ExpressionAttributeNames": {"#a": attribute},
                "ExpressionAttributeValues": {":v": s(self.pick(attribute[0], 3)), ":one": {"N": "1"}},
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
            "ExpressionAttributeValues": {":h": s(value)},
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


# Items of every attribute type, as stored and as answered: empty and odd strings, numbers as
# DynamoDB spells them, binaries, sets, nested maps and lists, booleans and nulls.
RICH_ITEMS: list[dict[str, Any]] = [
    {
        "pk": s("rich0"),
        "name": s('é ☃ 𝄞 \u0000 "quoted" \\ </script>'),
        "empty": s(""),
        "n": {"N": "-0.000123e5"},
        "big": {"N": "12345678901234567890123456789012345678"},
        "b": {"B": b"\x00\xffbinary"},
        "ss": {"SS": ["a", "", "☃"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"\x01", b"\x02"]},
        "t": {"BOOL": True},
        "f": {"BOOL": False},
        "nul": {"NULL": True},
        "m": {"M": {"s": s("x"), "e": s(""), "n": {"N": "0"}, "l": {"L": [{"N": "1"}, s(""), {"M": {}}]}}},
        "l": {"L": [{"L": []}, {"B": b"z"}, {"BOOL": False}, {"NULL": True}]},
    },
    {"pk": s("rich1"), "name": s("rich"), "part": s("p"), "order": s("0")},
]


def _kept(bodies: list[bytes]) -> Any:
    """A botocore ``after-call`` handler keeping each answer's bytes."""
    return lambda http_response, **_: bodies.append(http_response.content)


def rich_answers() -> list[Any]:
    """The raw answers (bytes on the wire) to writes and reads of RICH_ITEMS, then its stream."""
    bodies: list[bytes] = []
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, _ = tables(client, "rich")
        client.meta.events.register("after-call", _kept(bodies))
        for item in RICH_ITEMS:
            client.put_item(TableName=users, Item=item, ReturnValues="ALL_OLD")
            client.put_item(TableName=users, Item=item, ReturnValues="ALL_OLD")
        key = {"pk": s("rich0")}
        client.get_item(TableName=users, Key=key)
        client.scan(TableName=users)
        query: dict[str, Any] = {"TableName": users, "KeyConditionExpression": "pk = :k"}
        client.query(**query, ExpressionAttributeValues={":k": key["pk"]})
        client.batch_get_item(RequestItems={users: {"Keys": [key, {"pk": s("rich1")}]}})
        client.transact_get_items(TransactItems=[{"Get": {"TableName": users, "Key": key}}])
        client.update_item(
            TableName=users,
            Key=key,
            UpdateExpression="SET #e = :e, m.l[0] = :n REMOVE b",
            ExpressionAttributeNames={"#e": "empty"},
            ExpressionAttributeValues={":e": s("now"), ":n": {"N": "2"}},
            ReturnValues="ALL_NEW",
        )
        client.delete_item(TableName=users, Key=key, ReturnValues="ALL_OLD")
        return [*bodies, _stream(client, users)]


# Update expressions of every clause and function, then ones DynamoDB refuses (a clause twice, a
# path twice or inside another, bad syntax): each refusal's message names what the first failing
# check found, so the checks' order shows.
UPDATES = [
    "SET #a = :v",
    "SET #a = :v, b = if_not_exists(b, :w), c = list_append(if_not_exists(c, :l), :l) REMOVE d ADD n :one",
    "SET m.x = :v, m.y[1] = :w REMOVE m.z DELETE ss :ss ADD ns :ns",
    "SET n = n + :one, #a = :v",
    "ADD n :one SET #a = :v SET b = :w",
    "ADD n :one REMOVE d SET #a = :v ADD m :one SET b = :w",
    "SET #a = :v REMOVE #a",
    "SET m.x = :v, m = :w",
    "SET c = :v, b.x = :w, c = :v REMOVE b",
    "SET #a = :v, #a = :w",
    "SET = :v",
    "SET #a = :v,",
    "REMOVE pk",
]
# Conditions of every comparator and function, then ones DynamoDB refuses.
CONDITIONS = [
    "attribute_not_exists(pk) OR (#a < :v AND begins_with(#a, :w))",
    "size(l) > :one AND NOT attribute_exists(x)",
    "n BETWEEN :one AND :ten OR #a IN (:v, :w)",
    "contains(ss, :w) AND attribute_type(#a, :s) AND m.x <> :v",
    "(#a = :v)",
    "#a <>> :v",
    "n = = :one",
    "((n = :one)",
    "attribute_exists(pk) AND",
    "unknown_function(pk)",
]
EXPRESSION_VALUES = {
    ":v": s("v"),
    ":w": s("w"),
    ":l": {"L": [s("x")]},
    ":one": {"N": "1"},
    ":ten": {"N": "10"},
    ":ss": {"SS": ["a"]},
    ":ns": {"NS": ["1"]},
    ":s": s("S"),
}


def expression_answers() -> list[Any]:
    """Each of UPDATES and CONDITIONS, asked twice, on an item of every attribute the expressions
    name: the answer (the item after an update) or the error's code and message (or, where moto
    lets its parser's ValueError through, that)."""
    answers: list[Any] = []
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, _ = tables(client, "expr")
        item: dict[str, Any] = {
            "pk": s("e1"),
            "name": s("n"),
            "n": {"N": "3"},
            "l": {"L": [s("a"), s("b")]},
            "m": {"M": {"x": s("x"), "y": {"L": [s("0"), s("1")]}, "z": s("z")}},
            "ss": {"SS": ["a", "w"]},
            "ns": {"NS": ["2"]},
            "d": s("gone"),
        }
        for expression in UPDATES + CONDITIONS:
            for _ in range(2):
                client.put_item(TableName=users, Item=item)
                update = expression in UPDATES
                text = expression if update else "SET #a = :v"
                request: dict[str, Any] = {
                    "TableName": users,
                    "Key": {"pk": s("e1")},
                    "UpdateExpression": text,
                    "ReturnValues": "ALL_NEW",
                }
                text += " " + expression
                if used := {k: EXPRESSION_VALUES[k] for k in re.findall(r":\w+", text)}:
                    request["ExpressionAttributeValues"] = used
                if "#a" in text:
                    request["ExpressionAttributeNames"] = {"#a": "name"}
                if not update:
                    request["ConditionExpression"] = expression
                try:
                    answers.append(client.update_item(**request)["Attributes"])
                except ClientError as error:
                    answers.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
                except ValueError as error:  # moto raises some refusals as they are, not as AWS would
                    answers.append(("ValueError", str(error)))
    return answers


def calls(operation: Any) -> int:
    """The Python function calls ``operation()`` makes, counted by the profiler: the work done,
    the same on every run whatever the machine's load (a clock would not be)."""
    profile = cProfile.Profile()
    profile.runcall(operation)
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def get_item_calls() -> int:
    """The calls a GetItem of a user-like item of 14 string and number attributes makes, warm."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, _ = tables(client, "get")
        item = {"pk": s("u1"), "name": s("ann"), **{f"a{n}": s(f"value {n}") for n in range(6)}}
        item |= {f"n{n}": {"N": str(n * 1000)} for n in range(6)}
        client.put_item(TableName=users, Item=item)
        client.get_item(TableName=users, Key={"pk": s("u1")})  # warm: first-use caches aside
        return calls(lambda: client.get_item(TableName=users, Key={"pk": s("u1")}))


def play(seed: int, steps: int) -> list[Any]:
    """Every answer of the seed's script, then every stream record of both tables."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        users, sessions = tables(client, f"t{seed}")
        names = {"users": users, "sessions": sessions}
        answers = [_run(client, names, step) for step in _Script(seed).steps(steps)]
        return [*answers, _stream(client, users), _stream(client, sessions)]


if __name__ == "__main__":
    played = {
        "moto": moto.__file__,
        "scripts": {seed: play(seed, STEPS) for seed in SEEDS},
        "rich": rich_answers(),
        "expressions": expression_answers(),
        "get_item_calls": get_item_calls(),
    }
    with open(sys.argv[1], "w") as out:
        out.write(repr(played))
