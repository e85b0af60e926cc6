"""AWS failures: clean 500s with nothing half-written; an SSM outage that a warm function rides out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from nimbus_core.adapters import container
from nimbus_core.platform import clock
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import Api, Faults, Stack

pytestmark = pytest.mark.waits  # the SDK's and the runtime configuration's backoff, slept out

INTERNAL = {"code": "INTERNAL_SERVER_ERROR", "message": "Internal Server Error"}
PASSWORD = "correct horse"
DYNAMODB_ERRORS = [
    ("InternalServerError", 500),
    ("ProvisionedThroughputExceededException", 400),
    ("ThrottlingException", 400),
    ("AccessDeniedException", 400),
]


def assert_internal_error(reply: Reply) -> None:
    """A 500 whose body is exactly the contract's error, with nothing about the failure inside."""
    assert reply.status == 500, reply.body
    assert reply.body == INTERNAL
    text = json.dumps(reply.body)
    assert "Traceback" not in text
    assert "injected fault" not in text


def account_items(stack: Stack) -> dict[str, list[dict[str, Any]]]:
    return {name: stack.items(name) for name in ("UsersTable", "SessionsTable", "TokensTable")}


def nothing_stored(stack: Stack) -> bool:
    return all(not items for items in account_items(stack).values())


# ---------------------------------------------------------------- register


@pytest.mark.parametrize(
    "error", [("InternalFailure", 500), ("MessageRejected", 400), ("TooManyRequestsException", 429)]
)
def test_register_answers_201_while_ses_fails_and_the_account_is_usable(
    api: Api, stack: Stack, faults: Faults, error: tuple[str, int]
) -> None:
    faults.fail("ses", "SendEmail", *error)

    reply = api.register("alice", ip="192.0.2.1")

    assert reply.status == 201, reply.body
    assert api.call("GET", "/users/me", token=reply.body["token"]).status == 200
    assert api.login("alice", PASSWORD).status == 201
    assert len(stack.messages()) == 1  # the email waits in the outbox
    assert stack.sent == []  # register never called SES


@pytest.mark.parametrize("error", DYNAMODB_ERRORS)
def test_register_whose_transaction_fails_answers_500_writes_nothing_and_sends_nothing(
    api: Api, stack: Stack, faults: Faults, error: tuple[str, int]
) -> None:
    faults.fail("dynamodb", "TransactWriteItems", *error)

    reply = api.register("alice", ip="192.0.2.1")

    assert_internal_error(reply)
    assert nothing_stored(stack)
    assert stack.emails == []
    faults.clear()
    assert api.register("alice", ip="192.0.2.1").status == 201  # the 500 was not counted


def test_register_whose_rate_limit_counter_fails_answers_500_and_writes_nothing(
    api: Api, stack: Stack, faults: Faults
) -> None:
    faults.fail("dynamodb", "UpdateItem")

    reply = api.register("alice", ip="192.0.2.1")

    assert_internal_error(reply)
    assert nothing_stored(stack)
    assert stack.items("CountersTable") == []
    assert stack.emails == []


# ---------------------------------------------------------------- login


@pytest.mark.parametrize("error", DYNAMODB_ERRORS)
def test_login_whose_session_write_fails_answers_500_and_opens_no_session(
    api: Api, stack: Stack, faults: Faults, token: str, error: tuple[str, int]
) -> None:
    before = stack.items("SessionsTable")
    faults.fail("dynamodb", "TransactWriteItems", *error)

    reply = api.login("alice", PASSWORD)

    assert_internal_error(reply)
    assert stack.items("SessionsTable") == before
    faults.clear()
    assert api.login("alice", PASSWORD).status == 201


def test_login_whose_rate_limit_counter_fails_answers_500_and_opens_no_session(
    api: Api, stack: Stack, faults: Faults, token: str
) -> None:
    before = stack.items("SessionsTable")
    faults.fail("dynamodb", "UpdateItem")

    reply = api.login("alice", PASSWORD)

    assert_internal_error(reply)
    assert stack.items("SessionsTable") == before


def test_login_whose_user_lookup_fails_answers_500(api: Api, faults: Faults, token: str) -> None:
    faults.fail("dynamodb", "Query")

    reply = api.login("alice", PASSWORD)

    assert_internal_error(reply)


# ---------------------------------------------------------------- GET /users/me


@pytest.mark.parametrize("error", DYNAMODB_ERRORS)
def test_get_me_whose_session_lookup_fails_answers_500(
    api: Api, faults: Faults, token: str, error: tuple[str, int]
) -> None:
    faults.fail("dynamodb", "BatchGetItem", *error)

    reply = api.call("GET", "/users/me", token=token)

    assert_internal_error(reply)


def test_get_me_still_answers_when_recording_session_use_fails(
    api: Api, stack: Stack, faults: Faults, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = clock.now() + 600
    monkeypatch.setattr(clock, "now", lambda: later)
    before = stack.items("SessionsTable")
    faults.fail("dynamodb", "UpdateItem")

    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 200, reply.body
    assert reply.body["username"] == "alice"
    assert stack.items("SessionsTable") == before


# ---------------------------------------------------------------- SSM

SSM_ERRORS = [
    pytest.param(("InternalServerError", 500), id="InternalServerError"),
    pytest.param(("ThrottlingException", 400), id="ThrottlingException"),
    pytest.param(("AccessDeniedException", 400), id="AccessDeniedException"),
]
ROUTES = ["GET /", "GET /users/me", "POST /register", "POST /login"]


def call(api: Api, route: str, token: str | None = None) -> Reply:
    if route == "GET /":
        return api.call("GET", "/", token=token)
    if route == "GET /users/me":
        return api.call("GET", "/users/me", token=token)
    if route == "POST /register":
        return api.register("bob", ip="192.0.2.50")
    return api.login("alice", PASSWORD)


def write_switches(stack: Stack, *names: str) -> None:
    """Write the switches' parameters without touching the functions' cached copy."""
    stack.write_switches(*names)


@pytest.mark.parametrize("error", SSM_ERRORS)
def test_a_cold_function_that_cannot_read_ssm_answers_500_on_every_endpoint(
    api: Api, stack: Stack, faults: Faults, error: tuple[str, int]
) -> None:
    faults.fail("ssm", "GetParameters", *error)

    replies = {route: call(api, route) for route in ROUTES}

    assert {route: (r.status, r.body) for route, r in replies.items()} == dict.fromkeys(
        ROUTES, (500, INTERNAL)
    )
    assert nothing_stored(stack)
    assert stack.items("CountersTable") == []


@pytest.mark.parametrize("error", SSM_ERRORS)
def test_a_cold_function_never_ignores_an_enabled_global_switch_because_ssm_failed(
    api: Api, stack: Stack, faults: Faults, error: tuple[str, int]
) -> None:
    write_switches(stack, "GLOBAL")
    faults.fail("ssm", "GetParameters", *error)

    reply = api.call("GET", "/")

    assert reply.status in (500, 503), reply.body  # failing closed either way; never open


def test_a_cold_function_recovers_once_ssm_answers_again(
    api: Api, faults: Faults, parameter_clock: Callable[[float], None]
) -> None:
    faults.fail("ssm", "GetParameters", code="ThrottlingException", status=400)
    assert api.call("GET", "/").status == 500
    faults.clear()
    parameter_clock(1.0)  # past the pause after a spent read budget (docs/operations.md)

    reply = api.call("GET", "/")

    assert reply.status == 200, reply.body


@pytest.mark.usefixtures("reread_every_request")
@pytest.mark.parametrize("error", [("InternalServerError", 500), ("ThrottlingException", 400)])
def test_a_warm_function_keeps_working_while_ssm_fails(
    api: Api, stack: Stack, faults: Faults, token: str, error: tuple[str, int]
) -> None:
    assert api.call("GET", "/users/me", token=token).status == 200  # a successful read: warm
    write_switches(stack, "GLOBAL")  # a read that succeeded now would close everything
    faults.fail("ssm", "GetParameters", *error)

    during = [
        api.call("GET", "/users/me", token=token),
        api.call("GET", "/"),
        api.login("alice", PASSWORD),
        api.register("bob", ip="192.0.2.50"),
    ]

    assert [r.status for r in during] == [200, 200, 201, 201]
    faults.clear()
    after = api.call("GET", "/")  # SSM answers again: proof that every request above asked it
    assert (after.status, after.body.get("feature")) == (503, 8)


@pytest.mark.usefixtures("reread_every_request")
@pytest.mark.parametrize("error", SSM_ERRORS)
def test_a_warm_function_keeps_the_switches_it_last_read_while_ssm_fails(
    api: Api, stack: Stack, faults: Faults, token: str, error: tuple[str, int]
) -> None:
    write_switches(stack, "GLOBAL")
    assert api.call("GET", "/").status == 503  # warm, with GLOBAL read
    faults.fail("ssm", "GetParameters", *error)

    during = [api.call("GET", "/"), api.call("GET", "/users/me", token=token), api.login("alice", PASSWORD)]

    assert [(r.status, r.body.get("feature")) for r in during] == [(503, 8)] * 3
    faults.clear()
    write_switches(stack)
    assert api.call("GET", "/").status == 200  # SSM answers again: the switch turned off meanwhile applies


@pytest.fixture
def reread_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cache: every request reads SSM (and the copy cached so far is dropped)."""
    monkeypatch.setenv("CONFIG_CACHE_SECONDS", "0")
    get_settings.cache_clear()
    container.reset()
