"""Second-factor challenges and pending enrolments, on the one-time tokens table (keys
``CHALLENGE#<hash>`` and ``ENROL#<hash>``; TTL removes them after ``exp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import Challenge, PendingFactor, User
from nimbus_core.domain.ports import WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


def challenge_key(token_hash: str) -> dict[str, Any]:
    """The primary key of a second-factor challenge in the tokens table."""
    return {"pk": {"S": f"CHALLENGE#{token_hash}"}}


def _pending_key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"ENROL#{token_hash}"}}


class DynamoChallenges:
    """The :class:`nimbus_core.domain.token_ports.ChallengeStore` on the tokens table."""

    def __init__(self, client: DynamoDBClient, table: str, users_table: str) -> None:
        self._client = client
        self._table = table
        self._users_table = users_table

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[Challenge | None, User | None]:
        """The challenge and the user it names, in ONE BatchGetItem (strongly consistent)."""
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": [challenge_key(token_hash)], "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
            },
        )
        challenges, users = found.get(self._table, []), found.get(self._users_table, [])
        return (
            read_record(Challenge, challenges[0]) if challenges else None,
            read_record(User, users[0]) if users else None,
        )

    def put_op(self, challenge: Challenge) -> WriteOp:
        """Store a new challenge."""
        item = record_item(
            challenge, pk=f"CHALLENGE#{challenge.hash}", kind="challenge", expiresAt=challenge.exp
        )
        return TransactOp(
            {
                "Put": {
                    "TableName": self._table,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        )

    def consume_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Use a challenge up: it must still exist and be alive (single use, fewer than
        ``max_attempts`` wrong answers), else INVALID_SECOND_FACTOR_RESPONSE_ERROR."""
        delete = {
            "TableName": self._table,
            "Key": challenge_key(token_hash),
            "ConditionExpression": "attribute_exists(pk) AND attempts < :max",
            "ExpressionAttributeValues": {":max": {"N": str(max_attempts)}},
        }
        return TransactOp({"Delete": delete}, fails_with(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR))

    def count_failure(self, token_hash: str) -> int | None:
        """Count a wrong answer; the number so far, or None if the challenge is gone."""
        with aws_errors("UpdateItem (challenge attempts)"):
            try:
                result = self._client.update_item(
                    TableName=self._table,
                    Key=challenge_key(token_hash),
                    UpdateExpression="ADD attempts :one",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":one": {"N": "1"}},
                    ReturnValues="UPDATED_NEW",
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return None
                raise
        return int(result["Attributes"]["attempts"]["N"])

    def get_pending(self, token_hash: str) -> PendingFactor | None:
        """A pending enrolment (strongly consistent)."""
        with aws_errors("GetItem (pending factor)"):
            item = self._client.get_item(
                TableName=self._table, Key=_pending_key(token_hash), ConsistentRead=True
            ).get("Item")
        return read_record(PendingFactor, item) if item else None

    def put_pending_op(self, pending: PendingFactor) -> WriteOp:
        """Store a pending enrolment."""
        item = record_item(pending, pk=f"ENROL#{pending.hash}", kind="enrol", expiresAt=pending.exp)
        return TransactOp(
            {
                "Put": {
                    "TableName": self._table,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        )

    def consume_pending_op(self, token_hash: str) -> WriteOp:
        """Use a pending enrolment up (single use: INVALID_SECOND_FACTOR_RESPONSE_ERROR if gone)."""
        delete = {
            "TableName": self._table,
            "Key": _pending_key(token_hash),
            "ConditionExpression": "attribute_exists(pk)",
        }
        return TransactOp({"Delete": delete}, fails_with(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR))
