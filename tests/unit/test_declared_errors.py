"""Errors found when each route's errors became data next to its declaration (``errors=``): the
route answers them (a race landed between its read and its write, on the fakes), and the OpenAPI
document lists them, which it did not while they were read from docstring prose."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factors_api import service as factors
from factors_api.routes import routes as factor_routes
from nimbus_core.accounts.notices import STAFF
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.http.app import create_app
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.sessions.auth import Caller
from nimbus_tools.openapi import endpoint_errors
from sessions_api.routes import routes as session_routes
from tests.fakes import FakeWorld, fake_world
from tests.races import NO_FACTOR, PASSWORD, code, lands_first, read, register, staff_member


def _documented(routes: EndpointRouter, method: str, path: str, status: int) -> list[str]:
    (endpoint,) = [e for e in routes.endpoints if (e.method, e.path) == (method, path)]
    return endpoint_errors(endpoint).get(status, [])


def _call(
    world: FakeWorld, routes: EndpointRouter, token: str, method: str, path: str, **parts: Any
) -> tuple[int, dict[str, Any]]:
    """One request through the function's app, as API Gateway sends it (``query``, ``body``)."""
    event = {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "&".join(f"{k}={v}" for k, v in parts.get("query", {}).items()),
        "queryStringParameters": parts.get("query"),
        "headers": {"authorization": token, "content-type": "application/json"},
        "isBase64Encoded": False,
        "body": json.dumps(parts["body"]) if "body" in parts else None,
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = create_app(routes, deps=lambda: world.deps).resolve(event)
    return result["statusCode"], json.loads(result["body"])


def _with_a_factor(world: FakeWorld, user: User) -> User:
    stamp = world.clock.iso()
    phone = SecondFactor(
        id="f1", type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret="A" * 32
    )
    after: User = user.changed(second_factors={phone.id: phone})
    world.tx.commit(world.deps.users.change_ops(user, after))
    return after


# ------------------------------------------------------ bulk factor removal, racing another removal


BULK_REMOVALS = [
    ("DELETE", "/users/me/2fa"),
    ("DELETE", "/users/me/2fa/all"),
    ("DELETE", "/users/<uid>/2fa"),
    ("DELETE", "/users/<uid>/2fa/all"),
]


@pytest.mark.parametrize(("method", "path"), BULK_REMOVALS)
def test_a_bulk_factor_removal_documents_404_for_a_factor_removed_meanwhile(method: str, path: str) -> None:
    assert "INVALID_SECOND_FACTOR_ERROR" in _documented(factor_routes, method, path, 404)


@pytest.mark.parametrize("path", ["/users/{uid}/2fa", "/users/{uid}/2fa/all"])
def test_a_staff_bulk_factor_removal_racing_another_removal_answers_404_and_removes_nothing_more(
    monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    world = fake_world(NO_FACTOR)
    token, _ = staff_member(world)
    bob = _with_a_factor(world, read(world, register(world, "bob").token).user)
    lands_first(
        world, monkeypatch, lambda: factors.remove_factors(world.deps, bob, ["f1"], actor=STAFF, now=0)
    )

    body: dict[str, Any] = {"password": PASSWORD} | ({"ids": ["f1"]} if path.endswith("2fa") else {})
    status, answer = _call(world, factor_routes, token, "DELETE", path.format(uid=bob.id), body=body)

    assert (status, answer["code"]) == (404, "INVALID_SECOND_FACTOR_ERROR")
    assert world.deps.users.get(bob.id) is not None


def test_the_callers_own_bulk_removal_racing_another_removal_answers_404() -> None:
    """What DELETE /users/me/2fa and /all call (their reverification asks this user's factor)."""
    world = fake_world()
    alice = _with_a_factor(world, read(world, register(world).token).user)
    factors.remove_factors(world.deps, alice, ["f1"], actor=STAFF, now=0)  # another session's removal

    assert code(lambda: factors.remove_factors(world.deps, alice, ["f1"], actor=STAFF, now=0)) is (
        ErrorCode.INVALID_SECOND_FACTOR_ERROR
    )


# -------------------------------------------- revoking every session, the account deleted meanwhile


def test_revoking_all_of_ones_sessions_documents_404_for_an_account_deleted_meanwhile() -> None:
    assert "INVALID_USER_ERROR" in _documented(session_routes, "DELETE", "/users/me/sessions/all", 404)


def test_revoking_all_of_ones_sessions_as_the_account_is_deleted_answers_404_invalid_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from accounts_api import service as accounts

    world = fake_world()
    token = register(world).token
    alice: Caller = read(world, token)
    lands_first(world, monkeypatch, lambda: accounts.delete_account(world.deps, alice))

    status, answer = _call(
        world, session_routes, token, "DELETE", "/users/me/sessions/all", query={"include-self": "true"}
    )

    assert (status, answer["code"]) == (404, "INVALID_USER_ERROR")
    assert world.deps.users.get(alice.user.id) is None
