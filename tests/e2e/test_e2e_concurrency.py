"""Limits and uniqueness hold under concurrent requests (process-isolated workers, like Lambda): one
race per kind over HTTP, a name claimed by twenty registrations at once and a limit counted by
twelve logins at once. The same rules for the other requests are proven on the fakes, where the
concurrent request lands inside the read-then-write window every time: a rename or a new address
to one taken meanwhile (tests/unit/test_changes_in_flight.py), wrong reverifications from one
session (tests/unit/test_reverification_limits.py,
``test_concurrent_wrong_passwords_from_one_session_give_exactly_five_401_and_the_rest_429``), an
unknown user's login counting nothing (tests/unit/test_account_rules.py), the limiter letting
exactly its limit through concurrently (tests/unit/test_rate_limiter.py)."""

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
