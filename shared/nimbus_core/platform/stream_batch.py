"""The shared wiring of the stream-fed functions (mail, sweep, recovery, activity): one Powertools
batch processor and the per-invocation metrics around it, and the reading of the new outbox items
the recovery and activity functions take (:func:`new_item_handler`).

Records go through Powertools' batch utility, which answers ``batchItemFailures`` with the sequence
numbers of the records whose handler raised (ReportBatchItemFailures), so the stream retries exactly
those and the records after them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core.platform import metrics

_log = Logger(child=True)

# A batch whose every record failed is answered like any other (all records listed), not raised:
# the stream retries the same records either way, and the answer stays one shape.
_processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def process_batch(
    event: dict[str, Any], context: LambdaContext, record_handler: Callable[[DynamoDBRecord], None]
) -> PartialItemFailureResponse:
    """Run ``record_handler`` on every record of a DynamoDB stream batch; the records to retry."""
    metrics.begin()
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=_processor, context=context
        )
    finally:
        metrics.flush()


def new_item_handler[T](
    read: Callable[[dict[str, Any]], T], handle: Callable[[T], object], *, what: str
) -> Callable[[DynamoDBRecord], None]:
    """A record handler for new items of one kind: ``read`` turns a record's ``NewImage`` into ``T``
    (KeyError, ValueError or TypeError: not ``what``), ``handle`` does the work. A record that is
    no INSERT, or an item that is not ``what``, is logged and skipped: no retry could read it."""

    def record_handler(record: DynamoDBRecord) -> None:
        raw: dict[str, Any] = record.raw_event
        image = (raw.get("dynamodb") or {}).get("NewImage")
        if raw.get("eventName") != "INSERT" or not image:
            _log.warning("ignoring a stream record that is not a new item")
            return
        try:
            item = read(image)
        except (KeyError, ValueError, TypeError):
            _log.warning(f"ignoring an item that is not {what}")
            return
        handle(item)

    return record_handler
