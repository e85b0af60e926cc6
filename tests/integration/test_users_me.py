"""GET /users/me: the User record, how tokens are accepted or refused, scopes and the usedAt refresh."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.items import from_item
from tests.integration.conftest import NOW, Api, Clock, Stack

NOW_ISO = "2027-01-15T08:00:00.250Z"
ISO_MS_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
USER_FIELDS = [
    "id",
    "username",
    "email",
    "staff",
    "domain",
    "subdomain",
    "verifiedAt",
    "bannedAt",
    "banReason",
    "twoFactorBackupCodeUsedAt",
    "createdAt",
    "updatedAt",
]
INVALID_SESSION = {"code": "INVALID_SESSION_ERROR", "message": "Invalid Session"}
INSUFFICIENT_PERMISSIONS = {"code": "INSUFFICIENT_PERMISSIONS_ERROR", "message": "Insufficient Permissions"}
ALL, ACCOUNT_READ, ACCOUNT_MODIFY, SESSION_READ = 1, 4, 8, 32


@pytest.fixture
def token(api: Api) -> str:
    """The session token of a freshly registered "Alice" <Alice@example.com>."""
    reply = api.register(username="Alice", email="Alice@example.com")
    assert reply.status == 201, reply.body
    value: str = reply.body["token"]
    return value


def ids(token: str) -> tuple[str, str]:
    user_id, session_id, _ = token.split(".")
    return user_id, session_id


def session_key(token: str) -> dict[str, Any]:
    user_id, session_id = ids(token)
    return {"userId": {"S": user_id}, "sessionId": {"S": session_id}}


def session_item(stack: Stack, token: str) -> dict[str, Any]:
    item = stack.dynamodb.get_item(TableName=stack.table("SessionsTable"), Key=session_key(token))["Item"]
    return from_item(item)


def update_session(stack: Stack, token: str, name: str, value: dict[str, Any]) -> None:
    stack.dynamodb.update_item(
        TableName=stack.table("SessionsTable"),
        Key=session_key(token),
        UpdateExpression="SET #n = :v",
        ExpressionAttributeNames={"#n": name},
        ExpressionAttributeValues={":v": value},
    )


def update_user(stack: Stack, token: str, name: str, value: dict[str, Any]) -> None:
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{ids(token)[0]}"}},
        UpdateExpression="SET #n = :v",
        ExpressionAttributeNames={"#n": name},
        ExpressionAttributeValues={":v": value},
    )


# ---------------------------------------------------------------- the record


def test_get_me_returns_exactly_the_user_fields_with_nulls_present(
    api: Api, frozen: Clock, token: str
) -> None:
    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 200, reply.body
    assert list(reply.body) == USER_FIELDS
    assert reply.body == {
        "id": ids(token)[0],
        "username": "Alice",
        "email": "Alice@example.com",
        "staff": False,
        "domain": "nimbus.test",
        "subdomain": None,
        "verifiedAt": None,
        "bannedAt": None,
        "banReason": None,
        "twoFactorBackupCodeUsedAt": None,
        "createdAt": NOW_ISO,
        "updatedAt": NOW_ISO,
    }


def test_get_me_shows_no_hash_or_secret(api: Api, stack: Stack, token: str) -> None:
    reply = api.call("GET", "/users/me", token=token)

    text = str(reply.body).lower()
    for secret in ("hash", "password", "$argon2", token.split(".")[2].lower()):
        assert secret not in text


def test_get_me_timestamps_are_iso_8601_utc_with_milliseconds(api: Api, stack: Stack, token: str) -> None:
    update_user(stack, token, "verifiedAt", {"S": "2027-02-01T10:11:12.345Z"})

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 200, reply.body
    for name in ("createdAt", "updatedAt", "verifiedAt"):
        assert ISO_MS_Z.fullmatch(reply.body[name]), (name, reply.body[name])
    assert reply.body["verifiedAt"] == "2027-02-01T10:11:12.345Z"


@pytest.mark.parametrize("scheme", ["Bearer ", "bearer ", "BEARER  "])
def test_get_me_accepts_the_bearer_scheme(api: Api, token: str, scheme: str) -> None:
    reply = api.call("GET", "/users/me", token=scheme + token)

    assert reply.status == 200, reply.body
    assert reply.body["id"] == ids(token)[0]


def test_get_me_resolves_the_token_in_one_dynamodb_round_trip(api: Api, token: str) -> None:
    calls: list[str] = []

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.rsplit(".", 1)[-1])

    events = clients.dynamodb().meta.events
    events.register("before-call.dynamodb", count)
    try:
        reply = api.call("GET", "/users/me", token=token)
    finally:
        events.unregister("before-call.dynamodb", count)

    assert reply.status == 200, reply.body
    assert calls == ["BatchGetItem"]


# ---------------------------------------------------------------- refused tokens


def test_get_me_without_a_valid_token_answers_401(api: Api, token: str, subtests: pytest.Subtests) -> None:
    user_id, session_id, secret = token.split(".")
    other = api.register(username="bob", ip="198.51.100.99").body["token"]
    other_user, other_session, other_secret = other.split(".")
    invalid = {
        "no header": None,
        "empty": "",
        "garbage": "garbage",
        "bearer only": "Bearer ",
        "two parts": f"{user_id}.{session_id}",
        "four parts": f"{token}.x",
        "wrong secret, same ids": f"{user_id}.{session_id}.{'A' * len(secret)}",
        "secret one character off": f"{user_id}.{session_id}.{secret[:-1]}{'BC'[secret[-1] == 'B']}",
        "another user's session id": f"{user_id}.{other_session}.{other_secret}",
        "another user's id": f"{other_user}.{session_id}.{secret}",
        "ids swapped": f"{session_id}.{user_id}.{secret}",
        "too long": token + "A" * 200,
    }
    for case, value in invalid.items():
        with subtests.test(case):
            reply = api.call("GET", "/users/me", token=value)

            assert reply.status == 401, reply.body
            assert reply.body == INVALID_SESSION


def test_a_revoked_session_is_refused_on_the_very_next_request(api: Api, stack: Stack, token: str) -> None:
    assert api.call("GET", "/users/me", token=token).status == 200

    stack.dynamodb.delete_item(TableName=stack.table("SessionsTable"), Key=session_key(token))
    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_SESSION


@pytest.mark.parametrize("offset", [0, -1, -86400])
def test_an_expired_session_is_refused_before_ttl_removes_it(
    api: Api, stack: Stack, frozen: Clock, token: str, offset: int
) -> None:
    update_session(stack, token, "exp", {"N": str(int(NOW) + offset)})

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_SESSION


def test_a_session_is_accepted_until_its_exp(api: Api, stack: Stack, frozen: Clock, token: str) -> None:
    update_session(stack, token, "exp", {"N": str(int(NOW) + 1)})

    assert api.call("GET", "/users/me", token=token).status == 200

    frozen.now = float(int(NOW) + 1)
    assert api.call("GET", "/users/me", token=token).status == 401


def test_a_banned_users_session_is_refused(api: Api, stack: Stack, token: str) -> None:
    assert api.call("GET", "/users/me", token=token).status == 200

    update_user(stack, token, "bannedAt", {"S": "2027-01-01T00:00:00.000Z"})
    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_SESSION


def test_a_deleted_users_session_is_refused(api: Api, stack: Stack, token: str) -> None:
    stack.dynamodb.delete_item(
        TableName=stack.table("UsersTable"), Key={"pk": {"S": f"USER#{ids(token)[0]}"}}
    )

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_SESSION


# ---------------------------------------------------------------- scoped sessions


@pytest.mark.parametrize(
    "flags",
    [ACCOUNT_READ, ALL, ACCOUNT_READ | SESSION_READ, ALL | SESSION_READ, ACCOUNT_READ | ACCOUNT_MODIFY],
)
def test_a_scoped_session_with_account_read_or_all_reads_the_account(
    api: Api, stack: Stack, token: str, flags: int
) -> None:
    update_session(stack, token, "permissionFlags", {"N": str(flags)})

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 200, reply.body
    assert reply.body["id"] == ids(token)[0]


@pytest.mark.parametrize("flags", [SESSION_READ, ACCOUNT_MODIFY, SESSION_READ | ACCOUNT_MODIFY | 2, 0])
def test_a_scoped_session_without_account_read_is_refused_with_403(
    api: Api, stack: Stack, token: str, flags: int
) -> None:
    update_session(stack, token, "permissionFlags", {"N": str(flags)})

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 403, reply.body
    assert reply.body == INSUFFICIENT_PERMISSIONS


# ---------------------------------------------------------------- usedAt


def test_used_at_is_not_rewritten_within_5_minutes_of_the_last_use(
    api: Api, stack: Stack, frozen: Clock, token: str
) -> None:
    before = session_item(stack, token)
    assert before["usedAt"] == NOW_ISO

    for elapsed in (0, 1, 120, 299.5):
        frozen.now = NOW + elapsed
        assert api.call("GET", "/users/me", token=token).status == 200
        assert session_item(stack, token) == before, elapsed


def test_used_at_is_refreshed_after_5_minutes_and_only_once(
    api: Api, stack: Stack, frozen: Clock, token: str
) -> None:
    before = session_item(stack, token)

    frozen.now = NOW + 301
    assert api.call("GET", "/users/me", token=token).status == 200

    after = session_item(stack, token)
    assert after == before | {"usedAt": "2027-01-15T08:05:01.250Z"}
    frozen.now = NOW + 400
    assert api.call("GET", "/users/me", token=token).status == 200
    assert session_item(stack, token) == after
    frozen.now = NOW + 602
    assert api.call("GET", "/users/me", token=token).status == 200
    assert session_item(stack, token)["usedAt"] == "2027-01-15T08:10:02.250Z"
