"""Lambda entry point of the mail function (the outbox table's stream): wiring only.

Batches go through :func:`nimbus_core.platform.stream_batch.process_batch`: the records whose delivery
raised are reported for the stream to retry. A message SES throttled (:class:`MessageDeferred`) stops
the batch: its record and every later one are reported untried, so the stream, which restarts at the
lowest one reported, sends them in order once SES takes mail again.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from mail_api.service import MailService, MessageDeferred
from nimbus_core.adapters import clients, snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.adapters.dead_letters import SqsDeadLetterQueue
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.mail import SesMailer
from nimbus_core.adapters.outbox import DynamoOutbox, message_from_image
from nimbus_core.domain.loglevels import apply_log_level
from nimbus_core.platform import clock
from nimbus_core.platform.settings import get_settings
from nimbus_core.platform.stream_batch import process_batch

logger = Logger()
snapstart.register_hooks()


class WaitingForEarlierMail(Exception):  # noqa: N818 - back-pressure, not a failure
    """An earlier record of the batch was deferred: this one is retried after it, never before."""


def _service() -> MailService:
    """The mail service on this container's cached clients (building it costs no I/O), waiting
    between SES attempts through the platform's clock (a test's recorder, when it hands one in)."""
    settings = get_settings()
    return MailService(
        SesMailer(clients.sesv2(), settings.sender_email),
        SqsDeadLetterQueue(clients.sqs(), settings.mail_dead_letter_queue_url),
        DynamoOutbox(clients.dynamodb(), settings.outbox_table),
        sleep=clock.sleep,
    )


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Deliver every outbox message of a DynamoDB stream batch; report the ones to retry."""
    _apply_log_level()
    service = _service()
    # No claim outlasts this invocation (nor, see MailService, one message's attempts).
    until = clock.now() + context.get_remaining_time_in_millis() / 1000
    deferred: list[str] = []  # the outbox id of the message SES throttled, once one was

    def record_handler(record: DynamoDBRecord) -> None:
        if deferred:
            raise WaitingForEarlierMail(deferred[0])
        raw: dict[str, Any] = record.raw_event
        image = (raw.get("dynamodb") or {}).get("NewImage")
        if raw.get("eventName") != "INSERT" or not image:
            logger.warning("ignoring a stream record that is not a new outbox item")
            return
        try:
            message = message_from_image(image)
        except (KeyError, ValueError, TypeError) as error:
            # No retry can read it: dead-letter it now, so the stream does not deliver it (and
            # every record after it in the batch) again and again.
            keys = from_item((raw.get("dynamodb") or {}).get("Keys") or {})
            service.dead_letter_unreadable(str(keys.get("id", "")), error, until=until)
            return
        try:
            service.deliver(message, until=until)
        except MessageDeferred:
            deferred.append(message.id)
            raise

    answer = process_batch(event, context, record_handler)
    if deferred:
        logger.warning(
            "SES is throttling: the stream retries the rest of the batch, in order",
            extra={"outbox_id": deferred[0], "records": len(answer["batchItemFailures"])},
        )
    return answer


def _apply_log_level() -> None:
    apply_log_level(logger, production_deps)  # SSM unavailable: the level stays, mail still goes out
