"""An account's activity on the fakes (CONTRACT section 17): what each request records, from where,
that recording never fails a request, and the bound on failures. Requests go through the
functions' apps; ``drain_activity`` does what the activity function does with the outbox stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from activity_api.service import store

from accounts_api.routes import routes as account_routes
from auth_api.routes import routes as auth_routes
from nimbus_core.domain.activity import FAILURES_PER_HOUR, new_event
from nimbus_core.domain.errors import DependencyError
from nimbus_core.http.app import create_app
from nimbus_core.http.registry import EndpointRouter
from sessions_api.routes import routes as session_routes
from staff_api.routes import routes as staff_routes
from sweep_api.service import sweep_user
from tests.fakes import FakeWorld, drain_activity, fake_world
from tests.races import NO_FACTOR, PASSWORD, read, staff_member

FIREFOX = "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"


@pytest.fixture
def world() -> FakeWorld:
    return fake_world()


def _request(
    world: FakeWorld,
    routes: EndpointRouter,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    token: str | None = None,
    ip: str = "203.0.113.9",
) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json", "user-agent": FIREFOX}
    if token is not None:
        headers["authorization"] = token
    query = path.partition("?")[2]
    event = {
        "version": "2.0",
        "rawPath": path.partition("?")[0],
        "rawQueryString": query,
        "queryStringParameters": dict(p.split("=") for p in query.split("&")) if query else None,
        "headers": headers,
        "isBase64Encoded": False,
        "body": json.dumps(body) if body is not None else None,
        "requestContext": {"http": {"method": method, "path": path, "sourceIp": ip}, "stage": "$default"},
    }
    result = create_app(routes, deps=lambda: world.deps).resolve(event)
    return result["statusCode"], json.loads(result["body"])


def _register(world: FakeWorld, name: str = "alice") -> str:
    body = {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    status, answer = _request(world, auth_routes, "POST", "/register", body, ip="198.51.100.1")
    assert status == 201, answer
    return str(answer["token"])


def _login(world: FakeWorld, name: str, password: str, ip: str) -> int:
    status, _ = _request(
        world, auth_routes, "POST", "/login", {"username": name, "password": password}, ip=ip
    )
    return status


def _activity(world: FakeWorld, token: str, query: str = "") -> dict[str, Any]:
    drain_activity(world)
    status, answer = _request(world, account_routes, "GET", f"/users/me/activity{query}", token=token)
    assert status == 200, answer
    return answer


def test_a_sign_in_and_a_wrong_password_are_recorded_from_where_they_came_newest_first(
    world: FakeWorld,
) -> None:
    token = _register(world)
    assert _login(world, "alice", "wrong password", "198.51.100.7") == 401
    assert _login(world, "alice", PASSWORD, "198.51.100.8") == 201

    signed_in, failed, registered = _activity(world, token)["items"]

    assert (signed_in["type"], signed_in["outcome"], signed_in["method"]) == (
        "sign-in",
        "success",
        "password",
    )
    assert (signed_in["ip"], signed_in["device"]) == ("198.51.100.8", "Firefox 132 on Ubuntu")
    assert signed_in["sessionId"] is not None
    assert (failed["type"], failed["outcome"], failed["code"]) == (
        "sign-in",
        "failure",
        "INVALID_PASSWORD_ERROR",
    )
    assert (failed["ip"], failed["sessionId"]) == ("198.51.100.7", None)
    assert (registered["type"], registered["ip"]) == ("registered", "198.51.100.1")


def test_an_unknown_name_records_nothing_anywhere(world: FakeWorld) -> None:
    _register(world)

    assert _login(world, "nobody", PASSWORD, "198.51.100.7") == 404

    assert [e.type for e in drain_activity(world)] == ["registered"]


def test_a_request_whose_event_cannot_be_written_is_answered_as_without_it(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = _register(world)

    def down(*_args: object, **_kwargs: object) -> None:
        raise DependencyError("PutItem (activity event) failed: throttled")

    monkeypatch.setattr(world.deps.outbox, "record_event", down)

    assert _login(world, "alice", "wrong password", "198.51.100.7") == 401  # not a 500
    assert [e["type"] for e in _activity(world, token)["items"]] == ["registered"]  # the event is lost


def test_failures_past_the_hours_bound_are_counted_by_one_event(world: FakeWorld) -> None:
    user_id = read(world, _register(world)).user.id
    drain_activity(world)
    now = world.clock.now()
    hour_start = now - now % 3600

    for n in range(FAILURES_PER_HOUR + 5):
        store(world.deps, new_event(user_id, "sign-in", now=hour_start + n, outcome="failure", code="X"))
    store(world.deps, new_event(user_id, "sign-in", now=hour_start + 3600, outcome="failure", code="Y"))

    count, events = world.deps.activity.page(user_id, limit=100, offset=0)
    failures = [e for e in events if e.type == "sign-in"]
    [summary] = [e for e in events if e.type == "more-failures"]
    assert len(failures) == FAILURES_PER_HOUR + 1  # the next hour starts counting again
    assert summary.count == 5
    assert summary.at == new_event(user_id, "x", now=hour_start + FAILURES_PER_HOUR + 4).at  # the latest
    assert count == FAILURES_PER_HOUR + 1 + 1 + 1  # with the registration
    assert [e.type for e in events[:2]] == ["sign-in", "more-failures"]  # the summary ends its hour


def test_a_wrong_reverification_is_recorded_on_its_session_and_the_change_with_its_notice(
    world: FakeWorld,
) -> None:
    token = _register(world)
    session_id = read(world, token).session.id
    change = {"newPassword": "battery staple", "confirmNewPassword": "battery staple"}

    wrong, _ = _request(
        world, account_routes, "PUT", "/users/me/password", {**change, "password": "nope"}, token=token
    )
    right, _ = _request(
        world, account_routes, "PUT", "/users/me/password", {**change, "password": PASSWORD}, token=token
    )

    assert (wrong, right) == (401, 200)
    changed, refused, _ = _activity(world, token)["items"]
    assert (refused["type"], refused["code"], refused["sessionId"]) == (
        "reverify",
        "INVALID_PASSWORD_ERROR",
        session_id,
    )
    assert (changed["type"], changed["ip"], changed["sessionId"]) == (
        "password-changed",
        "203.0.113.9",
        session_id,
    )


def test_a_staff_members_action_says_staff_and_nothing_of_who_or_where() -> None:
    world = fake_world(NO_FACTOR)  # the staff member reverifies with the password alone
    staff_token, _ = staff_member(world)
    token = _register(world, "bob")
    bob = read(world, token).user.id

    status, _ = _request(
        world, staff_routes, "PUT", f"/users/{bob}/verify", {"password": PASSWORD}, token=staff_token
    )

    assert status == 200
    [verified, _] = _activity(world, token)["items"]
    assert (verified["type"], verified["device"], verified["ip"], verified["sessionId"]) == (
        "account-changed",
        "staff",
        None,
        None,
    )
    assert verified["details"] == ["Email address marked verified."]
    status, listed = _request(world, staff_routes, "GET", f"/users/{bob}/activity", token=staff_token)
    assert (status, listed["count"]) == (200, 2)


def test_revoking_sessions_is_recorded_with_how_many(world: FakeWorld) -> None:
    token = _register(world)
    assert _login(world, "alice", PASSWORD, "198.51.100.8") == 201

    status, _ = _request(
        world, session_routes, "DELETE", "/users/me/sessions/all?keepCurrent=true", token=token
    )

    assert status == 200
    revoked = _activity(world, token)["items"][0]
    assert (revoked["type"], revoked["details"], revoked["ip"]) == (
        "sessions-revoked",
        ["1 session revoked."],
        "203.0.113.9",
    )


def test_the_activity_is_paginated_with_the_total_and_goes_with_a_deleted_account(world: FakeWorld) -> None:
    token = _register(world)
    for n in range(3):
        assert _login(world, "alice", PASSWORD, f"198.51.100.{10 + n}") == 201

    page = _activity(world, token, "?limit=2&offset=1")

    assert page["count"] == 4
    assert [e["ip"] for e in page["items"]] == ["198.51.100.11", "198.51.100.10"]
    user_id = read(world, token).user.id
    del world.db.users[user_id]  # as the account's deletion leaves it for the sweep
    sweep_user(world.deps, user_id)
    assert world.deps.activity.page(user_id, limit=10, offset=0) == (0, [])
