"""Account recovery (CONTRACT section 14) through the Auth function's handler on moto: the same
answer and the same DynamoDB round trips for every name, the reset's one transaction, the kill
switch, and faults injected between its writes leaving nothing half done."""

from __future__ import annotations

import re
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.items import from_item
from tests.integration.conftest import Api, Clock, Faults, Stack
from tests.integration.test_mail import record_calls

PASSWORD = "correct horse"
NEW_PASSWORD = "a brand new password"
LINK = re.compile(r"recover\?token=([A-Za-z0-9_.-]+)")


@pytest.fixture
def dynamodb_calls(stack: Stack) -> list[tuple[str, dict[str, Any]]]:
    return record_calls("dynamodb", clients.dynamodb())


def _recover(api: Api, name: str, ip: str = "198.51.100.20", **kwargs: Any) -> Any:
    return api.call("POST", "/users/recover", {"username": name}, ip=ip, **kwargs)


def _reset(
    api: Api, token: str, password: str = NEW_PASSWORD, ip: str = "198.51.100.30", answer: Any = None
) -> Any:
    body = {"token": token, "newPassword": password, "confirmNewPassword": password}
    if answer is not None:
        body["2fa"] = answer
    return api.call("PUT", "/users/recover", body, ip=ip)


def _mailed_token(stack: Stack, to: str) -> str:
    queued = [from_item(i) for i in stack.items("OutboxTable")]
    mails = sorted(
        (m for m in queued if m["to"] == to and m["kind"] == "recover-password"), key=lambda m: m["id"]
    )
    found = LINK.search(mails[-1]["text"])
    assert found is not None
    return found.group(1)


def _shape(reply: Any) -> tuple[int, Any, dict[str, str]]:
    headers = {k.lower(): v for k, v in reply.headers.items() if k.lower() != "x-amzn-requestid"}
    return reply.status, reply.body, headers


def test_existing_unknown_banned_and_limited_names_get_the_same_answer_and_round_trips(
    api: Api, stack: Stack, frozen: Clock, dynamodb_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    assert api.register("alice").status == 201
    assert api.register("bob", ip="198.51.100.8").status == 201
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{_user_id(stack, 'bob')}"}},
        UpdateExpression="SET bannedAt = :b",
        ExpressionAttributeValues={":b": {"S": "2027-01-15T08:00:00.250Z"}},
    )
    assert api.register("carol", ip="198.51.100.9").status == 201
    for n in range(3):
        assert _recover(api, "carol", ip=f"198.51.100.{40 + n}").status == 201
    seen = {}
    for n, name in enumerate(["alice", "nobody", "bob", "carol", "alice@example.com", "nobody@example.com"]):
        dynamodb_calls.clear()
        reply = _recover(
            api, name, ip=f"198.51.100.{60 + n}"
        )  # each its own IP: the same RateLimit-* headers
        seen[name] = (_shape(reply), [op for op, _ in dynamodb_calls])
    expected = (
        (
            201,
            {"code": "SEND_RECOVERY_EMAIL_SUCCESS", "message": "Recovery Email Successfully Sent"},
            seen["alice"][0][2],
        ),
        ["UpdateItem", "Query", "TransactWriteItems"],
    )
    assert all(outcome == expected for outcome in seen.values()), seen
    recovery_mails = [
        m for m in map(from_item, stack.items("OutboxTable")) if m["kind"] == "recover-password"
    ]
    assert sorted(m["to"] for m in recovery_mails) == ["alice@example.com"] * 2 + ["carol@example.com"] * 3


def _user_id(stack: Stack, name: str) -> str:
    for item in map(from_item, stack.items("UsersTable")):
        if item.get("username") == name:
            return str(item["id"])
    raise AssertionError(name)


def test_a_reset_is_one_transaction_and_the_old_sessions_and_password_stop_working(
    api: Api, stack: Stack, frozen: Clock, dynamodb_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    session = api.register("alice").body["token"]
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    dynamodb_calls.clear()
    reply = _reset(api, token)
    assert (reply.status, reply.body) == (
        200,
        {"code": "RESET_PASSWORD_SUCCESS", "message": "Password Successfully Reset"},
    )
    assert "token" not in reply.body  # no session is issued
    assert [op for op, _ in dynamodb_calls] == ["UpdateItem", "BatchGetItem", "TransactWriteItems"]
    assert api.call("GET", "/users/me", token=session).status == 401
    assert api.login("alice", PASSWORD, ip="203.0.113.50").status == 401
    assert api.login("alice", NEW_PASSWORD, ip="203.0.113.51").status == 201
    assert _reset(api, token).body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"  # spent
    notices = [
        m for m in map(from_item, stack.items("OutboxTable")) if m["kind"] == "notice-password-changed"
    ]
    assert [m["to"] for m in notices] == ["alice@example.com"]


def test_a_reset_with_a_factor_is_challenged_then_answered_in_three_round_trips(
    api: Api, stack: Stack, frozen: Clock, dynamodb_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    session = api.register("alice").body["token"]
    setup = api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=session).body
    confirm = {"token": setup["token"], "name": "Phone", "code": pyotp.TOTP(setup["secret"]).at(frozen.now)}
    assert api.call("POST", "/users/me/2fa/totp/confirm", confirm, token=session).status == 201
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    first = _reset(api, token)
    assert (first.status, first.body["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    assert first.body["types"] == ["totp", "backup"]
    assert first.headers["RateLimit-Remaining"] == "10"  # a challenge is not counted
    frozen.now += 30
    answer = {
        "token": first.body["token"],
        "type": "totp",
        "code": pyotp.TOTP(setup["secret"]).at(frozen.now),
    }
    dynamodb_calls.clear()
    reply = _reset(api, token, answer=answer)
    assert reply.status == 200, reply.body
    assert [op for op, _ in dynamodb_calls] == ["UpdateItem", "BatchGetItem", "TransactWriteItems"]
    assert _reset(api, token, answer=answer).body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"


def test_a_logged_in_caller_is_refused_and_the_login_switch_holds_both(api: Api, stack: Stack) -> None:
    session = api.register("alice").body["token"]
    assert _recover(api, "alice", token=session).status == 401
    stack.set_switches("ACCOUNT_LOGIN")
    assert (_recover(api, "alice").status, _recover(api, "alice").body["feature"]) == (503, 4)
    assert _reset(api, "x.y").status == 503


@pytest.mark.parametrize("failing", ["TransactWriteItems", "BatchGetItem"])
def test_a_fault_during_the_reset_changes_nothing_and_the_token_still_works(
    api: Api, stack: Stack, faults: Faults, failing: str
) -> None:
    session = api.register("alice").body["token"]
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    before = sorted(map(str, stack.items("UsersTable")))
    faults.fail("dynamodb", failing, "InternalServerError", 500, times=1)
    assert _reset(api, token).status == 500
    assert sorted(map(str, stack.items("UsersTable"))) == before
    assert api.call("GET", "/users/me", token=session).status == 200
    faults.clear()
    assert _reset(api, token).status == 200


def test_a_fault_during_the_request_mails_nothing_and_answers_500(
    api: Api, stack: Stack, faults: Faults
) -> None:
    assert api.register("alice").status == 201
    faults.fail("dynamodb", "TransactWriteItems", "InternalServerError", 500, times=1)
    assert _recover(api, "alice").status == 500
    assert not [m for m in map(from_item, stack.items("OutboxTable")) if m["kind"] == "recover-password"]
