"""The sessions table (``userId`` + ``sessionId``), and the one-round-trip session+user fetch."""

from __future__ import annotations

import time
from typing import Any

from nimbus_core.adapters.clients import dynamodb
from nimbus_core.adapters.items import from_item, to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.adapters.users import user_from_item, user_key
from nimbus_core.models import Session, User
from nimbus_core.settings import get_settings


def session_key(user_id: str, session_id: str) -> dict[str, Any]:
    """The primary key of a session item."""
    return {"userId": {"S": user_id}, "sessionId": {"S": session_id}}


def session_to_item(session: Session) -> dict[str, Any]:
    """The stored form of a session; ``expiresAt`` lets DynamoDB TTL remove it after ``exp``."""
    return to_item(
        {
            "userId": session.user_id,
            "sessionId": session.id,
            "secretHash": session.secret_hash,
            "name": session.name,
            "permissionFlags": session.permission_flags,
            "exp": session.exp,
            "expiresAt": session.exp,
            "usedAt": session.used_at,
            "createdAt": session.created_at,
            "updatedAt": session.updated_at,
        }
    )


def session_from_item(item: dict[str, Any]) -> Session:
    """A session from its stored form."""
    v = from_item(item)
    return Session(
        user_id=v["userId"],
        id=v["sessionId"],
        secret_hash=v["secretHash"],
        name=v["name"],
        exp=int(v["exp"]),
        created_at=v["createdAt"],
        updated_at=v["updatedAt"],
        used_at=v["usedAt"],
        permission_flags=v.get("permissionFlags"),
    )


def put_session_op(session: Session) -> TransactOp:
    """A transaction item that stores a new session."""
    return TransactOp(
        {
            "Put": {
                "TableName": get_settings().sessions_table,
                "Item": session_to_item(session),
                "ConditionExpression": "attribute_not_exists(sessionId)",
            }
        }
    )


def delete_session_op(session: Session) -> TransactOp:
    """A transaction item that removes a session."""
    return TransactOp(
        {
            "Delete": {
                "TableName": get_settings().sessions_table,
                "Key": session_key(session.user_id, session.id),
            }
        }
    )


def get_session_and_user(user_id: str, session_id: str) -> tuple[Session | None, User | None]:
    """The session and its user in ONE BatchGetItem (strongly consistent, so a revocation or ban is
    seen by the very next request)."""
    settings = get_settings()
    request: dict[str, Any] = {
        settings.sessions_table: {"Keys": [session_key(user_id, session_id)], "ConsistentRead": True},
        settings.users_table: {"Keys": [user_key(user_id)], "ConsistentRead": True},
    }
    found: dict[str, list[dict[str, Any]]] = {}
    for attempt in range(4):
        result = dynamodb().batch_get_item(RequestItems=request)
        for table, items in result.get("Responses", {}).items():
            found.setdefault(table, []).extend(items)
        request = dict(result.get("UnprocessedKeys") or {})
        if not request:
            break
        time.sleep(0.02 * 2**attempt)  # unprocessed keys mean throttling: back off briefly
    else:
        raise RuntimeError("BatchGetItem left keys unprocessed")
    sessions = found.get(settings.sessions_table, [])
    users = found.get(settings.users_table, [])
    return (
        session_from_item(sessions[0]) if sessions else None,
        user_from_item(users[0]) if users else None,
    )


def touch_session(session: Session, used_at: str) -> None:
    """Record use of a session (the caller limits this to once per 5 minutes)."""
    dynamodb().update_item(
        TableName=get_settings().sessions_table,
        Key=session_key(session.user_id, session.id),
        UpdateExpression="SET usedAt = :u",
        ConditionExpression="attribute_exists(sessionId)",
        ExpressionAttributeValues={":u": {"S": used_at}},
    )
