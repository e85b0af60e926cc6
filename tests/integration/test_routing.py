"""Routing: GET /, the JSON 404 fallback, trailing slashes, and the headers every response carries."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import Api, Faults, Stack

INVALID_ENDPOINT = {"code": "INVALID_ENDPOINT_ERROR", "message": "Invalid Endpoint"}


def header(reply: Reply, name: str) -> str | None:
    return next((v for k, v in reply.headers.items() if k.lower() == name.lower()), None)


def test_get_root_names_the_service_and_its_version(api: Api) -> None:
    reply = api.call("GET", "/")

    assert reply.status == 200, reply.body
    assert reply.body == {"name": "nimbus", "version": "0.1.0"}
    assert reply.function == "AdminFunction"


def test_get_root_needs_no_session_and_ignores_an_invalid_one(api: Api) -> None:
    reply = api.call("GET", "/", token="garbage")

    assert reply.status == 200, reply.body
    assert reply.body == {"name": "nimbus", "version": "0.1.0"}


UNKNOWN_ROUTES = [
    ("GET", "/nope"),
    ("POST", "/"),
    ("DELETE", "/"),
    ("GET", "/login"),
    ("PUT", "/login"),
    ("GET", "/register"),
    ("PATCH", "/register"),
    ("PATCH", "/users/me"),
    ("POST", "/users/me"),
    ("POST", "/users"),
    ("PUT", "/users/me/ban"),
    ("DELETE", "/users/me/staff"),
    ("PUT", "/users/me/sessions"),
    ("GET", "/users/me/sessions/all"),
    ("PATCH", "/users/01M804N41KYSHFMGYX2M1P11M9/sessions/all"),
    ("POST", "/users/01M804N41KYSHFMGYX2M1P11M9"),
    ("GET", "/api/users/me"),
    ("GET", "/users/me/extra/segments"),
    ("OPTIONS", "/users/me"),
    ("GET", "/%2e%2e/etc/passwd"),
    ("PATCH", "/users/me%2F"),  # GET would be GET /users/{id} with the id "me%2F"
    # Deployed, the console is on a static host, never the API's: its paths are unknown routes here.
    ("GET", "/console/app.js"),
    ("GET", "/console/../x"),
    ("GET", "/console/%2e%2e/x"),
    ("GET", "/console/..%2f..%2fpyproject.toml"),
]


def test_an_unknown_route_or_method_answers_invalid_endpoint_as_json(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for method, path in UNKNOWN_ROUTES:
        with subtests.test(method=method, path=path):
            reply = api.call(method, path, {"username": "alice", "password": "correct horse"})

            assert reply.status == 404, reply.body
            assert reply.body == INVALID_ENDPOINT
            assert header(reply, "Content-Type") == "application/json"
            assert header(reply, "Cache-Control") == "no-store"
            assert stack.items("UsersTable") == []


def test_an_unknown_route_answers_404_even_with_a_valid_session(api: Api) -> None:
    token = api.register().body["token"]

    reply = api.call("GET", "/users/me/nothing", token=token)

    assert reply.status == 404, reply.body
    assert reply.body == INVALID_ENDPOINT


def test_a_trailing_slash_is_tolerated_on_get_users_me(api: Api) -> None:
    token = api.register().body["token"]

    reply = api.call("GET", "/users/me/", token=token)

    assert reply.status == 200, reply.body
    assert reply.body["username"] == "alice"
    assert reply.function == "AccountsFunction"


def test_a_trailing_slash_is_tolerated_on_register_and_login(api: Api) -> None:
    registered = api.call(
        "POST", "/register/", {"username": "alice", "email": "alice@example.com", "password": "correct horse"}
    )
    assert registered.status == 201, registered.body

    logged_in = api.call("POST", "/login/", {"username": "alice", "password": "correct horse"})
    assert logged_in.status == 201, logged_in.body


def test_a_query_string_does_not_change_the_route(api: Api) -> None:
    reply = api.call("GET", "/?limit=5&x=y")

    assert reply.status == 200, reply.body
    assert reply.body == {"name": "nimbus", "version": "0.1.0"}


def _ok_root(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.call("GET", "/")


def _created(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.register()


def _me(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.call("GET", "/users/me", token=api.register().body["token"])


def _bad_body(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.call("POST", "/register", raw="{")


def _unauthorized(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.call("GET", "/users/me")


def _wrong_password(api: Api, stack: Stack, faults: Faults) -> Reply:
    api.register()
    return api.login(password="wrong horse")


def _not_found(api: Api, stack: Stack, faults: Faults) -> Reply:
    return api.call("GET", "/nope")


def _conflict(api: Api, stack: Stack, faults: Faults) -> Reply:
    api.register(ip="192.0.2.1")
    return api.register(ip="192.0.2.2")


def _ratelimited(api: Api, stack: Stack, faults: Faults) -> Reply:
    api.register("alice")
    return api.register("bob")


def _internal(api: Api, stack: Stack, faults: Faults) -> Reply:
    faults.fail("dynamodb", "TransactWriteItems")
    return api.register()


def _unavailable(api: Api, stack: Stack, faults: Faults) -> Reply:
    stack.set_switches("GLOBAL")
    return api.call("GET", "/")


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (_ok_root, 200),
        (_me, 200),
        (_created, 201),
        (_bad_body, 400),
        (_unauthorized, 401),
        (_wrong_password, 401),
        (_not_found, 404),
        (_conflict, 409),
        (_ratelimited, 429),
        (_internal, 500),
        (_unavailable, 503),
    ],
)
def test_every_response_is_json_and_not_cached(
    api: Api, stack: Stack, faults: Faults, make: Callable[[Api, Stack, Faults], Reply], status: int
) -> None:
    reply = make(api, stack, faults)

    assert reply.status == status, reply.body
    assert header(reply, "Content-Type") == "application/json"
    assert header(reply, "Cache-Control") == "no-store"
    assert isinstance(reply.body, dict)
    if status >= 400:
        assert {"code", "message"} <= set(reply.body)
