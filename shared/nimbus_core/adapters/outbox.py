"""The email outbox: messages written in the same DynamoDB transaction as the change that sends them.

A request never calls SES (CONTRACT section 12). It adds :meth:`DynamoOutbox.enqueue_op` to its
``TransactWriteItems``, so the message exists exactly when the change does. The outbox table's
stream (NEW_IMAGE, INSERT events only) feeds the mail function, which reads each record with
:func:`message_from_image` and sends it. Items expire by TTL (``expiresAt``) after
:data:`OUTBOX_TTL_SECONDS`; until then an operator can replay a failed message by its id.

The item holds the rendered email, so it carries the one secret the email must carry (e.g. a
verification link) and nothing else.

Stream delivery is at least once (a retried batch re-delivers the records after a failed one; an
operator can replay a batch), so the item is also the mail function's ledger: it is claimed before
sending (``sendingUntil``, a short lease that never outlasts the invocation) and settled after
(``sentAt`` or ``deadLetteredAt``); a record whose item is settled, or gone (its user deleted), is
not sent again. These updates produce MODIFY records, which the mail function's filter drops.

The table also holds recovery requests (kind :data:`RECOVERY_REQUEST`): ``POST /users/recover``
stores the name asked with :meth:`DynamoOutbox.queue_recovery`, one PutItem whatever the name, and
the recovery function, fed the same stream (its filter takes this kind, the mail function's
excludes it), looks the account up and queues the mail in the transaction that removes the request
(:meth:`DynamoOutbox.recovery_done_op`). A request is not a message: it carries no address, only
the name as typed, and expires after :data:`RECOVERY_REQUEST_TTL_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.adapters.activity_items import event_values
from nimbus_core.adapters.batch import batch_delete
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import from_item, to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.domain.activity import ActivityEvent
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.models import Email, iso_to_epoch
from nimbus_core.domain.ports import RecoveryRequest, RecoveryRequestGoneError
from nimbus_core.platform import clock, ids

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

OUTBOX_TTL_SECONDS = 7 * 24 * 3600
# What a claim found: the item is now this sender's to send; already sent or dead-lettered; deleted
# (its user is gone, or its TTL passed); or claimed by an invocation still running.
Claim = Literal["claimed", "settled", "gone", "busy"]
Settlement = Literal["sentAt", "deadLetteredAt"]
USER_INDEX = "UserIndex"  # userId -> message ids (keys only): a deleted user's mail is found and removed
RECOVERY_REQUEST = "recover-request"  # the kind of a recovery request (no message)
# Long enough for the stream's retries; a request older than this is dropped unanswered.
RECOVERY_REQUEST_TTL_SECONDS = 3600
ACTIVITY = "activity"  # the kind of an item that carries an activity event and no message
# The kind of the item that holds when an account's last bounded notice was sent (the new sign-in
# notice: at most one an hour), keyed ``<kind>#<notice kind>#<user id>``; no message, and no stream
# consumer takes it (its first write is an INSERT: the mail function's filter leaves it out).
NOTICE_SENT = "sent-notice"
# The activity function moves an event within the stream's 24 hours, or not at all.
ACTIVITY_TTL_SECONDS = 24 * 3600


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """One outbox item: the email and what it is for."""

    id: str
    kind: str
    email: Email
    created_at: str
    expires_at: int
    user_id: str | None = None  # whom it is about: deleting the user deletes its stored messages
    event: ActivityEvent | None = None  # the activity event it records (a notice's), if any

    def expired(self, now: float) -> bool:
        """Whether the item's TTL has passed (DynamoDB deletes expired items lazily)."""
        return self.expires_at <= now


def message_to_values(message: OutboxMessage) -> dict[str, Any]:
    """The item's attributes as plain values."""
    return {
        "id": message.id,
        "kind": message.kind,
        "to": message.email.to,
        "subject": message.email.subject,
        "text": message.email.text,
        "html": message.email.html,
        "createdAt": message.created_at,
        "expiresAt": message.expires_at,
        **({"userId": message.user_id} if message.user_id else {}),
        **({"event": event_values(message.event)} if message.event else {}),
    }


def message_from_image(image: Mapping[str, Any]) -> OutboxMessage:
    """An outbox message from a stored item or a stream record's ``NewImage`` (attribute values).

    Raises KeyError or ValueError if the image is not an outbox item.
    """
    values = from_item(dict(image))
    return OutboxMessage(
        id=str(values["id"]),
        kind=str(values["kind"]),
        email=Email(
            to=str(values["to"]),
            subject=str(values["subject"]),
            text=str(values["text"]),
            html=str(values["html"]),
        ),
        created_at=str(values["createdAt"]),
        expires_at=int(values["expiresAt"]),
        user_id=str(values["userId"]) if values.get("userId") else None,
    )


def _event_item(event: ActivityEvent, now: float) -> dict[str, Any]:
    return {
        "id": event.id,
        "kind": ACTIVITY,
        "userId": event.user_id,
        "event": event_values(event),
        "createdAt": clock.iso(now),
        "expiresAt": int(now) + ACTIVITY_TTL_SECONDS,
    }


def recovery_request_from_image(image: Mapping[str, Any]) -> RecoveryRequest:
    """A recovery request from a stream record's ``NewImage``; KeyError or ValueError if the image
    is not one."""
    values = from_item(dict(image))
    if values.get("kind") != RECOVERY_REQUEST:
        raise ValueError(f"outbox item of kind {values.get('kind')!r} is not a recovery request")
    return RecoveryRequest(
        id=str(values["id"]),
        login_name=str(values["loginName"]),
        created_at=str(values["createdAt"]),
        expires_at=int(values["expiresAt"]),
    )


def _request_gone(_old: dict[str, Any] | None) -> Exception:
    return RecoveryRequestGoneError()


class DynamoOutbox:
    """The outbox table, reached through ``client``."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def new_message(
        self, email: Email, *, now: float, kind: str, user_id: str | None = None
    ) -> OutboxMessage:
        """A message with a fresh id, created ``now`` and expiring :data:`OUTBOX_TTL_SECONDS` later."""
        return OutboxMessage(
            id=ids.new_id(),
            kind=kind,
            email=email,
            created_at=clock.iso(now),
            expires_at=int(now) + OUTBOX_TTL_SECONDS,
            user_id=user_id,
        )

    def enqueue_op(
        self, email: Email, *, now: float, kind: str, user_id: str, event: ActivityEvent | None = None
    ) -> TransactOp:
        """A transaction item that puts ``email`` in the outbox (a new id, never overwriting),
        with the activity ``event`` it records."""
        message = replace(self.new_message(email, now=now, kind=kind, user_id=user_id), event=event)
        return self.put_op(message)

    def event_op(self, event: ActivityEvent, *, now: float) -> TransactOp:
        """A transaction item that puts an item carrying ``event`` (and no message)."""
        return TransactOp(
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": to_item(_event_item(event, now)),
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            }
        )

    def record_event(self, event: ActivityEvent, *, now: float) -> None:
        """Store an item carrying ``event`` (one PutItem), for a request that writes nothing else
        to carry it."""
        with aws_errors("PutItem (activity event)"):
            self.client.put_item(TableName=self.table_name, Item=to_item(_event_item(event, now)))

    def discard_for(self, user_id: str) -> int:
        """Delete the messages about ``user_id`` still stored: one Query of UserIndex (keys only)
        per MB, one BatchWriteItem per 25 messages."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": USER_INDEX,
            "KeyConditionExpression": "userId = :u",
            "ExpressionAttributeValues": {":u": {"S": user_id}},
        }
        keys: list[dict[str, Any]] = []
        while True:
            with aws_errors("Query (outbox UserIndex)"):
                result = self.client.query(**request)
            keys += [{"id": item["id"]} for item in result.get("Items", [])]
            if "LastEvaluatedKey" not in result:
                break
            request["ExclusiveStartKey"] = result["LastEvaluatedKey"]
        batch_delete(self.client, self.table_name, keys)
        return len(keys)

    def put_op(self, message: OutboxMessage) -> TransactOp:
        """A transaction item that puts ``message`` in the outbox."""
        return TransactOp(
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": to_item(message_to_values(message)),
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            }
        )

    def queue_recovery(self, login_name: str, *, now: float) -> RecoveryRequest:
        """Store a recovery request (one PutItem): the same write whatever ``login_name`` names."""
        request = RecoveryRequest(
            id=ids.new_id(),
            login_name=login_name,
            created_at=clock.iso(now),
            expires_at=int(now) + RECOVERY_REQUEST_TTL_SECONDS,
        )
        item = {
            "id": request.id,
            "kind": RECOVERY_REQUEST,
            "loginName": request.login_name,
            "createdAt": request.created_at,
            "expiresAt": request.expires_at,
        }
        with aws_errors("PutItem (recovery request)"):
            self.client.put_item(TableName=self.table_name, Item=to_item(item))
        return request

    def recovery_done_op(self, request_id: str) -> TransactOp:
        """A transaction item that removes the request while it is still stored (else
        :class:`RecoveryRequestGoneError`: another delivery of its record handled it)."""
        return TransactOp(
            {
                "Delete": {
                    "TableName": self.table_name,
                    "Key": {"id": {"S": request_id}},
                    "ConditionExpression": "attribute_exists(id)",
                }
            },
            _request_gone,
        )

    def claim(self, message_id: str, *, now: float, until: float) -> Claim:
        """Take the message for sending until ``until`` (epoch seconds), if it is still stored,
        not settled, and not held by an unexpired claim: one conditional UpdateItem."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"id": {"S": message_id}},
                UpdateExpression="SET sendingUntil = :until",
                ConditionExpression=(
                    "attribute_exists(id) AND attribute_not_exists(sentAt) "
                    "AND attribute_not_exists(deadLetteredAt) "
                    "AND (attribute_not_exists(sendingUntil) OR sendingUntil < :now)"
                ),
                ExpressionAttributeValues={":until": {"N": str(int(until))}, ":now": {"N": str(int(now))}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise DependencyError(f"UpdateItem (outbox claim) failed: {exc}") from exc
            found = exc.response.get("Item")
            item = found if isinstance(found, dict) else {}
            if not item:
                return "gone"
            return "settled" if "sentAt" in item or "deadLetteredAt" in item else "busy"
        except BotoCoreError as exc:
            raise DependencyError(f"UpdateItem (outbox claim) failed: {exc}") from exc
        return "claimed"

    def admit(self, message: OutboxMessage, *, interval: int) -> bool:
        """Whether ``message`` (a notice sent at most once per ``interval`` seconds per account) may
        be sent: no such notice of its user was admitted within ``interval`` seconds before its
        creation, or this very message was (a record delivered again). One conditional UpdateItem
        records it, so concurrent deliveries admit one notice per interval and no more. The time
        is the message's, never the delivery's: a late or repeated delivery decides the same."""
        created = int(iso_to_epoch(message.created_at))
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"id": {"S": f"{NOTICE_SENT}#{message.kind}#{message.user_id}"}},
                UpdateExpression=(
                    "SET kind = :kind, userId = :user, messageId = :id, sentFor = :at, expiresAt = :exp"
                ),
                ConditionExpression="attribute_not_exists(id) OR messageId = :id OR sentFor <= :since",
                ExpressionAttributeValues={
                    ":kind": {"S": NOTICE_SENT},
                    ":user": {"S": message.user_id or ""},
                    ":id": {"S": message.id},
                    ":at": {"N": str(created)},
                    ":since": {"N": str(created - interval)},
                    # Kept past the interval (TTL deletes lazily; the condition reads sentFor).
                    ":exp": {"N": str(created + 2 * interval)},
                },
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise DependencyError(f"UpdateItem (outbox notice bound) failed: {exc}") from exc
            return False
        except BotoCoreError as exc:
            raise DependencyError(f"UpdateItem (outbox notice bound) failed: {exc}") from exc
        return True

    def release(self, message_id: str) -> None:
        """Give up the claim (this delivery failed and its record will be retried)."""
        self._update_if_stored("release", message_id, {"UpdateExpression": "REMOVE sendingUntil"})

    def settle(self, message_id: str, outcome: Settlement, *, now: float) -> None:
        """Record that the message was sent or dead-lettered (it stays until its TTL, settled); a
        message deleted meanwhile (its user is gone) is left gone."""
        self._update_if_stored(
            "settle",
            message_id,
            {
                "UpdateExpression": "SET #outcome = :now REMOVE sendingUntil",
                "ExpressionAttributeNames": {"#outcome": outcome},
                "ExpressionAttributeValues": {":now": {"S": clock.iso(now)}},
            },
        )

    def _update_if_stored(self, what: str, message_id: str, update: dict[str, Any]) -> None:
        """One UpdateItem of a message that may have been deleted meanwhile (then: nothing)."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"id": {"S": message_id}},
                ConditionExpression="attribute_exists(id)",
                **update,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise DependencyError(f"UpdateItem (outbox {what}) failed: {exc}") from exc
        except BotoCoreError as exc:
            raise DependencyError(f"UpdateItem (outbox {what}) failed: {exc}") from exc

    def get(self, message_id: str) -> OutboxMessage | None:
        """The message with ``message_id`` (strongly consistent), or None if it is gone."""
        item = self.client.get_item(
            TableName=self.table_name, Key={"id": {"S": message_id}}, ConsistentRead=True
        ).get("Item")
        return message_from_image(item) if item else None
