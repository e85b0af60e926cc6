"""The pinned moto still has the internals nimbus_tools.moto_internals relies on, in the same shape.

Each test drives moto through boto3 (in process, ``mock_aws``) and checks the helper's effect
through the public AWS API: a moto upgrade that renames or reshapes one of those internals fails
here, not in a long ``make serve`` or a slow suite. A worker of the parallel suite may hold another
mock's tables already (``mock_aws`` nests): these tests touch only their own and delete them after.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from werkzeug.serving import WSGIRequestHandler
from werkzeug.test import Client

from nimbus_tools.moto_internals import (
    empty_queues,
    empty_tables,
    forget_model_instances,
    pin_kms_key_id,
    restore_tables,
    server_app,
    snapshot_tables,
    stop_stream_records,
    table_names,
    tables_hold,
    tracked_model_instances,
    trim_stream,
)

REGION = "us-east-1"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        before = set(client.list_tables()["TableNames"])
        yield client
        for name in set(client.list_tables()["TableNames"]) - before:
            client.delete_table(TableName=name)


def _table(dynamodb: Any, name: str) -> str:
    """Create ``name`` with a stream; return the stream's ARN."""
    described = dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    return str(described["TableDescription"]["LatestStreamArn"])


def _put(dynamodb: Any, table: str, *ids: str) -> None:
    for item_id in ids:
        dynamodb.put_item(TableName=table, Item={"id": {"S": item_id}})


def _iterator(stream_arn: str, iterator_type: str = "TRIM_HORIZON") -> str:
    streams = _streams()
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    return str(
        streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard, ShardIteratorType=iterator_type)[
            "ShardIterator"
        ]
    )


def _read(iterator: str) -> list[tuple[str, str]]:
    """(sequence number, item id) of every record from ``iterator`` on."""
    records = _streams().get_records(ShardIterator=iterator)["Records"]
    return [(r["dynamodb"]["SequenceNumber"], r["dynamodb"]["Keys"]["id"]["S"]) for r in records]


def _records(stream_arn: str) -> list[tuple[str, str]]:
    return _read(_iterator(stream_arn))


def _streams() -> Any:
    return boto3.client(
        "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
    )


def _signed(app: Any, service: str, target: str) -> Any:
    return Client(app).post(
        "/",
        data="{}",
        headers={
            "X-Amz-Target": target,
            "Content-Type": "application/x-amz-json-1.1",
            "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20240101/{REGION}/{service}/aws4_request",
        },
    )


def test_the_server_app_answers_aws_requests_served_by_moto_s_request_handler() -> None:
    app, handler = server_app()
    assert issubclass(handler, WSGIRequestHandler)
    with mock_aws():
        reply = _signed(app, "dynamodb", "DynamoDB_20120810.ListTables")
    assert reply.status_code == 200
    assert isinstance(json.loads(reply.get_data())["TableNames"], list)


def test_the_server_app_sends_each_request_to_its_own_service_once_it_has_seen_their_hosts() -> None:
    """The dispatcher remembers each host's service: requests to several services, in turn,
    each reach their own."""
    app, _ = server_app()
    with mock_aws():
        answers = [
            json.loads(_signed(app, service, target).get_data())
            for _ in range(2)
            for service, target in (
                ("dynamodb", "DynamoDB_20120810.ListTables"),
                ("ssm", "AmazonSSM.DescribeParameters"),
                ("kms", "TrentService.ListKeys"),
            )
        ]
    wanted = ["TableNames", "Parameters", "Keys"] * 2  # a member each service's answer always has
    assert [key for key, answer in zip(wanted, answers, strict=True) if key in answer] == wanted


def test_forgetting_model_instances_empties_moto_s_record_of_them(dynamodb: Any) -> None:
    _table(dynamodb, "users")
    assert tracked_model_instances() > 0

    forget_model_instances()

    assert tracked_model_instances() == 0
    assert "users" in dynamodb.list_tables()["TableNames"]  # no backend state is touched


def test_trimming_drops_the_older_records_and_keeps_the_sequence_numbers(dynamodb: Any) -> None:
    arn = _table(dynamodb, "users")
    _put(dynamodb, "users", "a", "b", "c", "d", "e")
    before = _records(arn)

    assert trim_stream(arn, int(before[3][0]), kept_iterators=1000) == 3

    assert _records(arn) == before[3:]
    _put(dynamodb, "users", "f")
    assert _records(arn)[-1] == (str(int(before[-1][0]) + 1), "f")
    assert trim_stream(arn, 0, kept_iterators=1000) == 0  # nothing below the start any more


def test_trimming_forgets_the_iterators_below_the_start_then_all_but_the_newest_kept(dynamodb: Any) -> None:
    arn = _table(dynamodb, "users")
    _put(dynamodb, "users", "a", "b")
    start = int(_records(arn)[1][0])  # the trim keeps "b" on
    below, older = _iterator(arn), _iterator(arn, "LATEST")  # at "a", and after "b"

    trim_stream(arn, start, kept_iterators=1000)

    with pytest.raises(KeyError):  # moto has no expiry error: it no longer finds the iterator
        _read(below)
    newer, newest = _iterator(arn, "LATEST"), _iterator(arn, "LATEST")

    trim_stream(arn, start, kept_iterators=2)

    with pytest.raises(KeyError):
        _read(older)
    _put(dynamodb, "users", "c")
    assert [r[1] for r in _read(newer)] == [r[1] for r in _read(newest)] == ["c"]


def test_trimming_an_unknown_stream_is_a_lookup_error_and_a_bad_arn_a_value_error(dynamodb: Any) -> None:
    arn = _table(dynamodb, "users")
    with pytest.raises(LookupError):
        trim_stream(arn.replace("table/users", "table/nope"), 1, kept_iterators=1000)
    with pytest.raises(ValueError, match="unpack"):
        trim_stream("arn:aws:dynamodb", 1, kept_iterators=1000)


def test_emptying_tables_drops_items_and_stream_records_and_keeps_the_tables(dynamodb: Any) -> None:
    users, other = _table(dynamodb, "users"), _table(dynamodb, "other")
    _put(dynamodb, "users", "a", "b")
    _put(dynamodb, "other", "x")

    empty_tables(REGION, ["users"])

    assert dynamodb.scan(TableName="users")["Items"] == []
    assert _records(users) == []
    assert [r[1] for r in _records(other)] == ["x"]  # a table not named is left alone
    _put(dynamodb, "users", "c")
    assert [r[1] for r in _records(users)] == ["c"]


def test_table_names_are_the_tables_moto_holds_in_the_region(dynamodb: Any) -> None:
    before = table_names(REGION)
    _table(dynamodb, "users")

    assert table_names(REGION) == before | {"users"}
    assert "users" not in table_names("eu-west-1")


def test_emptying_queues_drops_waiting_and_in_flight_messages_at_once_and_again(dynamodb: Any) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    emptied, other = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("emptied", "other"))
    for url in (emptied, other):
        entries: list[Any] = [{"Id": str(i), "MessageBody": str(i)} for i in range(3)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    in_flight = sqs.receive_message(QueueUrl=emptied, MaxNumberOfMessages=1)["Messages"]
    assert len(in_flight) == 1

    empty_queues(REGION, [emptied])

    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):  # the message in flight is gone
        sqs.change_message_visibility(
            QueueUrl=emptied, ReceiptHandle=in_flight[0]["ReceiptHandle"], VisibilityTimeout=0
        )

    assert "Messages" not in sqs.receive_message(QueueUrl=emptied, MaxNumberOfMessages=10)
    assert len(sqs.receive_message(QueueUrl=other, MaxNumberOfMessages=10)["Messages"]) == 3
    sqs.send_message(QueueUrl=emptied, MessageBody="next")
    empty_queues(REGION, [emptied])  # within the minute PurgeQueue would refuse
    assert "Messages" not in sqs.receive_message(QueueUrl=emptied, MaxNumberOfMessages=10)
    for url in (emptied, other):  # moto may be a worker's shared mock: leave it as found
        sqs.delete_queue(QueueUrl=url)


def test_stopping_stream_records_leaves_only_the_kept_tables_recording(dynamodb: Any) -> None:
    users, other = _table(dynamodb, "users"), _table(dynamodb, "other")
    readers = {"users": _iterator(users, "LATEST"), "other": _iterator(other, "LATEST")}

    stop_stream_records(keep=set(dynamodb.list_tables()["TableNames"]) - {"other"})
    _put(dynamodb, "users", "a")
    _put(dynamodb, "other", "x")

    assert [r[1] for r in _read(readers["users"])] == ["a"]
    assert _read(readers["other"]) == []
    assert dynamodb.scan(TableName="other")["Count"] == 1


def test_a_pinned_kms_key_answers_to_its_new_id_and_arn_only() -> None:
    with mock_aws():
        kms = boto3.client("kms", region_name=REGION)
        drawn = kms.create_key()["KeyMetadata"]["KeyId"]
        wanted = "0f0f0f0f-0000-4000-8000-000000000001"
        pin_kms_key_id("123456789012", REGION, drawn, wanted)
        described = kms.describe_key(KeyId=wanted)["KeyMetadata"]
        assert described["Arn"] == f"arn:aws:kms:{REGION}:123456789012:key/{wanted}"
        made = kms.generate_data_key(KeyId=wanted, KeySpec="AES_256", EncryptionContext={"a": "b"})
        assert made["KeyId"] == described["Arn"]
        opened = kms.decrypt(CiphertextBlob=made["CiphertextBlob"], EncryptionContext={"a": "b"})
        assert opened["Plaintext"] == made["Plaintext"]
        assert opened["KeyId"] == described["Arn"]
        with pytest.raises(kms.exceptions.NotFoundException):
            kms.describe_key(KeyId=drawn)


def _scan(dynamodb: Any, table: str) -> dict[str, dict[str, Any]]:
    return {i["id"]["S"]: i for i in dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]}


def test_a_restore_puts_back_the_items_of_the_snapshot_as_often_as_asked(dynamodb: Any) -> None:
    users, other = _table(dynamodb, "users"), _table(dynamodb, "other")
    _put(dynamodb, "users", "a", "b")
    _put(dynamodb, "other", "x")
    snapshot = snapshot_tables(REGION, ["users"])
    taken = _scan(dynamodb, "users")

    for _ in range(2):  # the snapshot is not used up by a restore
        _put(dynamodb, "users", "c")
        dynamodb.delete_item(TableName="users", Key={"id": {"S": "a"}})
        dynamodb.update_item(
            TableName="users",
            Key={"id": {"S": "b"}},
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "1"}},
        )
        _put(dynamodb, "other", "y")

        restore_tables(snapshot)

        assert _scan(dynamodb, "users") == taken
    assert set(_scan(dynamodb, "other")) == {"x", "y"}  # a table not in the snapshot is left alone
    records = _records(users)
    assert [r[1] for r in records] == ["a", "b", *["c", "a", "b"] * 2]  # the stream is left alone
    _put(dynamodb, "users", "d")
    assert _records(users)[-1] == (str(int(records[-1][0]) + 1), "d")  # and its numbers go on rising
    assert [r[1] for r in _records(other)] == ["x", "y", "y"]


def test_tables_hold_their_snapshot_until_an_attribute_of_an_item_differs(dynamodb: Any) -> None:
    _table(dynamodb, "users")
    dynamodb.create_table(
        TableName="ranged",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "at", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    item = {"id": {"S": "a"}, "factors": {"M": {"f1": {"M": {"type": {"S": "totp"}}}}}, "n": {"N": "1"}}
    dynamodb.put_item(TableName="users", Item=item)
    dynamodb.put_item(TableName="ranged", Item={"id": {"S": "a"}, "at": {"S": "1"}})
    snapshot = snapshot_tables(REGION, ["users", "ranged"])
    changes: list[tuple[str, dict[str, Any]]] = [
        ("users", {**item, "factors": {"M": {"f1": {"M": {"type": {"S": "key"}}}}}}),  # deep inside
        ("users", {**item, "n": {"S": "1"}}),  # the same value, of another type
        ("users", {"id": {"S": "b"}}),  # one item more
        ("ranged", {"id": {"S": "a"}, "at": {"S": "2"}}),  # under another range key
    ]

    assert tables_hold(snapshot)
    for table, changed in changes:
        dynamodb.put_item(TableName=table, Item=changed)
        assert not tables_hold(snapshot), changed
        restore_tables(snapshot)
        assert tables_hold(snapshot)
    dynamodb.delete_item(TableName="ranged", Key={"id": {"S": "a"}, "at": {"S": "1"}})
    assert not tables_hold(snapshot)
    dynamodb.put_item(TableName="ranged", Item={"id": {"S": "a"}, "at": {"S": "1"}})
    assert tables_hold(snapshot)  # written again as it was


def test_an_item_a_restore_puts_back_is_found_again_by_an_index_query(dynamodb: Any) -> None:
    """On the patched moto (patches/moto-dynamodb-scale.patch), an index query only looks at the
    items its attribute index names; a restore puts items back behind moto's methods, so it must
    not leave an index that dropped them on the way."""
    dynamodb.create_table(
        TableName="named",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "name", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "Name",
                "KeySchema": [{"AttributeName": "name", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )

    def named(name: str) -> list[str]:
        found = dynamodb.query(
            TableName="named",
            IndexName="Name",
            KeyConditionExpression="#n = :n",
            ExpressionAttributeNames={"#n": "name"},
            ExpressionAttributeValues={":n": {"S": name}},
        )["Items"]
        return [item["id"]["S"] for item in found]

    dynamodb.put_item(TableName="named", Item={"id": {"S": "a"}, "name": {"S": "ann"}})
    snapshot = snapshot_tables(REGION, ["named"])
    dynamodb.delete_item(TableName="named", Key={"id": {"S": "a"}})
    assert named("ann") == []  # the query meets the deleted item and drops it from the index

    restore_tables(snapshot)

    assert named("ann") == ["a"]
