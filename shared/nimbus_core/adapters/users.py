"""The users table: user items (``USER#<id>``) and their uniqueness claims (``USERNAME#``/``EMAIL#``)."""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.clients import dynamodb
from nimbus_core.adapters.counters import CounterSpec
from nimbus_core.adapters.items import from_item, to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.models import User
from nimbus_core.settings import get_settings


def user_key(user_id: str) -> dict[str, Any]:
    """The primary key of a user item."""
    return {"pk": {"S": f"USER#{user_id}"}}


def username_key(username: str) -> str:
    """The case-insensitive uniqueness key of a username."""
    return username.lower()


def email_key(email: str) -> str:
    """The case-insensitive uniqueness key of an (already normalised) email address."""
    return email.lower()


def user_to_item(user: User) -> dict[str, Any]:
    """The stored form of a user."""
    return to_item(
        {
            "pk": f"USER#{user.id}",
            "id": user.id,
            "username": user.username,
            "usernameKey": username_key(user.username),
            "email": user.email,
            "emailKey": email_key(user.email),
            "passwordHash": user.password_hash,
            "staff": user.staff,
            "domain": user.domain,
            "subdomain": user.subdomain,
            "verifiedAt": user.verified_at,
            "bannedAt": user.banned_at,
            "banReason": user.ban_reason,
            "twoFactorBackupCodeUsedAt": user.two_factor_backup_code_used_at,
            "secondFactorCount": user.second_factor_count,
            "createdAt": user.created_at,
            "updatedAt": user.updated_at,
        }
    )


def user_from_item(item: dict[str, Any]) -> User:
    """A user from its stored form (low-level attribute values)."""
    v = from_item(item)
    return User(
        id=v["id"],
        username=v["username"],
        email=v["email"],
        password_hash=v["passwordHash"],
        created_at=v["createdAt"],
        updated_at=v["updatedAt"],
        domain=v["domain"],
        subdomain=v.get("subdomain"),
        staff=bool(v.get("staff", False)),
        verified_at=v.get("verifiedAt"),
        banned_at=v.get("bannedAt"),
        ban_reason=v.get("banReason"),
        two_factor_backup_code_used_at=v.get("twoFactorBackupCodeUsedAt"),
        second_factor_count=int(v.get("secondFactorCount", 0)),
        auth_failures=int(v.get("authFailures", 0)),
        auth_failures_reset_at=int(v.get("authFailuresResetAt", 0)),
    )


def get_user(user_id: str) -> User | None:
    """A user by id (strongly consistent), or None."""
    result = dynamodb().get_item(
        TableName=get_settings().users_table, Key=user_key(user_id), ConsistentRead=True
    )
    item = result.get("Item")
    return user_from_item(item) if item else None


def find_by_login(identifier: str, *, by_email: bool) -> User | None:
    """A user by username or email, case-insensitively, in one round trip on the common path.

    The index is eventually consistent, so a miss falls back to the claim item (strongly
    consistent): a user who registered a moment ago can log in at once.
    """
    table = get_settings().users_table
    index, attr, prefix = (
        ("EmailIndex", "emailKey", "EMAIL#") if by_email else ("UsernameIndex", "usernameKey", "USERNAME#")
    )
    key = email_key(identifier) if by_email else username_key(identifier)
    result = dynamodb().query(
        TableName=table,
        IndexName=index,
        KeyConditionExpression="#k = :k",
        ExpressionAttributeNames={"#k": attr},
        ExpressionAttributeValues={":k": {"S": key}},
        Limit=2,
    )
    items = result.get("Items", [])
    if len(items) == 1:
        return user_from_item(items[0])
    claim = (
        dynamodb().get_item(TableName=table, Key={"pk": {"S": prefix + key}}, ConsistentRead=True).get("Item")
    )
    if not claim:
        return None
    return get_user(claim["userId"]["S"])


def create_user_ops(user: User) -> list[TransactOp]:
    """Transaction items that create ``user`` with its username and email claims.

    A claim that already exists cancels the whole transaction with USER_EXISTS_ERROR, which is how
    uniqueness holds under concurrency (never read-then-write).
    """
    table = get_settings().users_table
    exists = NimbusError(ErrorCode.USER_EXISTS_ERROR)
    not_exists = "attribute_not_exists(pk)"

    def claim(pk: str) -> TransactOp:
        item = to_item({"pk": pk, "userId": user.id, "createdAt": user.created_at})
        return TransactOp(
            {"Put": {"TableName": table, "Item": item, "ConditionExpression": not_exists}}, exists
        )

    return [
        TransactOp(
            {"Put": {"TableName": table, "Item": user_to_item(user), "ConditionExpression": not_exists}}
        ),
        claim(f"USERNAME#{username_key(user.username)}"),
        claim(f"EMAIL#{email_key(user.email)}"),
    ]


def delete_user_ops(user: User) -> list[TransactOp]:
    """Transaction items that remove a user and both claims (used to undo a failed registration)."""
    table = get_settings().users_table
    return [
        TransactOp({"Delete": {"TableName": table, "Key": user_key(user.id)}}),
        TransactOp(
            {"Delete": {"TableName": table, "Key": {"pk": {"S": f"USERNAME#{username_key(user.username)}"}}}}
        ),
        TransactOp({"Delete": {"TableName": table, "Key": {"pk": {"S": f"EMAIL#{email_key(user.email)}"}}}}),
    ]


def unchanged_credentials_op(
    user: User, *, new_password_hash: str | None, now: float, failure_limit: int
) -> TransactOp:
    """A transaction item asserting that ``user`` still has the password hash we verified, is not
    banned and is not locked by failed answers; with ``new_password_hash`` it also stores a
    rehashed password in the same step.

    Login's session write rides on this, so a password change or a ban that lands between reading the
    user and writing the session can never produce a session.
    """
    table = get_settings().users_table
    condition = (
        "passwordHash = :verified AND attribute_not_exists(bannedAt) AND "
        "(attribute_not_exists(authFailures) OR authFailures < :limit OR authFailuresResetAt <= :now)"
    )
    values: dict[str, Any] = {
        ":verified": {"S": user.password_hash},
        ":limit": {"N": str(failure_limit)},
        ":now": {"N": str(int(now))},
    }
    refused = NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
    if new_password_hash is None:
        op = {
            "ConditionCheck": {
                "TableName": table,
                "Key": user_key(user.id),
                "ConditionExpression": condition,
                "ExpressionAttributeValues": values,
            }
        }
        return TransactOp(op, refused)
    values[":new"] = {"S": new_password_hash}
    op = {
        "Update": {
            "TableName": table,
            "Key": user_key(user.id),
            "UpdateExpression": "SET passwordHash = :new",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
    }
    return TransactOp(op, refused)


def auth_failure_counter(user_id: str) -> CounterSpec:
    """The per-account counter of failed password / second-factor answers, kept on the user item so
    that reading it costs nothing extra at login."""
    return CounterSpec(
        table=get_settings().users_table,
        key=user_key(user_id),
        count_attr="authFailures",
        reset_attr="authFailuresResetAt",
        ttl_attr=None,
        must_exist=True,
    )
