"""The tokens table: email verification and password recovery tokens and known devices, stored
under the hash of their secret (``VERIFY#<hash>``, ``RECOVER#<hash>``, ``DEVICE#<hash>``; TTL
removes them after ``exp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.challenges import challenge_key
from nimbus_core.adapters.counters import hit_on_record
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import Challenge, KnownDevice, RecoveryToken, User, VerificationToken
from nimbus_core.domain.ports import CounterState, WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


def _key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"VERIFY#{token_hash}"}}


def _recovery_key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"RECOVER#{token_hash}"}}


def _device_key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"DEVICE#{token_hash}"}}


# A recovery token that is still there and has taken fewer wrong answers than ``:max``.
_RECOVERY_USABLE = "attribute_exists(pk) AND (attribute_not_exists(attempts) OR attempts < :max)"


class DynamoTokens:
    """The :class:`nimbus_core.domain.token_ports.TokenStore` on the tokens table."""

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

    # ------------------------------------------------------------------ recovery tokens

    def get_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """The recovery token, its user and (when the request answers one) the second-factor
        challenge, in ONE BatchGetItem."""
        keys = [_recovery_key(token_hash)]
        if challenge_hash is not None:
            keys.append(challenge_key(challenge_hash))
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": keys, "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
            },
        )
        token = challenge = None
        for item in found.get(self._table, []):
            if item["pk"]["S"].startswith("RECOVER#"):
                token = read_record(RecoveryToken, item)
            else:
                challenge = read_record(Challenge, item)
        users = found.get(self._users_table, [])
        return token, read_record(User, users[0]) if users else None, challenge

    def put_recovery_op(self, token: RecoveryToken) -> WriteOp:
        """Store a new recovery token; TTL removes it after ``exp``."""
        item = record_item(token, pk=f"RECOVER#{token.hash}", kind="recovery", expiresAt=token.exp)
        put = {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        return TransactOp({"Put": put})

    def consume_recovery_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Spend a recovery token that must still exist with fewer than ``max_attempts`` wrong
        answers: INVALID_RECOVERY_TOKEN_ERROR if not (used by a reset that won, superseded, or
        voided by wrong answers counted meanwhile)."""
        delete = {
            "TableName": self._table,
            "Key": _recovery_key(token_hash),
            "ConditionExpression": _RECOVERY_USABLE,
            "ExpressionAttributeValues": {":max": {"N": str(max_attempts)}},
        }
        return TransactOp({"Delete": delete}, fails_with(ErrorCode.INVALID_RECOVERY_TOKEN_ERROR))

    def count_recovery_failure(self, token_hash: str, *, limit: int) -> int | None:
        """Count a wrong second-factor answer on a recovery token with fewer than ``limit`` (one
        conditional UpdateItem: concurrent answers never count past it); the count so far, or None
        when the token is gone or had ``limit`` already."""
        with aws_errors("UpdateItem (recovery attempts)"):
            try:
                result = self._client.update_item(
                    TableName=self._table,
                    Key=_recovery_key(token_hash),
                    UpdateExpression="ADD attempts :one",
                    ConditionExpression=_RECOVERY_USABLE,
                    ExpressionAttributeValues={":one": {"N": "1"}, ":max": {"N": str(limit)}},
                    ReturnValues="UPDATED_NEW",
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return None
                raise
        return int(result["Attributes"]["attempts"]["N"])

    def delete_recovery_op(self, token_hash: str) -> WriteOp:
        """Remove a recovery token if present (a newer request supersedes it)."""
        return TransactOp({"Delete": {"TableName": self._table, "Key": _recovery_key(token_hash)}})

    # ------------------------------------------------------------------ known devices

    def get_device(self, token_hash: str) -> KnownDevice | None:
        """A known device by the hash of its token (one strongly consistent GetItem)."""
        with aws_errors("GetItem (known device)"):
            item = self._client.get_item(
                TableName=self._table, Key=_device_key(token_hash), ConsistentRead=True
            ).get("Item")
        return read_record(KnownDevice, item) if item else None

    def put_device_op(self, device: KnownDevice) -> WriteOp:
        """Store a new known device; TTL removes it after ``exp``. Unconditional: its key is the
        hash of 256 fresh random bits, which no other item has."""
        item = record_item(device, pk=f"DEVICE#{device.hash}", kind="device", expiresAt=device.exp)
        return TransactOp({"Put": {"TableName": self._table, "Item": item}})

    def delete_device_op(self, token_hash: str) -> WriteOp:
        """Remove a known device if present (its holder signed in and got a new one)."""
        return TransactOp({"Delete": {"TableName": self._table, "Key": _device_key(token_hash)}})

    def count_device_failure(
        self, token_hash: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a wrong answer at login on the device's own item (one conditional UpdateItem, so
        concurrent failures never count past ``limit``); None when the device is gone."""
        key, attrs = _device_key(token_hash), ("failures", "failuresResetAt")
        return hit_on_record(self._client, self._table, key, attrs, limit=limit, window=window, now=now)
