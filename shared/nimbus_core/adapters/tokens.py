"""The tokens table: every single-use secret (second-factor challenges ``CHALLENGE#<hash>``,
pending enrolments ``ENROL#<hash>``, email verification links ``VERIFY#<hash>``, recovery links
``RECOVER#<hash>``) and known devices (``DEVICE#<hash>``), each stored under the hash of its token;
TTL removes them after ``exp``. One adapter keeps every kind of secret the same way: a kind only
picks the key prefix and the record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.counters import hit_on_record
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.domain.models import Challenge, KnownDevice, RecoveryToken, User
from nimbus_core.domain.ports import CounterState, WriteOp
from nimbus_core.domain.secret_kinds import CHALLENGE, RECOVERY, SecretKind, SingleUseSecret

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

# The key prefix of each kind's items (their ``kind`` attribute is the kind's name).
_PREFIX: Final = {
    "challenge": "CHALLENGE#",
    "enrol": "ENROL#",
    "verify-email": "VERIFY#",
    "recovery": "RECOVER#",
}
_EXISTS = "attribute_exists(pk)"
# Still there, and fewer than ``:max`` wrong answers counted on it (an item without any has none).
_USABLE = "attribute_exists(pk) AND (attribute_not_exists(attempts) OR attempts < :max)"


def secret_key(kind: SecretKind[Any], token_hash: str) -> dict[str, Any]:
    """The primary key of a secret of ``kind`` in the tokens table."""
    return {"pk": {"S": f"{_PREFIX[kind.name]}{token_hash}"}}


def challenge_key(token_hash: str) -> dict[str, Any]:
    """The primary key of a second-factor challenge in the tokens table."""
    return secret_key(CHALLENGE, token_hash)


def _device_key(token_hash: str) -> dict[str, Any]:
    return {"pk": {"S": f"DEVICE#{token_hash}"}}


class DynamoTokens:
    """The :class:`nimbus_core.domain.token_ports.TokenStore` on the tokens table."""

    def __init__(self, client: DynamoDBClient, table: str, users_table: str) -> None:
        self._client = client
        self._table = table
        self._users_table = users_table

    # ------------------------------------------------------------------ single-use secrets

    def read[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> R | None:
        """The secret of ``kind`` under ``token_hash`` (one strongly consistent GetItem)."""
        with aws_errors(f"GetItem ({kind.name})"):
            item = self._client.get_item(
                TableName=self._table, Key=secret_key(kind, token_hash), ConsistentRead=True
            ).get("Item")
        return read_record(kind.record, item) if item else None

    def read_with_user[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, user_id: str
    ) -> tuple[R | None, User | None]:
        """The secret and the user it names, in ONE BatchGetItem (strongly consistent)."""
        found = self._read_with_user([secret_key(kind, token_hash)], user_id)
        secrets, users = found.get(self._table, []), found.get(self._users_table, [])
        return (
            read_record(kind.record, secrets[0]) if secrets else None,
            read_record(User, users[0]) if users else None,
        )

    def read_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """The recovery token, its user and (when the request answers one) the second-factor
        challenge, in ONE BatchGetItem."""
        keys = [secret_key(RECOVERY, token_hash)]
        if challenge_hash is not None:
            keys.append(challenge_key(challenge_hash))
        found = self._read_with_user(keys, user_id)
        token = challenge = None
        for item in found.get(self._table, []):
            if item["pk"]["S"].startswith(_PREFIX[RECOVERY.name]):
                token = read_record(RecoveryToken, item)
            else:
                challenge = read_record(Challenge, item)
        users = found.get(self._users_table, [])
        return token, read_record(User, users[0]) if users else None, challenge

    def _read_with_user(self, keys: list[dict[str, Any]], user_id: str) -> dict[str, list[dict[str, Any]]]:
        return batch_get(
            self._client,
            {
                self._table: {"Keys": keys, "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
            },
        )

    def put_op[R: SingleUseSecret](self, kind: SecretKind[R], secret: R) -> WriteOp:
        """Store a new secret; TTL removes it after ``exp``."""
        item = record_item(
            secret, pk=f"{_PREFIX[kind.name]}{secret.hash}", kind=kind.name, expiresAt=secret.exp
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

    def take_op[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, max_attempts: int | None = None
    ) -> WriteOp:
        """Use a secret up: it must still exist (with ``max_attempts``, with fewer wrong answers),
        else the transaction fails with ``kind.gone``."""
        delete: dict[str, Any] = {"TableName": self._table, "Key": secret_key(kind, token_hash)}
        if max_attempts is None:
            delete["ConditionExpression"] = _EXISTS
        else:
            delete["ConditionExpression"] = _USABLE
            delete["ExpressionAttributeValues"] = {":max": {"N": str(max_attempts)}}
        return TransactOp({"Delete": delete}, fails_with(kind.gone))

    def drop_op[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> WriteOp:
        """Remove a secret if present."""
        return TransactOp({"Delete": {"TableName": self._table, "Key": secret_key(kind, token_hash)}})

    def count_wrong_answer[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, limit: int | None = None
    ) -> int | None:
        """Count a wrong answer (one conditional UpdateItem, so with ``limit`` concurrent answers
        never count past it); the count so far, or None when the secret is gone (or at ``limit``)."""
        values = {":one": {"N": "1"}, **({":max": {"N": str(limit)}} if limit is not None else {})}
        with aws_errors(f"UpdateItem ({kind.name} attempts)"):
            try:
                result = self._client.update_item(
                    TableName=self._table,
                    Key=secret_key(kind, token_hash),
                    UpdateExpression="ADD attempts :one",
                    ConditionExpression=_EXISTS if limit is None else _USABLE,
                    ExpressionAttributeValues=values,
                    ReturnValues="UPDATED_NEW",
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return None
                raise
        return int(result["Attributes"]["attempts"]["N"])

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
