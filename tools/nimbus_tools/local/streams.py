"""DynamoDB stream event sources, as Lambda's event source mappings run them (docs/development.md):
:class:`StreamPoller` reads, filters, invokes in batches, retries, gives up to the OnFailure queue,
and has the emulator trim what every reader is done with (but what an OnFailure message points at,
for 24 hours). Not emulated: bisecting, MaximumRecordAgeInSeconds, shards added after start-up."""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.platform import clock
from nimbus_tools.local.control import ControlError, trim_stream
from nimbus_tools.local.lambda_records import (
    batch_failures,
    lambda_event,
    lambda_record,
    matches,
    on_failure_message,
)
from nimbus_tools.stream_events import StreamSubscription

if TYPE_CHECKING:
    import boto3
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient

    from nimbus_tools.local.aws import TableWrites
    from nimbus_tools.local.functions import Invoker

# Lambda's default is "retry until the record expires" (-1); locally that would spin for a day.
LOCAL_MAX_RETRIES = 5
STREAM_CLIENT_CONFIG = Config(account_id_endpoint_mode="disabled")  # moto serves the regional endpoint
RETENTION_SECONDS = 24 * 3600  # how long DynamoDB keeps a stream record
TRIM_INTERVAL_SECONDS = 30.0  # an idle poller still trims this often (moto's used iterators go too)
# Once a write wakes it, a poller waits this long before reading, so that the writes of one request
# (a transaction, then the mail it queues) and of a burst are read together, not one read each: Lambda
# reads a shard a few times a second.
WAKE_DELAY_SECONDS = 0.25


class StreamReader:
    """Reads a table's stream from where it was left, shard by shard (new records only), with a
    fresh iterator at the last record returned: moto (5.2) rolls a cancelled TransactWriteItems back
    by replacing the table, stream included, so sequence numbers are handed out again. Records are
    told apart by eventID, which moto never reuses (:meth:`forget` drops those of trimmed records)."""

    def __init__(self, client: DynamoDBStreamsClient, stream_arn: str, starting_position: str) -> None:
        self.client, self.stream_arn = client, stream_arn
        description = client.describe_stream(StreamArn=stream_arn)["StreamDescription"]
        # Shard id -> (sequence number, eventID) of the last record returned (None: none yet).
        self.last_seen: dict[str, tuple[str, str] | None] = dict.fromkeys(
            s["ShardId"] for s in description.get("Shards", [])
        )
        # eventID -> sequence number of every record returned and not yet trimmed from the stream.
        self.returned: dict[str, int] = {}
        if starting_position == "LATEST":
            for shard_id in self.last_seen:
                while self._read_shard(shard_id, 1000):
                    pass  # skip what is already there

    def read(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` new records of one shard, in Lambda's shape (empty: nothing new)."""
        for shard_id in self.last_seen:
            records = self._read_shard(shard_id, limit)
            if records:
                return [lambda_record(r, self.stream_arn) for r in records]
        return []

    def position(self) -> int | None:
        """The lowest sequence number among the shards' last records returned (every record before
        it was returned); None while a shard has returned nothing."""
        seen = [int(last[0]) for last in self.last_seen.values() if last is not None]
        return min(seen) if seen and len(seen) == len(self.last_seen) else None

    def forget(self, before: int) -> None:
        """Drop the eventIDs of records below sequence number ``before`` (trimmed from the stream)."""
        self.returned = {event: seq for event, seq in self.returned.items() if seq >= before}

    def _records(self, shard_id: str, limit: int, sequence: str | None = None) -> list[Any]:
        # From the shard's oldest record, or (given a sequence number) from that record on.
        position: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
        if sequence is not None:
            position = {"ShardIteratorType": "AT_SEQUENCE_NUMBER", "SequenceNumber": sequence}
        shard = self.client.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard_id, **position)
        records = self.client.get_records(ShardIterator=shard["ShardIterator"], Limit=limit)
        return list(records.get("Records", []))

    def _read_shard(self, shard_id: str, limit: int) -> list[Any]:
        last = self.last_seen[shard_id]
        if last is None:
            records = self._records(shard_id, limit)
        else:
            # The last record returned, read again: another one there means a rollback rewound the shard.
            records = self._records(shard_id, limit + 1, last[0])
            if records and records[0].get("eventID") == last[1]:
                records = records[1:]
            else:
                records = self._records(shard_id, 10_000)
        fresh = [r for r in records if r.get("eventID") not in self.returned][:limit]
        self.returned.update((str(r.get("eventID")), int(r["dynamodb"]["SequenceNumber"])) for r in fresh)
        if fresh:
            self.last_seen[shard_id] = (
                str(fresh[-1]["dynamodb"]["SequenceNumber"]),
                str(fresh[-1].get("eventID")),
            )
        return fresh


def committed(dynamodb: Any, table: str, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` without the writes of cancelled transactions, which moto (5.2) can stream and
    DynamoDB never does: a new or changed item whose key is absent from the table was one (or was
    deleted since, which a later REMOVE record reports anyway). The keys are read in one
    BatchGetItem per hundred, not a GetItem each."""
    keys = {
        _key_of(record["dynamodb"]["Keys"]): record["dynamodb"]["Keys"]
        for record in records
        if record.get("eventName") in ("INSERT", "MODIFY")
    }
    stored = _stored_keys(dynamodb, table, list(keys.values()))
    return [
        record
        for record in records
        if record.get("eventName") not in ("INSERT", "MODIFY")
        or _key_of(record["dynamodb"]["Keys"]) in stored
    ]


def _key_of(key: Mapping[str, Any]) -> str:
    """A DynamoDB key (attribute name to typed value, binary values included) as a comparable text."""
    return repr(sorted(key.items()))


def _stored_keys(dynamodb: Any, table: str, keys: list[dict[str, Any]]) -> set[str]:
    """Which of ``keys`` (each a DynamoDB key) name an item of ``table`` (:func:`_key_of` each)."""
    names = list(keys[0]) if keys else []
    stored: set[str] = set()
    pending = list(keys)
    while pending:
        chunk, pending = pending[:100], pending[100:]
        request: dict[str, Any] = {table: {"Keys": chunk, "ConsistentRead": True}}
        while request:
            answer = dynamodb.batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(table, []):
                stored.add(_key_of({name: item[name] for name in names}))
            request = answer.get("UnprocessedKeys") or {}
    return stored


def latest_stream_arn(dynamodb: Any, table: str) -> str:
    """The ARN of ``table``'s stream; ValueError if the table has none."""
    arn = dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
    if not arn:
        raise ValueError(f"table {table} has no stream (StreamSpecification)")
    return str(arn)


class StreamPoller:
    """One thread per subscription: read, filter, invoke, retry, give up to the OnFailure queue."""

    def __init__(
        self,
        subscriptions: Sequence[StreamSubscription],
        invoker: Invoker,
        *,
        session: boto3.Session,
        endpoint_url: str,
        tables: Mapping[str, str],
        queues: Mapping[str, str],
        interval: float = 0.2,
        retry_delay: float = 0.2,
        log: Callable[[str], None] | None = None,
        writes: TableWrites | None = None,
    ) -> None:
        """``interval``: how long a stream that had nothing waits before it is read again; with
        ``writes`` (the emulator's), it is read again as soon as its table is written, and
        ``interval`` is only the longest wait."""
        self.subscriptions, self.invoker, self.session = list(subscriptions), invoker, session
        self.writes = writes
        self.endpoint_url, self.tables, self.queues = endpoint_url, dict(tables), dict(queues)
        self.interval, self.retry_delay = interval, retry_delay
        self._log = log or (lambda _line: None)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._requests = itertools.count(1)
        self._readers: list[tuple[StreamSubscription, StreamReader]] = []
        # Stream ARN -> (first sequence number, expiry) of every batch given up to an OnFailure queue.
        self._kept: dict[str, list[tuple[int, float]]] = {}
        self._kept_lock = threading.Lock()
        # Reader -> its position when all it had read was delivered or given up (None: not yet).
        self._done: dict[StreamReader, int | None] = {}

    def start(self) -> None:
        """Open every stream at its StartingPosition (before returning), then poll on threads."""
        dynamodb = self.session.client("dynamodb", endpoint_url=self.endpoint_url)
        for subscription in self.subscriptions:
            arn = latest_stream_arn(dynamodb, self.tables[subscription.table])
            streams = self.session.client(
                "dynamodbstreams", endpoint_url=self.endpoint_url, config=STREAM_CLIENT_CONFIG
            )
            self._readers.append((subscription, StreamReader(streams, arn, subscription.starting_position)))
        for subscription, reader in self._readers:
            name = f"stream-{subscription.table}-{subscription.function}"
            self._threads.append(
                threading.Thread(target=self._poll, args=(subscription, reader), name=name, daemon=True)
            )
            self._threads[-1].start()

    def request_stop(self) -> None:
        """Stop reading and retrying: threads finish their invocation, then exit."""
        self._stop.set()
        if self.writes is not None:
            self.writes.notify()  # wake the threads waiting for a write

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and wait for every thread (after closing the pools: no invocation is then in flight)."""
        self.request_stop()
        for thread in self._threads:
            thread.join(timeout=timeout)
        self._threads.clear()

    def _poll(self, subscription: StreamSubscription, reader: StreamReader) -> None:
        dynamodb = self.session.client("dynamodb", endpoint_url=self.endpoint_url)
        trimmed: tuple[int | None, float] = (None, time.monotonic())  # (position, when) of the last trim
        while not self._stop.is_set():
            # Everything read before was delivered (or given up): the stream can drop it.
            position = self._done[reader] = reader.position()
            if position != trimmed[0] or time.monotonic() - trimmed[1] > TRIM_INTERVAL_SECONDS:
                self._trim(reader)
                trimmed = (position, time.monotonic())
            table = self.tables[subscription.table]
            seen = self.writes.seen(table) if self.writes is not None else 0  # before the read: none missed
            try:
                records = reader.read(subscription.batch_size)
            except (BotoCoreError, ClientError) as error:
                if self._stop.is_set():
                    return
                self._log(f"stream {subscription.table}: cannot read ({error}); retrying")
                self._stop.wait(1.0)
                continue
            if not records:
                self._idle(seen, table)
                continue
            try:
                batch = [r for r in records if matches(r, subscription.filter_patterns)]
                batch = committed(dynamodb, self.tables[subscription.table], batch)
            except ValueError as error:
                self._log(f"stream {subscription.table} -> {subscription.function}: {error}")
                return
            except (BotoCoreError, ClientError) as error:
                self._log(f"stream {subscription.table}: cannot check records ({error}); skipping check")
            if batch:
                self._deliver(subscription, batch)
            drained = len(records) < subscription.batch_size and len(reader.last_seen) == 1
            if drained and self.writes is not None:
                # Less than a batch: the one shard held nothing more when read, and every write since
                # `seen` wakes the wait at once; reading again now would only find it empty.
                self._idle(seen, table)

    def _idle(self, seen: int, table: str) -> None:
        """Wait for a write to ``table`` after the ``seen``-th (without the emulator's writes: the
        interval), then the wake delay that lets one request's writes be read together."""
        if self.writes is None:
            self._stop.wait(self.interval)
        elif not self._stop.is_set():
            self.writes.wait(seen, self.interval, table)
            self._stop.wait(WAKE_DELAY_SECONDS)

    def _trim(self, reader: StreamReader) -> None:
        """Have the emulator drop the records of ``reader``'s stream that every reader of it has
        returned (each keeps its last one, which it reads again) and no kept batch holds."""
        arn = reader.stream_arn
        positions = [self._done.get(r) for _, r in self._readers if r.stream_arn == arn]
        with self._kept_lock:
            now = clock.now()
            kept = self._kept[arn] = [(start, end) for start, end in self._kept.get(arn, []) if end > now]
            starts = [start for start, _ in kept]
        if any(p is None for p in positions):
            return  # a reader that has returned nothing needs the whole stream
        before = min([p for p in positions if p is not None] + starts)
        try:
            trim_stream(self.endpoint_url, arn, before)
        except ControlError as error:
            self._log(f"stream {arn}: cannot trim ({error})")
        else:
            reader.forget(before)

    def _deliver(self, subscription: StreamSubscription, batch: list[dict[str, Any]]) -> None:
        limit, pending, invocations = subscription.maximum_retry_attempts, batch, 0
        retries = LOCAL_MAX_RETRIES if limit < 0 else min(limit, LOCAL_MAX_RETRIES)
        while pending and not self._stop.is_set():
            invocations += 1
            request_id = f"stream-{next(self._requests):06d}-{uuid.uuid4().hex[:8]}"
            invocation = self.invoker.invoke(subscription.function, lambda_event(pending), request_id)
            if not invocation.ok:
                failed, outcome = pending, f"error: {invocation.error}"
            elif subscription.report_batch_item_failures:
                failed = batch_failures(invocation.result_json, pending)
                outcome = f"{len(failed)} to retry" if failed else "ok"
            else:
                failed, outcome = [], "ok"
            self._log(
                f"{time.strftime('%H:%M:%S')} stream {subscription.table} -> {subscription.function} "
                f"{len(pending)} record(s): {outcome}"
            )
            if not failed:
                return
            if invocations > retries:
                self._give_up(subscription, failed, invocations)
                return
            pending = failed
            self._stop.wait(self.retry_delay * invocations)

    def _give_up(
        self, subscription: StreamSubscription, failed: list[dict[str, Any]], invocations: int
    ) -> None:
        queue, table = self.queues.get(subscription.on_failure_queue or ""), subscription.table
        if not queue:
            self._log(f"stream {table}: dropped {len(failed)} record(s) after {invocations} tries")
            return
        shards = [shard for sub, reader in self._readers if sub is subscription for shard in reader.last_seen]
        info = on_failure_message(subscription, failed, invocations, next(iter(shards), ""))
        try:
            sqs = self.session.client("sqs", endpoint_url=self.endpoint_url)
            sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(info))
        except (BotoCoreError, ClientError) as error:
            self._log(f"stream {table}: could not send the failed batch to {queue}: {error}")
            return
        # The message points at the records in the stream: keep them as long as DynamoDB would.
        first, arn = failed[0]["dynamodb"], failed[0]["eventSourceARN"]
        expiry = float(first.get("ApproximateCreationDateTime") or clock.now()) + RETENTION_SECONDS
        with self._kept_lock:
            self._kept.setdefault(arn, []).append((int(first["SequenceNumber"]), expiry))
        self._log(f"stream {table}: {len(failed)} record(s) sent to {subscription.on_failure_queue}")
