"""The one-time tokens table: email verification tokens, stored under the hash of their secret."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.errors import ErrorCode
from nimbus_core.models import User, VerificationToken
from nimbus_core.ports import WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


def _key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"VERIFY#{token_hash}"}}


class DynamoTokens:
    """The :class:`nimbus_core.ports.TokenStore` on the tokens table."""

    def __init__(self, client: DynamoDBClient, table: str, users_table: str) -> None:
        self._client = client
        self._table = table
        self._users_table = users_table

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[VerificationToken | None, User | None]:
        """The token and the user it names in ONE BatchGetItem."""
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": [_key(token_hash)], "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
            },
        )
        tokens = found.get(self._table, [])
        users = found.get(self._users_table, [])
        return (
            read_record(VerificationToken, tokens[0]) if tokens else None,
            read_record(User, users[0]) if users else None,
        )

    def put_op(self, token: VerificationToken) -> WriteOp:
        """Store a token bound to its user and address; TTL removes it after ``exp``."""
        item = record_item(token, pk=f"VERIFY#{token.hash}", kind="verify-email", expiresAt=token.exp)
        put = {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        return TransactOp({"Put": put})

    def consume_op(self, token_hash: str) -> WriteOp:
        """Remove a token that must still exist: a second use of the same token fails."""
        delete = {
            "TableName": self._table,
            "Key": _key(token_hash),
            "ConditionExpression": "attribute_exists(pk)",
        }
        return TransactOp({"Delete": delete}, fails_with(ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR))

    def delete_op(self, token_hash: str) -> WriteOp:
        """Remove a token if present."""
        return TransactOp({"Delete": {"TableName": self._table, "Key": _key(token_hash)}})
