"""Lambda entry point of the sweep function (the users table's stream, keys only): wiring only.

Each record names a user item that changed or was removed (FilterCriteria keep claim items and
inserts out); the user's stale sessions are deleted by :mod:`sweep_api.service`. Records are
processed with Powertools' batch utility, which answers ``batchItemFailures`` with the sequence
numbers of the records whose sweep raised (ReportBatchItemFailures), so the stream retries exactly
those and the records after them; sweeping again is harmless.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core import metrics
from nimbus_core.adapters.container import production_deps
from nimbus_core.adapters.users import user_id_from_key
from nimbus_core.loglevels import LEVELS
from sweep_api.service import Sweeper

logger = Logger()
# A batch whose every record failed is answered like any other (all records listed), not raised:
# the stream retries the same records either way, and the answer stays one shape.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Sweep the stale sessions of every user named by a stream batch; report the ones to retry."""
    _apply_log_level()
    sweeper = Sweeper(production_deps())

    def record_handler(record: DynamoDBRecord) -> None:
        raw: dict[str, Any] = record.raw_event
        user_id = user_id_from_key((raw.get("dynamodb") or {}).get("Keys") or {})
        if raw.get("eventName") not in ("MODIFY", "REMOVE") or user_id is None:
            logger.warning("ignoring a stream record that is not a changed or removed user item")
            return
        sweeper.sweep(user_id)

    metrics.begin()
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        metrics.flush()


def _apply_log_level() -> None:
    try:
        level = production_deps().config.current().log_level
    except Exception:  # SSM unavailable: keep the current level; sweeping does not depend on it
        return
    logger.setLevel(LEVELS[level])
