"""The sessions table (``userId`` + ``sessionId``), and the one-round-trip session+user fetch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.batch import batch_delete, batch_get, batch_put
from nimbus_core.adapters.counters import hit_on_record
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.adapters.tokens import challenge_key
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.users import user_key
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import Challenge, Session, User
from nimbus_core.domain.ports import CounterState, WriteOp
from nimbus_core.platform.ids import session_order

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


def session_key(user_id: str, session_id: str) -> dict[str, Any]:
    """The primary key of a session item."""
    return {"userId": {"S": user_id}, "sessionId": {"S": session_id}}


# A session that never failed a reverification stores no count (absent attributes read as 0).
_NO_FAILURES = frozenset({"id", "reverify_failures", "reverify_failures_reset_at"})


def session_item(session: Session) -> dict[str, Any]:
    """The stored form of a session; ``expiresAt`` lets DynamoDB TTL remove it after ``exp``."""
    counted = session.reverify_failures or session.reverify_failures_reset_at
    exclude = frozenset({"id"}) if counted else _NO_FAILURES
    return record_item(session, exclude=exclude, sessionId=session.id, expiresAt=session.exp)


# A session is live while it has its user's current generation and has not expired.
_LIVE = "attribute_exists(sessionId) AND generation = :g AND expiresAt > :now"


def _live_filter(generation: int, now: float) -> dict[str, Any]:
    return {
        "FilterExpression": "generation = :g AND expiresAt > :now",
        "ExpressionAttributeValues": {":g": {"N": str(generation)}, ":now": {"N": str(int(now))}},
    }


def _read_session(item: dict[str, Any]) -> Session:
    return read_record(Session, {**item, "id": item["sessionId"]})


class DynamoSessions:
    """The :class:`nimbus_core.domain.user_ports.SessionStore` on the sessions table."""

    def __init__(self, client: DynamoDBClient, table: str, users_table: str, tokens_table: str) -> None:
        self._client = client
        self._table = table
        self._users_table = users_table
        self._tokens_table = tokens_table

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

    def get_with_users(
        self, user_id: str, session_id: str, other_user_id: str
    ) -> tuple[Session | None, User | None, User | None]:
        """The session, its user and another user (a staff endpoint's target) in ONE BatchGetItem."""
        if other_user_id == user_id:
            session, user = self.get_with_user(user_id, session_id)
            return session, user, user
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": [session_key(user_id, session_id)], "ConsistentRead": True},
                self._users_table: {
                    "Keys": [user_key(user_id), user_key(other_user_id)],
                    "ConsistentRead": True,
                },
            },
        )
        sessions = found.get(self._table, [])
        users = {u.id: u for u in (read_record(User, item) for item in found.get(self._users_table, []))}
        return (
            _read_session(sessions[0]) if sessions else None,
            users.get(user_id),
            users.get(other_user_id),
        )

    def get_with_challenge(
        self, user_id: str, session_id: str, other_user_id: str | None, challenge_hash: str
    ) -> tuple[Session | None, User | None, User | None, Challenge | None]:
        """The session, its user, another user and a second-factor challenge in ONE BatchGetItem."""
        user_ids = list(dict.fromkeys(u for u in (user_id, other_user_id) if u is not None))
        found = batch_get(
            self._client,
            {
                self._table: {"Keys": [session_key(user_id, session_id)], "ConsistentRead": True},
                self._users_table: {"Keys": [user_key(u) for u in user_ids], "ConsistentRead": True},
                self._tokens_table: {"Keys": [challenge_key(challenge_hash)], "ConsistentRead": True},
            },
        )
        sessions, challenges = found.get(self._table, []), found.get(self._tokens_table, [])
        users = {u.id: u for u in (read_record(User, item) for item in found.get(self._users_table, []))}
        return (
            _read_session(sessions[0]) if sessions else None,
            users.get(user_id),
            users.get(other_user_id) if other_user_id is not None else None,
            read_record(Challenge, challenges[0]) if challenges else None,
        )

    def import_new_sessions(self, sessions: Iterable[Session]) -> None:
        """Store the sessions of an account imported from upstream this moment, in batches of 25:
        the account was just created, so none of them can exist yet (session ids are per user)."""
        batch_put(self._client, self._table, [session_item(s) for s in sessions])

    def import_session(self, session: Session) -> bool:
        """Store a session imported from upstream unless it is stored already; True if it was new."""
        with aws_errors("PutItem (imported session)"):
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=session_item(session),
                    ConditionExpression="attribute_not_exists(sessionId)",
                )
            except ClientError as error:
                if error_code(error) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def count_reverify_failure(
        self, user_id: str, session_id: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a failed reverification on the session item itself (one conditional UpdateItem),
        so reading the count costs nothing: the authentication read brings it."""
        key = session_key(user_id, session_id)
        attrs = ("reverifyFailures", "reverifyFailuresResetAt")  # its own expiresAt stays as it is
        return hit_on_record(self._client, self._table, key, attrs, limit=limit, window=window, now=now)

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

    def move_to_generation_op(self, session: Session, generation: int) -> WriteOp:
        """Move a session that must still exist (revoked meanwhile: INVALID_SESSION_ERROR) to
        ``generation``: one attribute set, so what was counted on it since its read stays."""
        return TransactOp(
            {
                "Update": {
                    "TableName": self._table,
                    "Key": session_key(session.user_id, session.id),
                    "UpdateExpression": "SET generation = :g",
                    "ConditionExpression": "attribute_exists(sessionId)",
                    "ExpressionAttributeValues": {":g": {"N": str(generation)}},
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

    def get(self, user_id: str, session_id: str) -> Session | None:
        """One stored session (strongly consistent), live or not."""
        with aws_errors("GetItem (session)"):
            item = self._client.get_item(
                TableName=self._table, Key=session_key(user_id, session_id), ConsistentRead=True
            ).get("Item")
        return _read_session(item) if item else None

    def get_many(self, user_id: str, session_ids: Iterable[str]) -> list[Session]:
        """The stored sessions among ``session_ids`` (at most 100), in one BatchGetItem."""
        keys = [session_key(user_id, sid) for sid in dict.fromkeys(session_ids)]
        if not keys:
            return []
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        return [_read_session(item) for item in found.get(self._table, [])]

    def live_page(
        self, user_id: str, *, generation: int, now: float, limit: int, offset: int
    ) -> tuple[int, list[Session]]:
        """How many live sessions the user has (current generation, unexpired) and one page of
        them, newest first.

        One Query on the user's partition, filtered in DynamoDB; a further page only per MB of
        stored sessions (some thousands). The items are put newest first by
        :func:`nimbus_core.platform.ids.session_order` (our ids are time-ordered, but an imported upstream
        session's decimal id sorts elsewhere by its digits). Only the page's items are turned into
        records.
        """
        items = self._query(user_id, **_live_filter(generation, now))
        items.sort(key=lambda item: session_order(item["sessionId"]["S"]), reverse=True)
        return len(items), [_read_session(item) for item in items[offset : offset + limit]]

    def count_live(self, user_id: str, *, generation: int, now: float) -> int:
        """How many live sessions the user has: a COUNT Query (no items travel back)."""
        total = 0
        start: dict[str, Any] | None = None
        request = self._query_request(user_id, Select="COUNT", **_live_filter(generation, now))
        while True:
            if start:
                request["ExclusiveStartKey"] = start
            with aws_errors("Query (count sessions)"):
                page = self._client.query(**request)
            total += page.get("Count", 0)
            start = page.get("LastEvaluatedKey")
            if not start:
                return total

    def list_ids(self, user_id: str, *, below_generation: int | None = None) -> list[str]:
        """Stored session ids of a user (all, or only those older than ``below_generation``): a Query
        on the user's partition, keys only, paged."""
        extra: dict[str, Any] = {"ProjectionExpression": "sessionId"}
        if below_generation is not None:
            # Sessions stored before generations existed have none: they count as generation 0.
            extra["FilterExpression"] = "attribute_not_exists(generation) OR generation < :g"
            extra["ExpressionAttributeValues"] = {":g": {"N": str(below_generation)}}
        return [item["sessionId"]["S"] for item in self._query(user_id, **extra)]

    def rename(
        self, user_id: str, session_id: str, name: str, updated_at: str, *, generation: int, now: float
    ) -> Session | None:
        """Rename a session that is still live (``generation``, unexpired); None if it is not."""
        with aws_errors("UpdateItem (session name)"):
            try:
                result = self._client.update_item(
                    TableName=self._table,
                    Key=session_key(user_id, session_id),
                    UpdateExpression="SET #n = :n, updatedAt = :t",
                    ConditionExpression=_LIVE,
                    ExpressionAttributeNames={"#n": "name"},
                    ExpressionAttributeValues={
                        ":n": {"S": name},
                        ":t": {"S": updated_at},
                        ":g": {"N": str(generation)},
                        ":now": {"N": str(int(now))},
                    },
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return None
                raise
        return _read_session(result["Attributes"])

    def delete_live(self, user_id: str, session_id: str, *, generation: int, now: float) -> bool:
        """Delete a session if it is live; False (nothing deleted) if it is unknown, revoked or expired."""
        with aws_errors("DeleteItem (session)"):
            try:
                self._client.delete_item(
                    TableName=self._table,
                    Key=session_key(user_id, session_id),
                    ConditionExpression=_LIVE,
                    ExpressionAttributeValues={":g": {"N": str(generation)}, ":now": {"N": str(int(now))}},
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def _query_request(self, user_id: str, **extra: Any) -> dict[str, Any]:
        values = {":u": {"S": user_id}, **extra.pop("ExpressionAttributeValues", {})}
        return {
            "TableName": self._table,
            "KeyConditionExpression": "userId = :u",
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            **extra,
        }

    def _query(self, user_id: str, **extra: Any) -> list[dict[str, Any]]:
        request = self._query_request(user_id, **extra)
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            if start:
                request["ExclusiveStartKey"] = start
            with aws_errors("Query (sessions)"):
                page = self._client.query(**request)
            items += page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return items

    def delete_many(self, user_id: str, session_ids: Iterable[str]) -> None:
        """Remove sessions in batches of 25 (idempotent, safe to retry after a fault)."""
        batch_delete(self._client, self._table, (session_key(user_id, sid) for sid in session_ids))
