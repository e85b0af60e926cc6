"""Scope enforcement on every endpoint that exists, walked from the registry.

For each registered endpoint that needs a session, three scoped sessions made through
POST /users/me/sessions call it: one holding exactly the endpoint's scope, one holding an unrelated
scope, and one holding ALL. The exact scope and ALL must get past the scope check (whatever the
endpoint then answers: 200, 400, 404 ...) without ever being asked for a password; the unrelated
scope must get 403 INSUFFICIENT_PERMISSIONS_ERROR. Endpoints closed to scoped sessions (account
deletion, scoped-session creation, password and address changes) refuse all three, whatever their
scopes; staff paths closed to a key's own account refuse all three when the path names it.

A new endpoint is walked automatically: nothing here lists endpoints.
"""

from __future__ import annotations

import importlib
import itertools
import re
from typing import Any

import pytest

from nimbus_core.domain.scopes import STAFF_BITS, Scope
from nimbus_core.http.policy import Auth, Endpoint
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.template import function_specs, load_template
from tests.integration.conftest import PARAMS, Api, Stack
from tests.staff import promote

PASSWORD = "correct horse"
UNRELATED = Scope.UPLOAD_FILE  # a file scope: no account or session endpoint may accept it
_ips = itertools.count(1)


def _endpoints() -> list[Endpoint]:
    found: list[Endpoint] = []
    for spec in function_specs(load_template()):
        if spec.routes:
            found += importlib.import_module(spec.handler_module).app.endpoints
    return found


ENDPOINTS = _endpoints()
WITH_SESSION = [e for e in ENDPOINTS if e.policy.auth is Auth.REQUIRED]


def _ip() -> str:
    n = next(_ips)
    return f"172.16.{n // 250 % 250}.{n % 250 + 1}"


def _key(api: Api, stack: Stack, *, staff: bool, flags: int) -> tuple[str, str]:
    """A fresh user (staff when asked) and a scoped session of it holding ``flags``."""
    username = f"s{next(_ips)}x{_ip().replace('.', '')}"
    registered = api.register(username=username, ip=_ip())
    assert registered.status == 201, registered.body
    token = registered.body["token"]
    user_id = token.split(".", maxsplit=1)[0]
    if staff:  # the flag first (STAFF_* scopes need it), the factor after (it would ask for it)
        promote(stack.dynamodb, stack.table("UsersTable"), user_id, with_factor=False)
    body = {"name": "walk", "permissionFlags": flags, "password": PASSWORD}
    created = api.call("POST", "/users/me/sessions", body, token=token, ip=_ip())
    assert created.status == 201, created.body
    if staff:  # staff endpoints require a second factor
        promote(stack.dynamodb, stack.table("UsersTable"), user_id, sealer=stack.sealer)
    return user_id, created.body["token"]


def _call(api: Api, endpoint: Endpoint, user_id: str, key: str, *, own: bool = False) -> Reply:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if endpoint.path.startswith("/domains/"):
            return PARAMS["DefaultDomain"]
        if name == "sid":
            return "me"
        # Where a scoped session may not name its own account (tests/integration/test_scoped_self)
        # or a staff account (test_staff_by_people), the walk names another one, unless ``own``:
        # what it checks there is the scope.
        return user_id if (endpoint.policy.scoped_self and endpoint.policy.scoped_staff) or own else new_id()

    path = re.sub(r"<(\w+)>", fill, endpoint.path)
    body: Any = {} if endpoint.method in {"POST", "PUT", "PATCH", "DELETE"} else None
    return api.call(endpoint.method, path, body, token=key, ip=_ip())


def _refused(reply: Reply) -> bool:
    return (reply.status, reply.body.get("code")) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")


def _asked_for_password(reply: Reply) -> bool:
    body = reply.body
    return body.get("code") == "INVALID_PASSWORD_ERROR" or "password" in (body.get("fields") or [])


@pytest.mark.parametrize("endpoint", WITH_SESSION, ids=[f"{e.method} {e.path}" for e in WITH_SESSION])
def test_scoped_sessions_meet_every_endpoints_scope(api: Api, stack: Stack, endpoint: Endpoint) -> None:
    policy = endpoint.policy
    staff = policy.staff
    exact = int(policy.scope) if policy.scope is not None else int(UNRELATED)
    # ALL, plus every other bit the user may hold (STAFF_* only for staff): "whatever their scopes".
    everything = int(Scope.ALL) | (int(sum(Scope)) & ~(0 if staff else int(STAFF_BITS)))

    outcomes, own, colleague = {}, {}, {}
    colleague_id = _key(api, stack, staff=True, flags=int(UNRELATED))[0] if not policy.scoped_staff else None
    for label, flags in (("unrelated", int(UNRELATED)), ("exact", exact), ("all", everything)):
        user_id, key = _key(api, stack, staff=staff, flags=flags)
        if (not policy.scoped_self or not policy.scoped_staff) and policy.target is not None:
            # First (a refusal changes nothing): the path naming the key's own account.
            own[label] = _call(api, endpoint, user_id, key, own=True)
        if colleague_id is not None:
            # And another staff member's account: a staff key acting on a staff account.
            colleague[label] = _call(api, endpoint, colleague_id, key, own=True)
        outcomes[label] = _call(api, endpoint, user_id, key)
    # Closed to keys on their own account, and on staff accounts where a change would hand the
    # account over, whatever their scopes (CONTRACT section 8).
    assert all(_refused(r) for r in own.values()), own
    assert all(_refused(r) for r in colleague.values()), colleague

    if not policy.scoped_sessions:
        assert [_refused(r) for r in outcomes.values()] == [True, True, True], outcomes
        return
    unrelated_allowed = policy.scope is None
    assert _refused(outcomes["unrelated"]) is not unrelated_allowed, outcomes["unrelated"]
    for label in ("exact", "all"):
        reply = outcomes[label]
        assert not _refused(reply), (label, reply)
        assert reply.status != 401, (label, reply)
        assert not _asked_for_password(reply), (label, reply)
        assert reply.status < 500, (label, reply)


def test_the_walk_covers_every_endpoint_but_the_sessionless_ones() -> None:
    sessionless = {(e.method, e.path) for e in ENDPOINTS if e.policy.auth is not Auth.REQUIRED}
    assert sessionless == {
        ("POST", "/register"),
        ("POST", "/login"),
        ("POST", "/login/passkey"),
        ("PUT", "/users/verify"),
        ("POST", "/users/recover"),
        ("PUT", "/users/recover"),
        ("GET", "/"),
        ("GET", "/openapi.json"),
    }
    assert len(WITH_SESSION) == len(ENDPOINTS) - len(sessionless)
