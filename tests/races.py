"""Races on the fakes: another request made to land inside a change's read-then-write window.

A request reads the caller (and the account it changes) when it authenticates, and writes when it
commits; :func:`lands_first` runs a concurrent request, to its end, just before the change's next
commit, so that request lands after the change's read and before its write.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.app import create_app
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.session_issuer import IssuedSession
from nimbus_core.sessions.tokens import parse_session_token
from staff_api.routes import routes as staff_routes
from tests.fakes import SETTINGS, FakeWorld

PASSWORD = "correct horse"
# Staff without a second factor: the deployment setting off, so that the password alone reverifies.
NO_FACTOR = replace(SETTINGS, staff_require_second_factor=False)


def register(world: FakeWorld, username: str = "alice") -> IssuedSession:
    """A new user, signed in: their first session."""
    body = RegisterBody.model_validate(
        {"username": username, "email": f"{username}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="Firefox 132 on Ubuntu", now=world.clock.now())


def login(world: FakeWorld, username: str = "alice", password: str = PASSWORD) -> IssuedSession:
    """Another session of an existing user."""
    body = LoginBody.model_validate({"username": username, "password": password})
    return auth.login(world.deps, body, session_name="curl 8 on an unknown OS", now=world.clock.now())


def caller_of(world: FakeWorld, token: str, *, target_id: str | None = None) -> Caller | None:
    """The caller ``token`` authenticates now, or None when its session no longer stands."""
    parsed = parse_session_token(token)
    assert parsed is not None
    return authenticate(world.deps, parsed, world.clock.now(), target_id=target_id)


def read(world: FakeWorld, token: str) -> Caller:
    """The caller as a request reads it when it authenticates (its password proven against this)."""
    caller = caller_of(world, token)
    assert caller is not None
    return caller


def lands_first(world: FakeWorld, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[], object]) -> None:
    """Run ``concurrent`` (another request, to its end) just before the next commit: it lands after
    the change's read and before the change's write."""
    commit = world.tx.commit
    pending = [concurrent]

    def racing(ops: Any) -> None:
        if pending:
            pending.pop()()
        commit(ops)

    monkeypatch.setattr(world.tx, "commit", racing)


def code(action: Callable[[], object]) -> ErrorCode:
    """The contract error ``action`` answers (it must answer one)."""
    with pytest.raises(NimbusError) as raised:
        action()
    return raised.value.code


def staff_member(world: FakeWorld, username: str = "moderator") -> tuple[str, str]:
    """A staff member's session token and id."""
    token = register(world, username).token
    user = read(world, token).user
    world.tx.commit(world.deps.users.change_ops(user, user.changed(staff=True)))
    return token, user.id


def call(
    world: FakeWorld,
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    routes: EndpointRouter = staff_routes,
) -> tuple[int, dict[str, Any]]:
    """One request through a function's app (the staff function's unless ``routes`` says another),
    as API Gateway sends it: the status and the JSON answer."""
    app = create_app(routes, deps=lambda: world.deps)
    event = {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": token, "content-type": "application/json"},
        "isBase64Encoded": False,
        "body": json.dumps(body) if body is not None else None,
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"])
