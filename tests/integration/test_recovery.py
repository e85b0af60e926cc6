"""Account recovery (CONTRACT section 14) through the Auth function's handler on moto: the same
answer and the same DynamoDB writes for every name (the request is queued; the recovery function,
fed the outbox stream, looks the account up and mails after the answer, once per request), the
reset's one transaction, the kill switch, and faults injected between its writes leaving nothing
half done."""

from __future__ import annotations

import re
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.items import from_item
from tests.integration.conftest import Api, Clock, Faults, Stack
from tests.integration.test_mail import record_calls
from tests.integration.test_user_races import before_next_transaction, commit_of_a_concurrent_request

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


def _recovery_mails(stack: Stack) -> list[dict[str, Any]]:
    """The recovery mails in the outbox, oldest first, once the requests waiting were handled."""
    stack.handle_recovery_requests()
    queued = [from_item(i) for i in stack.messages()]
    return sorted((m for m in queued if m["kind"] == "recover-password"), key=lambda m: str(m["id"]))


def _requests(stack: Stack) -> list[dict[str, Any]]:
    """The recovery requests still stored (not yet handled)."""
    return [m for m in map(from_item, stack.messages()) if m["kind"] == "recover-request"]


def _mailed_token(stack: Stack, to: str) -> str:
    mails = [m for m in _recovery_mails(stack) if m["to"] == to]
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
    assert len(_recovery_mails(stack)) == 3  # carol's limit is reached
    seen = {}
    for n, name in enumerate(["alice", "nobody", "bob", "carol", "alice@example.com", "nobody@example.com"]):
        dynamodb_calls.clear()
        reply = _recover(
            api, name, ip=f"198.51.100.{60 + n}"
        )  # each its own IP: the same RateLimit-* headers
        seen[name] = (_shape(reply), _writes(stack, dynamodb_calls))
    expected = (
        (
            201,
            {"code": "SEND_RECOVERY_EMAIL_SUCCESS", "message": "Recovery Email Successfully Sent"},
            seen["alice"][0][2],
        ),
        # The per-IP limit, then the request queued: the lookup and the mail come after the answer.
        [("UpdateItem", "CountersTable"), ("PutItem", "OutboxTable")],
    )
    assert all(outcome == expected for outcome in seen.values()), seen
    assert len(_requests(stack)) == 6  # nothing looked up yet
    assert sorted(m["to"] for m in _recovery_mails(stack)) == (
        ["alice@example.com"] * 2 + ["carol@example.com"] * 3
    )
    assert _requests(stack) == []  # every request handled, and removed with it


def _writes(stack: Stack, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, ...]]:
    """What each call touched: its operation and table, and each item of a transaction (its kind
    and table), so two requests that write different items compare unequal."""
    tables = {name: logical for logical, name in stack.provisioned.tables.items()}
    shapes: list[tuple[str, ...]] = []
    for operation, params in calls:
        if operation == "TransactWriteItems":
            items = [next(iter(item.items())) for item in params["TransactItems"]]
            shapes.append((operation, *(f"{kind} {tables[body['TableName']]}" for kind, body in items)))
        else:
            shapes.append((operation, tables.get(params.get("TableName", ""), "")))
    return shapes


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
    assert reply.status == 200, reply.body
    assert reply.body["code"] == "RESET_PASSWORD_SUCCESS"
    # The owner is signed in: the new session is written in the reset's one transaction.
    assert [op for op, _ in dynamodb_calls] == ["UpdateItem", "BatchGetItem", "TransactWriteItems"]
    assert api.call("GET", "/users/me", token=reply.body["token"]).status == 200
    assert api.call("GET", "/users/me", token=session).status == 401
    assert api.login("alice", PASSWORD, ip="203.0.113.50").status == 401
    assert api.login("alice", NEW_PASSWORD, ip="203.0.113.51").status == 201
    assert _reset(api, token).body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"  # spent
    notices = [m for m in map(from_item, stack.messages()) if m["kind"] == "notice-password-changed"]
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
    faults.fail("dynamodb", "PutItem", "InternalServerError", 500, times=1)
    assert _recover(api, "alice").status == 500
    assert _requests(stack) == []
    assert _recovery_mails(stack) == []


# --- races with the account's other changes (a change lands inside the request's read-then-write) ---


def _user_item(stack: Stack, name: str) -> dict[str, Any]:
    return next(i for i in map(from_item, stack.items("UsersTable")) if i.get("username") == name)


def test_a_reset_racing_an_address_change_is_refused_and_never_verifies_the_new_address(
    api: Api, stack: Stack
) -> None:
    session = api.register("alice").body["token"]
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    user_id = _user_item(stack, "alice")["id"]

    with before_next_transaction(commit_of_a_concurrent_request(user_id, "email", "mallory@evil.example")):
        reset = _reset(api, token)

    assert (reset.status, reset.body["code"]) == (400, "INVALID_RECOVERY_TOKEN_ERROR")
    user = _user_item(stack, "alice")
    assert user["email"] == "mallory@evil.example"
    assert "verifiedAt" not in user  # nobody proved the new address
    assert "pendingVerification" in user  # and its link still waits
    assert api.call("GET", "/users/me", token=session).status == 200  # nothing was reset


def test_a_token_stays_void_after_the_address_changes_away_and_back(api: Api, stack: Stack) -> None:
    session = api.register("alice").body["token"]
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    for address in ("away@example.org", "alice@example.com"):
        moved = api.call("PUT", "/users/me/email", {"email": address, "password": PASSWORD}, token=session)
        assert moved.status == 200, moved.body

    assert _reset(api, token).body["code"] == "INVALID_RECOVERY_TOKEN_ERROR"


@pytest.mark.parametrize("field", ["password", "sessions"])
def test_a_request_handled_while_a_password_change_or_a_revoke_all_commits_still_mails_a_working_link(
    api: Api, stack: Stack, field: str
) -> None:
    session = api.register("alice").body["token"]

    def concurrent() -> Any:
        if field == "password":
            body = {"password": PASSWORD, "newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD}
            return api.call("PUT", "/users/me/password", body, token=session, ip="198.51.100.90")
        return api.call(
            "DELETE", "/users/me/sessions/all?include-self=true", token=session, ip="198.51.100.90"
        )

    reply = _recover(api, "alice")
    with before_next_transaction(concurrent) as done:  # after the lookup, before the mail's commit
        stack.handle_recovery_requests()

    assert done[1].status == 200, done[1].body
    assert (reply.status, reply.body["code"]) == (201, "SEND_RECOVERY_EMAIL_SUCCESS")
    assert _reset(api, _mailed_token(stack, "alice@example.com")).status == 200


def test_a_bad_token_is_named_first_whatever_the_second_factor_answer_holds(api: Api) -> None:
    assert api.register("alice").status == 201
    bad = "01M89919A7RV55ED9Z6RYKSG7X." + "a" * 43
    for answer in ({"token": "x", "type": "totp", "code": "1"}, {"type": "nonsense"}, {}):
        reply = _reset(api, bad, answer=answer)
        assert (reply.status, reply.body["code"]) == (400, "INVALID_RECOVERY_TOKEN_ERROR"), answer
