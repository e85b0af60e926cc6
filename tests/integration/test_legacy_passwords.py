"""Imported bcrypt hashes (CONTRACT section 15) through the handlers on moto: the password an
account had upstream logs in and reverifies, and the first request that proves it replaces the
bcrypt hash by argon2id in that request's own write (also when a second factor is asked next); a
wrong password is refused and counted as any other."""

from __future__ import annotations

from typing import Any

import bcrypt
import pytest

from nimbus_core.adapters.items import from_item
from nimbus_core.sessions import passwords
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_second_factor_challenge import enrol_totp, totp_now
from tests.integration.test_user_races import before_next_transaction

PASSWORD = "correct horse"
# The cost upstream used is 15 (seconds of CPU); the rules are the same at the smallest cost.
COST = 4


def _user(stack: Stack, user_id: str) -> dict[str, Any]:
    item = stack.dynamodb.get_item(
        TableName=stack.table("UsersTable"), Key={"pk": {"S": f"USER#{user_id}"}}, ConsistentRead=True
    )["Item"]
    return dict(from_item(item))


def _imported(api: Api, stack: Stack, name: str = "alice", password: str = PASSWORD) -> tuple[str, str, str]:
    """A user whose stored hash is the bcrypt one upstream made: (id, token, the bcrypt hash)."""
    token = str(api.register(name, password="placeholder pass").body["token"])
    user_id = token.split(".", maxsplit=1)[0]
    legacy = bcrypt.hashpw(password.encode()[:72], bcrypt.gensalt(COST, prefix=b"2b")).decode()
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{user_id}"}},
        UpdateExpression="SET passwordHash = :h",
        ExpressionAttributeValues={":h": {"S": legacy}},
    )
    return user_id, token, legacy


def test_a_bcrypt_password_logs_in_and_is_replaced_by_argon2_in_the_sessions_write(
    api: Api, stack: Stack
) -> None:
    user_id, _, legacy = _imported(api, stack)

    reply = api.login("alice", PASSWORD)

    assert reply.status == 201, reply.body
    stored = _user(stack, user_id)["passwordHash"]
    assert stored.startswith("$argon2id$")
    assert passwords.verify_password(stored, PASSWORD)
    assert not passwords.needs_rehash(stored)
    assert api.login("alice", PASSWORD, ip="203.0.113.6").status == 201
    assert legacy != stored


def test_a_wrong_password_against_a_bcrypt_hash_is_refused_counted_and_changes_nothing(
    api: Api, stack: Stack
) -> None:
    user_id, _, legacy = _imported(api, stack)

    reply = api.login("alice", "not the password")

    assert (reply.status, reply.body["code"]) == (401, "INVALID_PASSWORD_ERROR")
    user = _user(stack, user_id)
    assert (user["passwordHash"], user["authFailures"]) == (legacy, 1)


def test_upstreams_72_byte_cut_is_kept_for_long_passwords(api: Api, stack: Stack) -> None:
    long_password = "é" * 40  # 80 bytes in UTF-8: upstream's bcrypt hashed the first 72
    _imported(api, stack, password=long_password)

    assert api.login("alice", long_password).status == 201
    # While the hash is upstream's, its cut holds as upstream applied it: the first 72 bytes decide.
    assert api.login("alice", "é" * 39, ip="203.0.113.8").status == 201
    assert api.login("alice", "é" * 35, ip="203.0.113.9").body["code"] == "INVALID_PASSWORD_ERROR"


def test_a_bcrypt_user_with_a_factor_has_the_hash_replaced_with_the_challenge(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    user_id, token, _ = _imported(api, stack)
    secret = enrol_totp(stack, token)

    challenged = api.login("alice", PASSWORD)

    assert challenged.body["code"] == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
    assert _user(stack, user_id)["passwordHash"].startswith("$argon2id$")
    frozen.now += 30
    answer = {"token": challenged.body["token"], "type": "totp", "code": totp_now(secret, frozen.now)}
    assert api.call("POST", "/login", {"2fa": answer}, ip="203.0.113.5").status == 201


@pytest.mark.parametrize("factor", [False, True])
def test_reverification_with_a_bcrypt_password_replaces_the_hash_in_the_changes_write(
    api: Api, stack: Stack, frozen: Clock, factor: bool
) -> None:
    user_id, token, _ = _imported(api, stack)
    body: dict[str, Any] = {"username": "alice_renamed", "password": PASSWORD}
    if factor:
        secret = enrol_totp(stack, token)
        first = api.call("PUT", "/users/me/username", body, token=token)
        assert first.body["code"] == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
        assert _user(stack, user_id)["passwordHash"].startswith("$argon2id$")  # with the challenge
        frozen.now += 30
        answer = {"token": first.body["token"], "type": "totp", "code": totp_now(secret, frozen.now)}
        body = {"username": "alice_renamed", "2fa": answer}

    reply = api.call("PUT", "/users/me/username", body, token=token)

    assert reply.status == 200, reply.body
    user = _user(stack, user_id)
    assert user["username"] == "alice_renamed"
    assert user["passwordHash"].startswith("$argon2id$")
    assert passwords.verify_password(user["passwordHash"], PASSWORD)


def test_a_damaged_bcrypt_hash_refuses_every_password_without_a_500(api: Api, stack: Stack) -> None:
    user_id, _, _ = _imported(api, stack)
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{user_id}"}},
        UpdateExpression="SET passwordHash = :h",
        ExpressionAttributeValues={":h": {"S": "$2b$15$not-a-real-salt"}},
    )

    reply = api.login("alice", PASSWORD)

    assert (reply.status, reply.body["code"]) == (401, "INVALID_PASSWORD_ERROR")


def test_a_bcrypt_users_first_password_change_sets_the_new_password(api: Api, stack: Stack) -> None:
    user_id, token, _ = _imported(api, stack)
    body = {"password": PASSWORD, "newPassword": "a new password", "confirmNewPassword": "a new password"}

    reply = api.call("PUT", "/users/me/password", body, token=token)

    assert reply.status == 200, reply.body
    assert passwords.verify_password(_user(stack, user_id)["passwordHash"], "a new password")


def test_a_password_longer_than_bcrypt_reads_proves_it_but_never_replaces_it(api: Api, stack: Stack) -> None:
    user_id, _, legacy = _imported(api, stack, password="a" * 72)

    typo = api.login("alice", "a" * 72 + " and a typo")  # bcrypt reads 72 bytes: upstream accepted it too

    assert typo.status == 201
    assert _user(stack, user_id)["passwordHash"] == legacy  # the typo did not become the password
    assert api.login("alice", "a" * 72, ip="203.0.113.30").status == 201
    assert _user(stack, user_id)["passwordHash"].startswith("$argon2id$")


def test_two_first_logins_at_once_both_succeed_though_one_rehashed_under_the_other(
    api: Api, stack: Stack
) -> None:
    user_id, _, _ = _imported(api, stack)

    def other_login() -> Any:
        return api.login("alice", PASSWORD, ip="203.0.113.60")

    with before_next_transaction(other_login) as done:
        reply = api.login("alice", PASSWORD, ip="203.0.113.61")

    assert done[1].status == 201, done[1].body  # the other login rehashed first
    assert reply.status == 201, reply.body
    assert _user(stack, user_id)["passwordHash"].startswith("$argon2id$")
