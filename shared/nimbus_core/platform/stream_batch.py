"""The shared wiring of the stream-fed functions (mail, sweep): one Powertools batch processor and
the per-invocation metrics around it.

Records go through Powertools' batch utility, which answers ``batchItemFailures`` with the sequence
numbers of the records whose handler raised (ReportBatchItemFailures), so the stream retries exactly
those and the records after them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core.platform import metrics

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
