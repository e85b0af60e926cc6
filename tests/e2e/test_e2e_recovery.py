"""Account recovery over HTTP against the local API, as an attacker would try it: the answer does not
tell who has an account, the silent per-account limit and the single-use token hold under
concurrent requests, and a token never outlives what it was bound to."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from nimbus_core.adapters.items import from_item
from tests.api_client import Reply, link_token, new_ip, new_name
from tests.e2e.conftest import Client, parallel, recovery_requests_handled

PASSWORD = "correct horse"
# Headers that differ between any two answers, whatever they answer.
PER_REPLY = {"date", "x-amzn-requestid", "apigw-requestid", "content-length"}


# After every race here, the users table is whole (tests/invariants.py).
pytestmark = pytest.mark.usefixtures("stack_whole")


def _recover(client: Client, name: str, ip: str | None = None) -> Reply:
    return client.call("POST", "/users/recover", {"username": name}, ip=ip or new_ip())


def _reset(client: Client, token: str, password: str, **extra: Any) -> Reply:
    body = {"token": token, "newPassword": password, "confirmNewPassword": password, **extra}
    return client.call("PUT", "/users/recover", body, ip=new_ip())


def _tokens(dynamodb: Any, address: str) -> list[str]:
    """The recovery tokens mailed to ``address``, oldest first (read from the outbox table once
    the recovery function has handled every request asked so far)."""
    recovery_requests_handled(dynamodb)
    pages = dynamodb.get_paginator("scan").paginate(TableName="OutboxTable", ConsistentRead=True)
    messages = [from_item(item) for page in pages for item in page["Items"]]
    mine = sorted(
        (m for m in messages if m["kind"] == "recover-password" and m["to"] == address), key=lambda m: m["id"]
    )
    return [token for m in mine if (token := link_token(m["text"]))]


def _shape(reply: Reply) -> tuple[int, Any, dict[str, str]]:
    return (
        reply.status,
        reply.body,
        {k.lower(): v for k, v in reply.headers.items() if k.lower() not in PER_REPLY},
    )


def test_an_existing_unknown_and_banned_name_get_the_same_status_body_and_headers(
    client: Client, dynamodb: Any
) -> None:
    name = new_name()
    assert client.register(name).status == 201
    ip = new_ip()

    answers = [
        _shape(_recover(client, asked, ip))
        for asked in (name, new_name("nobody"), f"{new_name()}@example.com")
    ]

    assert answers[0][:2] == (
        201,
        {"code": "SEND_RECOVERY_EMAIL_SUCCESS", "message": "Recovery Email Successfully Sent"},
    )
    # Only RateLimit-Remaining moves, one per request, whatever the name.
    remaining = [int(a[2].pop("ratelimit-remaining")) for a in answers]
    assert remaining == [4, 3, 2]
    # RateLimit-Reset counts down in whole seconds: requests a second boundary apart differ by one.
    resets = [int(a[2].pop("ratelimit-reset")) for a in answers]
    assert max(resets) - min(resets) <= 1, resets
    assert answers[0] == answers[1] == answers[2]
    assert len(_tokens(dynamodb, f"{name}@example.com")) == 1


def test_thirty_concurrent_requests_for_one_account_mail_exactly_three_and_all_answer_201(
    client: Client, dynamodb: Any
) -> None:
    name = new_name()
    assert client.register(name).status == 201

    replies = parallel(30, lambda _: _recover(client, name))

    assert Counter(r.status for r in replies) == {201: 30}, [(r.status, r.body) for r in replies]
    assert len(_tokens(dynamodb, f"{name}@example.com")) == 3  # the silent per-account limit


def test_thirty_concurrent_resets_with_one_token_let_exactly_one_win(client: Client, dynamodb: Any) -> None:
    name = new_name()
    session = client.register(name).body["token"]
    assert _recover(client, name).status == 201
    (token,) = _tokens(dynamodb, f"{name}@example.com")
    passwords = [f"new password {i:02d}" for i in range(30)]

    replies = parallel(30, lambda i: _reset(client, token, passwords[i]))

    outcomes = Counter((r.status, r.body["code"]) for r in replies)
    assert outcomes == {(200, "RESET_PASSWORD_SUCCESS"): 1, (400, "INVALID_RECOVERY_TOKEN_ERROR"): 29}, (
        outcomes
    )
    winner = passwords[next(i for i, r in enumerate(replies) if r.status == 200)]
    assert [client.login(name, p, ip=new_ip()).status for p in (winner, PASSWORD)] == [201, 401]
    assert client.call("GET", "/users/me", token=session).status == 401


def test_a_token_dies_with_a_newer_one_a_password_change_and_never_works_for_another_account(
    client: Client, dynamodb: Any
) -> None:
    name, other = new_name(), new_name()
    session = client.register(name).body["token"]
    assert client.register(other).status == 201
    assert _recover(client, name).status == 201
    assert _recover(client, name).status == 201
    older, newer = _tokens(dynamodb, f"{name}@example.com")
    assert _recover(client, other).status == 201
    (others,) = _tokens(dynamodb, f"{other}@example.com")

    assert _reset(client, older, "superseded pass").body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"
    # Another account's token with this account's id in front: the secret is bound to its own user.
    forged = f"{newer.split('.')[0]}.{others.split('.', 1)[1]}"
    assert _reset(client, forged, "forged password").body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"
    changed = client.call(
        "PUT",
        "/users/me/password",
        {"password": PASSWORD, "newPassword": "changed by me", "confirmNewPassword": "changed by me"},
        token=session,
        ip=new_ip(),
    )
    assert changed.status == 200, changed.body
    assert _reset(client, newer, "too late now").body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"
    assert client.login(name, "changed by me", ip=new_ip()).status == 201
    assert _reset(client, others, "the other one").status == 200  # untouched by all this


def test_someone_who_knows_only_the_username_cannot_keep_an_owner_out_of_the_browser_they_signed_in_from(
    client: Client,
) -> None:
    """The attack of CONTRACT section 8: the account's three recovery mails spent from one address,
    then eleven wrong passwords from three addresses lock its logins. The owner's own browser,
    which presents the device token of its earlier sign-in, still logs in; a made-up token or
    another account's changes nothing in the answer."""
    name = new_name("owner")
    registered = client.register(name)
    assert registered.status == 201, registered.body
    device = str(registered.body["device"])
    other = client.register(new_name("other"))
    attacker = [new_ip() for _ in range(3)]
    for _ in range(3):
        assert _recover(client, name, attacker[0]).status == 201
    for n in range(11):
        client.login(name, f"a guess {n}", ip=attacker[n % 3])
    refused = client.login(name)
    assert (refused.status, refused.body["code"]) == (429, "RATELIMITED_ERROR")
    for presented in (str(other.body["device"]), "made-up-device-token-0123456789abcdefghijk"):
        assert _shape(client.login(name, device=presented))[:2] == _shape(refused)[:2]

    owner = client.login(name, device=device)

    assert owner.status == 201, owner.body
    assert client.call("GET", "/users/me", token=str(owner.body["token"])).status == 200
    assert client.login(name).status == 429  # the lock still holds everyone else
