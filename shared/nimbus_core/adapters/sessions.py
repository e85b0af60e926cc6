"""The sessions table (``userId`` + ``sessionId``), and the one-round-trip session+user fetch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.batch import batch_delete, batch_get
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.errors import ErrorCode
from nimbus_core.models import Session, User
from nimbus_core.ports import WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


def session_key(user_id: str, session_id: str) -> dict[str, Any]:
    """The primary key of a session item."""
    return {"userId": {"S": user_id}, "sessionId": {"S": session_id}}


def session_item(session: Session) -> dict[str, Any]:
    """The stored form of a session; ``expiresAt`` lets DynamoDB TTL remove it after ``exp``."""
    return record_item(session, exclude=frozenset({"id"}), sessionId=session.id, expiresAt=session.exp)


def _read_session(item: dict[str, Any]) -> Session:
    return read_record(Session, {**item, "id": item["sessionId"]})


class DynamoSessions:
    """The :class:`nimbus_core.ports.SessionStore` on the sessions table."""

    def __init__(self, client: DynamoDBClient, table: str, users_table: str) -> None:
        self._client = client
        self._table = table
        self._users_table = users_table

    def get_with_user(self, user_id: str, session_id: str) -> tuple[Session | None, User | None]:
        """The session and its user in ONE BatchGetItem (strongly consistent, so a revocation or a
        ban is seen by the very next request)."""
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": [session_key(user_id, session_id)], "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
            },
        )
        sessions = found.get(self._table, [])
        users = found.get(self._users_table, [])
        return (
            _read_session(sessions[0]) if sessions else None,
            read_record(User, users[0]) if users else None,
        )

    def put_op(self, session: Session) -> WriteOp:
        """Store a new session (ids never repeat, so an existing one is a bug, not a user error)."""
        return TransactOp(
            {
                "Put": {
                    "TableName": self._table,
                    "Item": session_item(session),
                    "ConditionExpression": "attribute_not_exists(sessionId)",
                }
            }
        )

    def replace_op(self, session: Session) -> WriteOp:
        """Overwrite a session that must still exist (revoked meanwhile: INVALID_SESSION_ERROR)."""
        return TransactOp(
            {
                "Put": {
                    "TableName": self._table,
                    "Item": session_item(session),
                    "ConditionExpression": "attribute_exists(sessionId)",
                }
            },
            fails_with(ErrorCode.INVALID_SESSION_ERROR),
        )

    def delete_op(self, user_id: str, session_id: str) -> WriteOp:
        """Remove a session (idempotent)."""
        return TransactOp({"Delete": {"TableName": self._table, "Key": session_key(user_id, session_id)}})

    def touch(self, session: Session, used_at: str) -> None:
        """Record use of a session (the caller limits this to once per 5 minutes)."""
        with aws_errors("UpdateItem (session usedAt)"):
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=session_key(session.user_id, session.id),
                    UpdateExpression="SET usedAt = :u",
                    ConditionExpression="attribute_exists(sessionId)",
                    ExpressionAttributeValues={":u": {"S": used_at}},
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise  # a session revoked meanwhile needs no usedAt

    def list_ids(self, user_id: str) -> list[str]:
        """Every stored session id of a user: a Query on the user's partition, keys only, paged."""
        ids: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "userId = :u",
                "ExpressionAttributeValues": {":u": {"S": user_id}},
                "ProjectionExpression": "sessionId",
                "ConsistentRead": True,
            }
            if start:
                request["ExclusiveStartKey"] = start
            with aws_errors("Query (sessions)"):
                page = self._client.query(**request)
            ids += [item["sessionId"]["S"] for item in page.get("Items", [])]
            start = page.get("LastEvaluatedKey")
            if not start:
                return ids

    def delete_many(self, user_id: str, session_ids: Iterable[str]) -> None:
        """Remove sessions in batches of 25 (idempotent, safe to retry after a fault)."""
        batch_delete(self._client, self._table, (session_key(user_id, sid) for sid in session_ids))
