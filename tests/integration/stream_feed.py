"""A function's DynamoDB event source mapping, run in process on moto when a test asks for it.

:class:`StreamFeed` does synchronously what :class:`nimbus_tools.local.streams.StreamPoller` does
on a thread for the local API, with the rules of Lambda's event source mapping: read the table's
stream, keep the records the event's FilterCriteria accept, invoke the handler BatchSize at a time;
a batch that reports ``batchItemFailures`` (or raises) is held back from its first failed record
and invoked again by the next :meth:`StreamFeed.drain`, and after MaximumRetryAttempts retries its
``DDBStreamBatchInfo`` goes to the OnFailure queue and the feed moves on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nimbus_tools.local.inprocess import LambdaContextStub
from nimbus_tools.local.lambda_records import batch_failures, lambda_event, matches, on_failure_message
from nimbus_tools.local.streams import StreamReader, committed, latest_stream_arn
from nimbus_tools.stream_events import StreamSubscription

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class Invocation:
    """One invocation of the function: its records, and its answer or the exception it raised."""

    records: list[dict[str, Any]]
    answer: dict[str, Any] | None
    error: BaseException | None = None

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The answer's ``batchItemFailures`` (every record, if the function raised)."""
        if self.answer is None:
            return [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in self.records]
        failures: list[dict[str, Any]] = self.answer.get("batchItemFailures") or []
        return failures


class StreamFeed:
    """Feeds one subscription's function from its table's stream (see the module docstring).

    ``streams`` reads the stream and ``sqs`` sends to the OnFailure queue: the calls the event
    source mapping makes with the function's role. ``dynamodb`` only looks the stream up and drops
    moto's writes of cancelled transactions (:func:`committed`), which DynamoDB never streams.
    """

    def __init__(
        self,
        subscription: StreamSubscription,
        *,
        table: str,
        dynamodb: Any,
        streams: Any,
        sqs: Any,
        on_failure_queue_url: str | None,
    ) -> None:
        self.subscription = subscription
        self.table = table
        self.dynamodb = dynamodb
        self.sqs = sqs
        self.on_failure_queue_url = on_failure_queue_url
        self.reader = StreamReader(
            streams, latest_stream_arn(dynamodb, table), subscription.starting_position
        )
        self.pending: list[dict[str, Any]] = []  # accepted records not yet handled, oldest first
        self.attempts = 0  # failed invocations of the batch at the head of ``pending``
        self.given_up: list[dict[str, Any]] = []  # the OnFailure messages sent
        self.invocations: list[Invocation] = []  # every invocation, for tests to inspect

    def skip(self) -> None:
        """Forget what the stream holds so far and anything pending (earlier tests' records)."""
        self._read_new()
        self.pending, self.attempts = [], 0

    def drain(self, handler: Handler) -> list[Invocation]:
        """Invoke ``handler`` on what is pending, then on every new accepted record, a batch at a
        time, until nothing is left or a batch fails (retried by the next call); returns this
        call's invocations. Nothing to deliver: no invocation."""
        made: list[Invocation] = []
        while True:
            if not self.pending:
                self.pending, self.attempts = self._accepted(self._read_new()), 0
            if not self.pending:
                return made
            batch = self.pending[: self.subscription.batch_size]
            invocation = self._invoke(handler, batch)
            made.append(invocation)
            failed = self._failed(invocation, batch)
            if not failed:
                self.pending, self.attempts = self.pending[len(batch) :], 0
                continue
            self.pending = self.pending[len(batch) - len(failed) :]  # checkpoint at the first failure
            self.attempts += 1
            if self.attempts > self.subscription.maximum_retry_attempts >= 0:
                self._give_up(failed)
            return made

    # --- internals

    def _read_new(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        while batch := self.reader.read(1000):
            records += batch
        return records

    def _accepted(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [r for r in records if matches(r, self.subscription.filter_patterns)]
        return committed(self.dynamodb, self.table, kept)

    def _invoke(self, handler: Handler, batch: list[dict[str, Any]]) -> Invocation:
        context = LambdaContextStub(self.subscription.function)
        try:
            answer = handler(lambda_event(batch), context)
        except Exception as error:  # a function error: Lambda retries the whole batch
            invocation = Invocation(list(batch), None, error)
        else:
            invocation = Invocation(list(batch), answer if isinstance(answer, dict) else None)
        self.invocations.append(invocation)
        return invocation

    def _failed(self, invocation: Invocation, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if invocation.error is not None:
            return batch
        if not self.subscription.report_batch_item_failures:
            return []
        return batch_failures(json.dumps(invocation.answer), batch)

    def _give_up(self, failed: list[dict[str, Any]]) -> None:
        shard = next(iter(self.reader.last_seen), "")
        message = on_failure_message(self.subscription, failed, self.attempts, shard)
        if self.on_failure_queue_url:
            self.sqs.send_message(QueueUrl=self.on_failure_queue_url, MessageBody=json.dumps(message))
        self.given_up.append(message)
        self.pending, self.attempts = self.pending[len(failed) :], 0
