"""The outbox table: emails written in the same transaction as the change that sends them.

The table's stream feeds the mail function, which sends each message through SES (CONTRACT
section 12). Items expire by TTL; the one-time token inside a verification link is the only secret
they hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core import clock, ids
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.mail_templates import Email
from nimbus_core.ports import WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

OUTBOX_TTL_SECONDS = 7 * 86400


class DynamoOutbox:
    """The :class:`nimbus_core.ports.Outbox` on the outbox table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def enqueue_op(self, email: Email, *, now: float, kind: str) -> WriteOp:
        """A transaction item that queues ``email``."""
        item = to_item(
            {
                "id": ids.new_id(),
                "kind": kind,
                "to": email.to,
                "subject": email.subject,
                "text": email.text,
                "html": email.html,
                "createdAt": clock.iso(now),
                "expiresAt": int(now) + OUTBOX_TTL_SECONDS,
            }
        )
        put = {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(id)"}
        return TransactOp({"Put": put})
