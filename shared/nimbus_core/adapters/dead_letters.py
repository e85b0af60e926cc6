"""The mail dead-letter queue (SQS): what is known about a message that could not be sent.

A dead letter names the outbox item and says why it failed; it never holds the email's body, link
or token. The operator tool lists these (``nimbus mail failed``) and replays them from the outbox
item while it has not expired (``nimbus mail retry``).

Lambda's own OnFailure destination writes to the same queue when a stream batch exhausts its
retries; those messages are invocation records (``DDBStreamBatchInfo``), not dead letters, and
:func:`dead_letter_from_body` returns None for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types_boto3_sqs import SQSClient

DEAD_LETTER_TYPE = "nimbus.mail.dead-letter"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message the mail function gave up on."""

    outbox_id: str
    to: str
    kind: str
    error: str
    attempts: int
    failed_at: str

    def to_body(self) -> str:
        """The SQS message body (JSON)."""
        return json.dumps(
            {
                "type": DEAD_LETTER_TYPE,
                "outboxId": self.outbox_id,
                "to": self.to,
                "kind": self.kind,
                "error": self.error,
                "attempts": self.attempts,
                "failedAt": self.failed_at,
            }
        )


def dead_letter_from_body(body: str) -> DeadLetter | None:
    """The dead letter in an SQS message body, or None if the body is something else."""
    try:
        values = json.loads(body)
    except ValueError:
        return None
    if not isinstance(values, dict) or values.get("type") != DEAD_LETTER_TYPE:
        return None
    try:
        return DeadLetter(
            outbox_id=str(values["outboxId"]),
            to=str(values["to"]),
            kind=str(values["kind"]),
            error=str(values["error"]),
            attempts=int(values["attempts"]),
            failed_at=str(values["failedAt"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


class SqsDeadLetterQueue:
    """The dead-letter queue at ``queue_url``, reached through ``client``."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def send(self, letter: DeadLetter) -> str:
        """Put ``letter`` on the queue; returns the SQS message id. Errors propagate."""
        if not self.queue_url:
            raise RuntimeError("no dead-letter queue configured (MAIL_DEAD_LETTER_QUEUE_URL)")
        result = self.client.send_message(QueueUrl=self.queue_url, MessageBody=letter.to_body())
        return result["MessageId"]
