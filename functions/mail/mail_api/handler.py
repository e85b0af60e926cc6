"""Lambda entry point of the mail function (the outbox table's stream): wiring only.

Records are processed with Powertools' batch utility, which answers ``batchItemFailures`` with the
sequence numbers of the records whose delivery raised (ReportBatchItemFailures), so the stream
retries exactly those and the records after them.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from mail_api.service import MailService
from nimbus_core import metrics
from nimbus_core.adapters import clients
from nimbus_core.adapters.container import production_deps
from nimbus_core.adapters.dead_letters import SqsDeadLetterQueue
from nimbus_core.adapters.mail import SesMailer
from nimbus_core.adapters.outbox import message_from_image
from nimbus_core.loglevels import LEVELS
from nimbus_core.settings import get_settings

logger = Logger()
# A batch whose every record failed is answered like any other (all records listed), not raised:
# the stream retries the same records either way, and the answer stays one shape.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def _service() -> MailService:
    """The mail service on this container's cached clients (building it costs no I/O)."""
    settings = get_settings()
    return MailService(
        SesMailer(clients.sesv2(), settings.sender_email),
        SqsDeadLetterQueue(clients.sqs(), settings.mail_dead_letter_queue_url),
    )


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Deliver every outbox message of a DynamoDB stream batch; report the ones to retry."""
    _apply_log_level()
    service = _service()

    def record_handler(record: DynamoDBRecord) -> None:
        raw: dict[str, Any] = record.raw_event
        image = (raw.get("dynamodb") or {}).get("NewImage")
        if raw.get("eventName") != "INSERT" or not image:
            logger.warning("ignoring a stream record that is not a new outbox item")
            return
        service.deliver(message_from_image(image))

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
    except Exception:  # SSM unavailable: keep the current level; mail still goes out
        return
    logger.setLevel(LEVELS[level])
