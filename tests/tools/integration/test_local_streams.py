"""The stream poller against the real AWS emulator: every committed record delivered once, and the
stream trimmed behind it, so it does not grow without bound in a long ``make serve`` session (moto
deep-copies a table, stream included, on every TransactWriteItems)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest

from nimbus_core.platform import clock
from nimbus_tools.local.aws import AwsEmulator, TableWrites, written_tables
from nimbus_tools.local.functions import Invocation
from nimbus_tools.local.session import emulator_session
from nimbus_tools.local.streams import STREAM_CLIENT_CONFIG, StreamPoller, StreamReader, latest_stream_arn
from nimbus_tools.stream_events import StreamSubscription
from nimbus_tools.template import LOCAL_REGION

pytestmark = pytest.mark.waits  # pollers waiting on streams


class Function:
    """Stands in for a stream-fed function: records every key it is given; fails the ``bad`` one."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._lock = threading.Lock()

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        keys = [r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]]
        if "bad" in keys:
            return Invocation(ok=False, error="boom")
        with self._lock:
            self.keys += keys
        return Invocation(ok=True, result_json=json.dumps({"batchItemFailures": []}))


class Stack:
    """A table with a stream (and a queue) in a running emulator, fed to :class:`Function`."""

    def __init__(self, url: str, *, interval: float = 0.02, writes: TableWrites | None = None) -> None:
        session = emulator_session(LOCAL_REGION)
        self.dynamodb: Any = session.client("dynamodb", endpoint_url=url)
        self.streams: Any = session.client("dynamodbstreams", endpoint_url=url, config=STREAM_CLIENT_CONFIG)
        self.sqs: Any = session.client("sqs", endpoint_url=url)
        self.table = f"Trim{uuid.uuid4().hex[:8]}"  # moto's backends are this process's: a name of our own
        self.dynamodb.create_table(
            TableName=self.table,
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        self.arn = latest_stream_arn(self.dynamodb, self.table)
        self.queue = self.sqs.create_queue(QueueName=f"{self.table}-failures")["QueueUrl"]
        self.function = Function()
        subscription = StreamSubscription(
            "Fed", "Stream", "Table", 10, "TRIM_HORIZON", maximum_retry_attempts=0, on_failure_queue="Q"
        )
        self.poller = StreamPoller(
            [subscription],
            self.function,
            session=session,
            endpoint_url=url,
            tables={"Table": self.table},
            queues={"Q": self.queue},
            interval=interval,
            retry_delay=0.01,
            writes=writes,
        )

    def put(self, *keys: str) -> None:
        for key in keys:
            self.dynamodb.put_item(TableName=self.table, Item={"pk": {"S": key}})

    def stream(self, kind: str = "TRIM_HORIZON", sequence: str | None = None) -> list[dict[str, Any]]:
        """Every record the stream still holds (from ``sequence`` on, with AT_SEQUENCE_NUMBER)."""
        [shard] = self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        position = {"SequenceNumber": sequence} if sequence else {}
        iterator = self.streams.get_shard_iterator(
            StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType=kind, **position
        )["ShardIterator"]
        return list(self.streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])


def eventually(condition: Callable[[], bool], bound: float = 10.0) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def stack() -> Iterator[Stack]:
    emulator = AwsEmulator()
    url = emulator.start()
    try:
        stack = Stack(url)
        stack.poller.start()
        yield stack
        stack.poller.stop()
        stack.dynamodb.delete_table(TableName=stack.table)
    finally:
        emulator.stop()


def test_delivered_records_are_trimmed_and_later_ones_still_arrive_once_in_order(stack: Stack) -> None:
    written: list[str] = []
    for round_ in range(3):
        keys = [f"r{round_}-{i:02d}" for i in range(25)]
        stack.put(*keys[:10])
        # A cancelled transaction: moto rolls the table, stream included, back to a copy.
        with pytest.raises(stack.dynamodb.exceptions.TransactionCanceledException):
            stack.dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": stack.table, "Item": {"pk": {"S": f"cancelled-{round_}"}}}},
                    {
                        "ConditionCheck": {
                            "TableName": stack.table,
                            "Key": {"pk": {"S": "absent"}},
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                ]
            )
        stack.put(*keys[10:])
        written += keys
        count = len(written)
        eventually(lambda: len(stack.function.keys) >= count)  # noqa: B023 - called at once
        # Only the last record delivered stays (the reader reads it again to know where it is).
        eventually(lambda: len(stack.stream()) == 1)
        assert stack.stream()[0]["dynamodb"]["Keys"]["pk"]["S"] == written[-1]

    assert stack.function.keys == written  # each once, in order, none of the cancelled writes


def test_a_batch_given_up_to_the_failure_queue_stays_readable_for_24_hours(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.put("first")
    eventually(lambda: stack.function.keys == ["first"])
    stack.put("bad")
    messages: list[dict[str, Any]] = []

    def received() -> bool:
        # No long polling: moto would hold the emulator's one lock meanwhile, so nothing could be sent.
        messages.extend(stack.sqs.receive_message(QueueUrl=stack.queue).get("Messages", []))
        return bool(messages)

    eventually(received)
    [message] = messages
    info = json.loads(message["Body"])["DDBStreamBatchInfo"]
    stack.put("after")
    eventually(lambda: stack.function.keys == ["first", "after"])
    time.sleep(0.2)  # trims have run since

    # What the failure message points at is still there (nimbus mail retry reads it back)...
    kept = stack.stream("AT_SEQUENCE_NUMBER", info["startSequenceNumber"])
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in kept] == ["bad", "after"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in stack.stream()] == ["bad", "after"]

    # ...until it is 24 hours old, as on DynamoDB.
    later = time.time() + 24 * 3600 + 60
    monkeypatch.setattr(clock, "now", lambda: later)
    stack.put("next-day")
    eventually(lambda: stack.function.keys == ["first", "after", "next-day"])
    eventually(lambda: [r["dynamodb"]["Keys"]["pk"]["S"] for r in stack.stream()] == ["next-day"])


class Waited(TableWrites):
    """The emulator's writes, as the poller is given them, telling when the poller waits on them."""

    def __init__(self, writes: TableWrites) -> None:
        super().__init__()
        self.writes, self.waiting = writes, False

        self.woken = 0  # waits that ended

    def seen(self, table: str | None = None) -> int:
        return self.writes.seen(table)

    def notify(self, tables: Iterable[str] | None = None) -> None:
        self.writes.notify(tables)

    def wait(self, seen: int, timeout: float, table: str | None = None) -> None:
        self.waiting = True
        try:
            self.writes.wait(seen, timeout, table)
        finally:
            self.waiting = False
            self.woken += 1


def test_a_poller_told_of_the_emulators_writes_reads_an_idle_stream_when_a_table_is_written() -> None:
    """It waits for a write, not for its interval (an hour here: without the wake-up, the records
    would never arrive in time), and stopping wakes it too."""
    emulator = AwsEmulator()
    url = emulator.start()
    try:
        writes = Waited(emulator.writes)
        stack = Stack(url, interval=3600, writes=writes)
        stack.poller.start()
        for keys in (["a"], ["b", "c"]):
            eventually(lambda: writes.waiting)  # found nothing more to read: waits for a write
            stack.put(*keys)
            eventually(lambda: stack.function.keys[-1:] == keys[-1:])  # noqa: B023 - called at once
        stack.poller.stop(timeout=3600)  # returns once its threads have ended
        stack.dynamodb.delete_table(TableName=stack.table)
    finally:
        emulator.stop()
    assert stack.function.keys == ["a", "b", "c"]


class WritesWhileHandling(Function):
    """Writes ``late`` into the table while it handles ``first``: after the poller read the stream."""

    def __init__(self, put: Callable[[str], None]) -> None:
        super().__init__()
        self.put = put

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        answer = super().invoke(function, event, request_id)
        if self.keys == ["first"]:
            self.put("late")
        return answer


def test_a_poller_that_delivered_less_than_a_batch_waits_for_a_write_and_one_made_meanwhile_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Less than a batch read is all the stream held: the poller waits for the next write instead of
    reading the stream again to find it empty (two more requests into moto per wake-up, for every
    stream-fed function), and a write made while it delivered still wakes it (an hour's interval)."""
    reads: list[int] = []
    read = StreamReader.read

    def counted(reader: StreamReader, limit: int) -> list[dict[str, Any]]:
        records = read(reader, limit)
        reads.append(len(records))
        return records

    monkeypatch.setattr(StreamReader, "read", counted)
    emulator = AwsEmulator()
    url = emulator.start()
    try:
        writes = Waited(emulator.writes)
        stack = Stack(url, interval=3600, writes=writes)
        stack.function = stack.poller.invoker = WritesWhileHandling(stack.put)
        stack.poller.start()
        eventually(lambda: writes.waiting)
        stack.put("first")
        eventually(lambda: stack.function.keys == ["first", "late"])
        eventually(lambda: writes.waiting and len(reads) == 3)
        stack.poller.stop(timeout=3600)
        stack.dynamodb.delete_table(TableName=stack.table)
    finally:
        emulator.stop()
    assert reads == [0, 1, 1]  # nothing at the start, then each record once, and no empty read


def test_a_poller_sleeps_through_writes_to_other_tables_and_wakes_for_its_own() -> None:
    """A sign-in writes sessions and counters: no reader of another table's stream is woken to
    read nothing (an hour's interval: only a write to its own table can wake it)."""
    emulator = AwsEmulator()
    url = emulator.start()
    try:
        writes = Waited(emulator.writes)
        stack, other = Stack(url, interval=3600, writes=writes), Stack(url)
        stack.poller.start()
        eventually(lambda: writes.waiting)
        woken = writes.woken
        item = {"pk": {"S": "elsewhere"}}
        other.put("elsewhere")
        other.dynamodb.batch_write_item(RequestItems={other.table: [{"PutRequest": {"Item": item}}]})
        other.dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": other.table, "Item": item}}])
        time.sleep(0.3)  # long enough for a wake-up to have been seen: there must be none
        assert (writes.waiting, writes.woken) == (True, woken)

        stack.dynamodb.transact_write_items(
            TransactItems=[{"Put": {"TableName": stack.table, "Item": {"pk": {"S": "mine"}}}}]
        )
        eventually(lambda: stack.function.keys == ["mine"])
        stack.poller.stop(timeout=3600)
        for table in (stack.table, other.table):
            stack.dynamodb.delete_table(TableName=table)
    finally:
        emulator.stop()


def test_the_tables_a_write_names_are_told_apart_and_partiql_is_not() -> None:
    transaction = {"TransactItems": [{"Put": {"TableName": "A"}}, {"Update": {"TableName": "B"}}]}
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/C"
    assert written_tables("TransactWriteItems", json.dumps(transaction).encode()) == ["A", "B"]
    assert written_tables("BatchWriteItem", b'{"RequestItems": {"A": [], "B": []}}') == ["A", "B"]
    assert written_tables("UpdateItem", json.dumps({"TableName": arn}).encode()) == ["C"]
    assert written_tables("ExecuteStatement", b'{"Statement": "INSERT INTO A VALUE {}"}') is None
    assert written_tables("PutItem", b"not json") is None
