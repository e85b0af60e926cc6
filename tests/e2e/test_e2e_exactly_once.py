"""Exactly-once rules at 30-way concurrency over HTTP against the local API: a TOTP code, a backup
code, a challenge token and an emailed verification token each work once however many requests
race for them, and a rate limit lets exactly its number through."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pytest

from nimbus_core.adapters.items import from_item
from tests.api_client import Reply, new_ip, new_name
from tests.e2e.conftest import Client, parallel, with_totp

PASSWORD = "correct horse"
WAYS = 30


# After every race here, the users table is whole (tests/invariants.py).
pytestmark = pytest.mark.usefixtures("stack_whole")


def _challenges(client: Client, name: str, count: int) -> list[str]:
    """``count`` login challenges of one user, each from its own address (the per-IP limit)."""
    tokens = []
    for _ in range(count):
        first = client.login(name, PASSWORD, ip=new_ip())
        assert first.body["code"] == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", first.body
        tokens.append(first.body["token"])
    return tokens


# What the losers of a race for one code hear: a used code, or, after ten failed answers, the
# per-account lock (failed second-factor answers count toward it, whoever sends them).
LOST = {(401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR"), (429, "RATELIMITED_ERROR")}


def _exactly_one_session(replies: list[Reply]) -> None:
    outcomes = Counter((r.status, r.body.get("code")) for r in replies)
    assert outcomes[(201, None)] == 1, outcomes
    assert set(outcomes) - {(201, None)} <= LOST, outcomes


def _answer(client: Client, challenge: str, kind: str, code: str) -> Reply:
    return client.call(
        "POST", "/login", {"2fa": {"token": challenge, "type": kind, "code": code}}, ip=new_ip()
    )


def test_one_totp_code_answers_one_of_thirty_racing_challenges(client: Client) -> None:
    name, _, totp, _ = with_totp(client)
    challenges = _challenges(client, name, WAYS)
    code = totp.at(time.time() + 30)  # the next step: the current one was used up by the confirmation

    replies = parallel(WAYS, lambda i: _answer(client, challenges[i], "totp", code))

    _exactly_one_session(replies)


def test_one_backup_code_answers_one_of_thirty_racing_challenges(client: Client) -> None:
    name, _, _, codes = with_totp(client)
    challenges = _challenges(client, name, WAYS)

    replies = parallel(WAYS, lambda i: _answer(client, challenges[i], "backup", codes[0]))

    _exactly_one_session(replies)


def test_one_challenge_token_opens_one_session_whatever_thirty_right_answers_race(client: Client) -> None:
    name, _, _, codes = with_totp(client)
    (challenge,) = _challenges(client, name, 1)

    # Thirty different right answers (ten backup codes, three times each) to the same challenge.
    replies = parallel(WAYS, lambda i: _answer(client, challenge, "backup", codes[i % len(codes)]))

    _exactly_one_session(replies)


def test_an_emailed_verification_token_verifies_once_at_thirty_way(client: Client, dynamodb: Any) -> None:
    name = new_name()
    assert client.register(name).status == 201
    pages = dynamodb.get_paginator("scan").paginate(TableName="OutboxTable", ConsistentRead=True)
    mails = [from_item(i) for page in pages for i in page["Items"]]
    (mail,) = [m for m in mails if m["to"] == f"{name}@example.com" and m["kind"] == "verify-email"]
    found = re.search(r"token=([A-Za-z0-9_.-]+)", mail["text"])
    assert found is not None
    token = found.group(1)

    replies = parallel(WAYS, lambda _: client.call("PUT", "/users/verify", {"token": token}, ip=new_ip()))

    outcomes = Counter((r.status, r.body.get("code")) for r in replies)
    assert outcomes == {
        (200, "VERIFY_EMAIL_SUCCESS"): 1,
        (400, "INVALID_VERIFICATION_TOKEN_ERROR"): WAYS - 1,
    }, outcomes


def test_thirty_api_key_creations_from_one_address_let_exactly_four_through(client: Client) -> None:
    session = client.register(new_name()).body["token"]
    ip = new_ip()
    body = {"name": "uploader", "permissionFlags": 2, "password": PASSWORD}

    replies = parallel(WAYS, lambda _: client.call("POST", "/users/me/sessions", body, token=session, ip=ip))

    assert Counter(r.status for r in replies) == {201: 4, 429: WAYS - 4}, [
        (r.status, r.body) for r in replies
    ]
