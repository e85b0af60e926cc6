"""New sign-in notices on moto (CONTRACT section 17): the notice is written by the sign-in's own
transaction, and the mail function sends at most one an hour per account.

The hourly bound is one conditional write per delivery (``DynamoOutbox.admit``) and nothing reads
before it, so deliveries however concurrent are some order of those writes, each decided by
DynamoDB on the item as the ones before it left it: the orders below are every case there is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.outbox import NOTICE_SENT, DynamoOutbox, OutboxMessage
from nimbus_core.domain.models import Email
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_mail import dead_letters
from tests.integration.test_passkey_sign_in import _enrol, _sign_in, _user
from tests.passkey_authenticator import SoftwareAuthenticator

HOUR = 3600
IP = "203.0.113.77"
KIND = "notice-new-sign-in"
SUBJECT = "New sign-in to your account"


def _writes_during(action: Any) -> list[dict[str, Any]]:
    """The TransactWriteItems the functions send while ``action`` runs, as sent."""
    seen: list[dict[str, Any]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "TransactWriteItems":
            seen.append(json.loads(params["body"]))

    client = clients.dynamodb()
    client.meta.events.register("before-call", record)
    try:
        action()
    finally:
        client.meta.events.unregister("before-call", record)
    return seen


def _notices(stack: Stack) -> list[dict[str, Any]]:
    return [m for m in map(from_item, stack.items("OutboxTable")) if m.get("kind") == KIND]


@pytest.fixture
def aged(api: Api, frozen: Clock) -> Api:
    """alice, registered over an hour ago (the sign-ins of an account's first hour mail none)."""
    assert api.register().status == 201
    frozen.now += HOUR + 1
    return api


def test_a_login_without_a_device_writes_its_notice_in_the_sessions_own_transaction(
    aged: Api, stack: Stack, frozen: Clock
) -> None:
    replies: list[Any] = []
    writes = _writes_during(lambda: replies.append(aged.login(ip=IP)))
    assert replies[0].status == 201, replies[0].body

    (transaction,) = writes  # one round trip writes the session and the notice, or neither
    puts = [item["Put"] for item in transaction["TransactItems"] if "Put" in item]
    tables = {put["TableName"] for put in puts}
    assert stack.table("SessionsTable") in tables
    [notice_put] = [p for p in puts if p["TableName"] == stack.table("OutboxTable")]
    assert notice_put["Item"]["kind"] == {"S": KIND}

    (notice,) = _notices(stack)
    assert (notice["to"], notice["subject"]) == ("alice@example.com", SUBJECT)
    assert IP in notice["text"]
    assert iso(frozen.now) in notice["text"]
    assert "http://localhost:3000/console/sessions" in notice["text"]  # the template's default
    # The item also records the sign-in in the account's activity (no item of its own).
    assert notice["event"]["type"] == "sign-in"
    assert notice["event"]["method"] == "password"


def test_the_mail_function_sends_one_new_sign_in_notice_an_hour_and_the_activity_keeps_every_sign_in(
    aged: Api, stack: Stack, frozen: Clock
) -> None:
    assert aged.login(ip=IP).status == 201
    frozen.now += 10 * 60
    assert aged.login(ip="198.51.100.99").status == 201
    assert len(_notices(stack)) == 2  # each sign-in wrote its notice; the mail function bounds them
    assert [m["subject"] for m in stack.emails].count(SUBJECT) == 1
    frozen.now += HOUR
    assert aged.login(ip=IP).status == 201
    assert [m["subject"] for m in stack.emails].count(SUBJECT) == 2
    # The bound's record is no mail: the mail function never took it for one (an unreadable item).
    assert dead_letters(stack) == []


def _message(user_id: str, at: float) -> OutboxMessage:
    email = Email(to="alice@example.com", subject=SUBJECT, text="t", html="h")
    return OutboxMessage(new_id(), KIND, email, iso(at), int(at) + 7 * 86400, user_id=user_id)


def test_the_bound_admits_one_notice_an_hour_per_account_in_any_order_and_the_same_one_again(
    stack: Stack,
) -> None:
    outbox = DynamoOutbox(stack.dynamodb, stack.table("OutboxTable"))
    t0 = 1_800_000_000.0
    first, close, later, next_hour = (_message("u-1", t0 + s) for s in (0, 600, HOUR - 1, HOUR + 5))
    assert outbox.admit(close, interval=HOUR)  # delivered first, though made after ``first``
    assert not outbox.admit(first, interval=HOUR)
    assert not outbox.admit(later, interval=HOUR)
    assert outbox.admit(close, interval=HOUR)  # its record delivered again: still admitted
    assert not outbox.admit(next_hour, interval=HOUR)  # 595 s after the one admitted
    assert outbox.admit(_message("u-1", t0 + 600 + HOUR), interval=HOUR)
    assert outbox.admit(_message("u-2", t0), interval=HOUR)  # every account has its own
    stored = [m for m in map(from_item, stack.items("OutboxTable")) if m.get("kind") == NOTICE_SENT]
    assert sorted(m["userId"] for m in stored) == ["u-1", "u-2"]


def test_a_passkey_sign_in_mails_the_notice_naming_the_passkey(api: Api, stack: Stack, frozen: Clock) -> None:
    # A passkey sign-in's body names no device: it is told like one from a new device.
    _username, token = _user(api)
    key = SoftwareAuthenticator(transports=("internal",))
    assert _enrol(api, token, key).status == 201
    frozen.now += HOUR + 1
    signed_in = _sign_in(api, key, ip=IP)
    assert signed_in.status == 201, signed_in.body
    (notice,) = _notices(stack)
    assert "How: a passkey" in notice["text"]
    assert notice["event"]["method"] == "passkey"
