"""Limits and uniqueness hold under concurrent requests (process-isolated workers, like Lambda)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.api_client import Reply, new_ip, new_name
from tests.e2e.conftest import Client, parallel

# After every race here, the users table is whole (tests/invariants.py).
pytestmark = pytest.mark.usefixtures("users_table_whole")


def test_concurrent_registrations_of_one_username_in_any_case_create_exactly_one_user(
    client: Client, dynamodb: Any
) -> None:
    name = new_name("Dup")
    variants = [name.upper(), name.lower(), name.swapcase(), name]

    def register(i: int) -> Reply:
        username = variants[i % len(variants)]
        body = {"username": username, "email": f"{username}.{i}@example.com", "password": "correct horse"}
        return client.call("POST", "/register", body, ip=new_ip())

    replies = parallel(20, register)
    assert Counter(r.status for r in replies) == {201: 1, 409: 19}, [(r.status, r.body) for r in replies]
    assert {r.body["code"] for r in replies if r.status == 409} == {"USER_EXISTS_ERROR"}
    claim = dynamodb.get_item(
        TableName="UsersTable", Key={"pk": {"S": f"USERNAME#{name.lower()}"}}, ConsistentRead=True
    )
    winner = next(r for r in replies if r.status == 201).body["token"].split(".")[0]
    assert claim["Item"]["userId"]["S"] == winner
    users = dynamodb.query(
        TableName="UsersTable",
        IndexName="UsernameLookup",
        KeyConditionExpression="usernameKey = :k",
        ExpressionAttributeValues={":k": {"S": name.lower()}},
    )["Items"]
    assert len(users) == 1


def test_concurrent_logins_from_one_ip_let_exactly_four_counted_requests_through(client: Client) -> None:
    name = new_name()
    assert client.register(name).status == 201
    ip = new_ip()
    replies = parallel(12, lambda _: client.login(name, "wrong password", ip=ip))
    assert Counter(r.status for r in replies) == {401: 4, 429: 8}
    for reply in replies:
        assert reply.headers["RateLimit-Limit"] == "4"
        assert 0 < int(reply.headers["RateLimit-Reset"]) <= 300
        if reply.status == 429:
            assert reply.body["code"] == "RATELIMITED_ERROR"
            assert reply.headers["RateLimit-Remaining"] == "0"
            assert 0 < int(reply.headers["Retry-After"]) <= 300
    # Even the right password is refused now: the window is used up.
    assert client.login(name, ip=ip).status == 429


def test_unknown_user_answers_are_not_counted_even_concurrently(client: Client) -> None:
    name = new_name()
    assert client.register(name).status == 201
    ip = new_ip()
    unknown = parallel(10, lambda i: client.login(f"nobody_{i}_{name}", ip=ip))
    assert {r.status for r in unknown} == {404}
    counted = [client.login(name, "wrong password", ip=ip) for _ in range(3)]
    assert [r.status for r in counted] == [401, 401, 401]
    assert client.login(name, ip=ip).status == 201
    assert client.login(name, ip=ip).status == 429


def _registered(client: Client, count: int) -> list[str]:
    tokens = []
    for _ in range(count):
        reply = client.register(new_name())
        assert reply.status == 201, reply.body
        tokens.append(reply.body["token"])
    return tokens


def test_twenty_users_renaming_to_one_name_in_any_case_give_exactly_one_200(client: Client) -> None:
    tokens = _registered(client, 20)
    wanted = new_name("Taken")
    variants = [wanted.upper(), wanted.lower(), wanted.swapcase(), wanted]

    def rename(i: int) -> Reply:
        body = {"username": variants[i % len(variants)], "password": "correct horse"}
        return client.call("PUT", "/users/me/username", body, token=tokens[i], ip=new_ip())

    replies = parallel(20, rename)
    assert Counter(r.status for r in replies) == {200: 1, 409: 19}, [(r.status, r.body) for r in replies]
    winner = next(r for r in replies if r.status == 200).body["username"]
    assert client.login(wanted.lower()).status == 201
    assert winner.lower() == wanted.lower()


def test_twenty_users_taking_one_address_in_folded_case_give_exactly_one_200(client: Client) -> None:
    tokens = _registered(client, 20)
    local = new_name("strasse")
    variants = [f"{local}.STRASSE@example.com", f"{local}.straße@example.com", f"{local}.Strasse@EXAMPLE.com"]

    def change(i: int) -> Reply:
        body = {"email": variants[i % len(variants)], "password": "correct horse"}
        return client.call("PUT", "/users/me/email", body, token=tokens[i], ip=new_ip())

    replies = parallel(20, change)
    assert Counter(r.status for r in replies) == {200: 1, 409: 19}, [(r.status, r.body) for r in replies]


def test_concurrent_wrong_reverifications_from_one_session_give_exactly_five_401(
    client: Client, dynamodb: Any
) -> None:
    # The session's own reverification limit (CONTRACT section 8) is one conditional write on the
    # session item: exactly 5 wrong passwords are answered 401, the rest 429, and the login lock
    # is never fed.
    name = new_name()
    registered = client.register(name)
    assert registered.status == 201, registered.body
    token = registered.body["token"]

    replies = parallel(
        10,
        lambda _: client.call("DELETE", "/users/me", {"password": "a wrong one"}, token=token, ip=new_ip()),
    )

    assert Counter(r.status for r in replies) == {401: 5, 429: 5}, [(r.status, r.body) for r in replies]
    for reply in replies:
        if reply.status == 429:
            assert reply.body["code"] == "RATELIMITED_ERROR"
            assert 0 < int(reply.headers["Retry-After"]) <= 15 * 60
            assert "RateLimit-Limit" not in reply.headers
    user = dynamodb.get_item(
        TableName="UsersTable", Key={"pk": {"S": f"USER#{token.split('.')[0]}"}}, ConsistentRead=True
    )["Item"]
    assert user.get("authFailures", {"N": "0"}) == {"N": "0"}
    assert client.login(name).status == 201
