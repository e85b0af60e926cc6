"""The permission matrix: every registered endpoint, called through its function's real app by each
kind of caller, answers exactly what CONTRACT sections 3, 4 and 9 give that caller.

The expected outcome is derived from the seed's transcription (tests/seed_endpoints.py), never from the
service's Policy objects, so a Policy whose auth, staff flag, scope or openness to scoped sessions
drifts from the seed fails here by its behaviour (tests/unit/test_endpoint_registry.py compares the
declarations themselves). Everything runs on the in-memory fakes: no AWS, no moto.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from nimbus_core.domain.models import SecondFactor, Session, User
from nimbus_core.domain.scopes import Scope
from nimbus_core.factors import otp
from nimbus_core.http.app import NimbusApp
from nimbus_core.http.policy import Endpoint
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id, new_secret
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.template import function_specs, load_template
from tests.fakes import SETTINGS, FakeWorld, fake_world
from tests.samples import sample_user
from tests.seed_endpoints import BY_KEY, SEED_ENDPOINTS, SeedEndpoint

Kind = Literal[
    "anonymous",
    "normal session",
    "scoped without scope",
    "scoped with scope",
    "scoped with scope, on its own account",
    "scoped with scope, on another staff account",
    "staff without second factor",
    "staff with second factor",
]
KINDS: tuple[Kind, ...] = (
    "anonymous",
    "normal session",
    "scoped without scope",
    "scoped with scope",
    "scoped with scope, on its own account",
    "scoped with scope, on another staff account",
    "staff without second factor",
    "staff with second factor",
)

# The guard's refusals (CONTRACT sections 3, 4 and 6), as (status, code).
INVALID_SESSION = (401, "INVALID_SESSION_ERROR")
INSUFFICIENT_PERMISSIONS = (403, "INSUFFICIENT_PERMISSIONS_ERROR")
REQUIRES_SECOND_FACTOR = (401, "ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR")
REFUSALS = (INVALID_SESSION, INSUFFICIENT_PERMISSIONS, REQUIRES_SECOND_FACTOR)
NO_ROUTE = (404, "INVALID_ENDPOINT_ERROR")  # never the answer to a well-formed path
Outcome = tuple[int, str] | Literal["allowed"]

DOMAIN = "nimbus.test"
KILL_SWITCH = "3"  # a valid switch number (/killswitches/:id); none is enabled in a fresh world


# ------------------------------------------------------------------------------------------ the apps


def _apps() -> list[tuple[NimbusApp, Endpoint]]:
    """Every HTTP function's module-level app (as template.yaml lists them) and its endpoints."""
    found: list[tuple[NimbusApp, Endpoint]] = []
    for spec in function_specs(load_template()):
        if not spec.routes:  # the mail function is fed by a stream
            continue
        app = getattr(importlib.import_module(spec.handler_module), "app", None)
        assert isinstance(app, NimbusApp), f"{spec.handler_module} has no module-level NimbusApp `app`"
        found += [(app, endpoint) for endpoint in app.endpoints]
    return found


def _seed_path(path: str) -> str:
    """Declared ``/users/<uid>/sessions/<sid>`` -> the seed's ``/users/:uid/sessions/:sid``."""
    return re.sub(r"<(\w+)>", r":\1", path)


REGISTERED = _apps()


# ------------------------------------------------------------------------------------------ callers


@dataclass(frozen=True, slots=True)
class Who:
    """A caller with a session: their user's staff flag and second factor, the session's
    ``permissionFlags`` (None for a normal session), and whether the path's user is the caller."""

    staff: bool
    factor: bool
    flags: int | None
    own: bool = False
    staff_target: bool = False  # the path's user is another staff account

    @property
    def on_staff(self) -> bool:
        """Whether the path's user is a staff account (the caller's own, if staff, included)."""
        return self.staff_target or (self.own and self.staff)


def _bit(scope: str) -> int:
    return int(Scope[scope])


def _holdable(*, staff: bool) -> int:
    """Every bit a scoped session of such a user can hold, ALL excepted (STAFF_* need staff)."""
    return sum(
        int(s) for s in Scope if s is not Scope.ALL and (staff or not (s.name or "").startswith("STAFF_"))
    )


def _who(kind: Kind, seed: SeedEndpoint) -> Who | None:
    """The caller of ``kind`` on ``seed``'s endpoint (scoped sessions of staff endpoints belong to a
    staff user with a second factor, so that only the scope decides)."""
    if kind == "anonymous":
        return None
    if kind == "normal session":
        return Who(staff=False, factor=False, flags=None)
    if kind == "scoped without scope":
        # Every other bit the user could hold, but neither the endpoint's scope nor ALL.
        needed = _bit(seed.scope) if seed.scope else 0
        return Who(staff=seed.staff, factor=True, flags=_holdable(staff=seed.staff) & ~needed)
    if kind.startswith("scoped with scope"):
        # The scope alone; an endpoint without one gets ALL (CONTRACT 9: "ALL included").
        flags = _bit(seed.scope) if seed.scope else int(Scope.ALL)
        own, staff_target = kind.endswith("own account"), kind.endswith("staff account")
        return Who(staff=seed.staff, factor=True, flags=flags, own=own, staff_target=staff_target)
    if kind == "staff without second factor":
        return Who(staff=True, factor=False, flags=None)
    return Who(staff=True, factor=True, flags=None)


def _names_user(seed: SeedEndpoint) -> bool:
    """Whether the seed's path names a user (``/users/:id``, ``/users/:uid/...``)."""
    return re.match(r"/users/:(id|uid)\b", seed.path) is not None


def _grants(flags: int, scope: str | None) -> bool:
    """Whether scoped ``flags`` hold ``scope`` (ALL holds every scope)."""
    return scope is None or bool(flags & int(Scope.ALL)) or flags & _bit(scope) == _bit(scope)


def _expected(seed: SeedEndpoint, who: Who | None) -> Outcome:
    """CONTRACT section 4, steps 3 to 5, in that order, from the seed's row: the first that fires."""
    if seed.auth == "none":
        return "allowed"
    if who is None:  # step 3
        return "allowed" if seed.auth == "guest" else INVALID_SESSION
    steps: list[tuple[bool, Outcome]] = [
        (seed.auth == "guest", INVALID_SESSION),  # section 3: already logged in
        (seed.staff and not who.staff, INSUFFICIENT_PERMISSIONS),  # step 4
        (seed.staff and not who.factor, REQUIRES_SECOND_FACTOR),  # step 4 (on by default)
        (who.flags is not None and not seed.scoped_sessions, INSUFFICIENT_PERMISSIONS),  # step 5
        (who.flags is not None and not _grants(who.flags, seed.scope), INSUFFICIENT_PERMISSIONS),
        # Step 5, CONTRACT section 8: the path names the caller's own account where scoped sessions
        # may not (a body's ids are the endpoint's own rule, after validation).
        (
            who.flags is not None and who.own and not seed.scoped_self and _names_user(seed),
            INSUFFICIENT_PERMISSIONS,
        ),
        # Step 5, CONTRACT section 8 (staff by people): the path names a staff account, the
        # caller's own or another's, where a change would hand it to whoever holds the key.
        (
            who.flags is not None and who.on_staff and not seed.scoped_staff and _names_user(seed),
            INSUFFICIENT_PERMISSIONS,
        ),
    ]
    return next((refusal for fired, refusal in steps if fired), "allowed")


# ------------------------------------------------------------------------------------------ the matrix


@dataclass(frozen=True, slots=True)
class Case:
    """One endpoint called by one kind of caller."""

    app: NimbusApp
    endpoint: Endpoint
    seed: SeedEndpoint
    kind: Kind

    @property
    def id(self) -> str:
        return f"{self.endpoint.method} {self.endpoint.path}-{self.kind}"


MATRIX = [
    Case(app, endpoint, BY_KEY[key], kind)
    for app, endpoint in REGISTERED
    if (key := (endpoint.method, _seed_path(endpoint.path))) in BY_KEY
    for kind in KINDS
]


def _concrete(path: str, target_id: str) -> str:
    """Well-formed path parameters: the target user, fresh ids for sessions and second factors."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if path.startswith("/killswitches/"):
            return KILL_SWITCH
        if path.startswith("/domains/"):
            return DOMAIN
        if name == "sid" or (name == "id" and "/2fa/" in path):
            return new_id()
        assert name in {"id", "uid"}, f"no value for <{name}> in {path}"
        return target_id

    return re.sub(r"<(\w+)>", value, path)


def _user(world: FakeWorld, username: str, *, staff: bool = False, factor: bool = False) -> User:
    user = sample_user(new_id(), username, staff=staff)
    if factor:
        stamp = world.clock.iso()
        phone = SecondFactor(
            id=new_id(),
            type="totp",
            name="phone",
            created_at=stamp,
            updated_at=stamp,
            secret=otp.new_totp_secret(),
        )
        user = user.changed(second_factors={phone.id: phone})
    world.tx.commit(world.deps.users.create_ops(user))
    return user


def _token(world: FakeWorld, user: User, flags: int | None) -> str:
    """A live session of ``user`` (scoped when ``flags`` is set), as its Authorization header."""
    secret, now = new_secret(), world.clock.now()
    session = Session(
        user_id=user.id,
        id=new_id(),
        secret_hash=hash_secret(secret),
        name="matrix",
        exp=int(now) + 3600,
        created_at=iso(now),
        updated_at=iso(now),
        used_at=iso(now),
        permission_flags=flags,
    )
    world.tx.commit([world.deps.sessions.put_op(session)])
    return f"{user.id}.{session.id}.{secret}"


def _call(app: NimbusApp, method: str, path: str, token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json", "user-agent": "curl/8.1"}
    if token is not None:
        headers["authorization"] = token
    event = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "isBase64Encoded": False,
        "body": "{}",
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"])


@pytest.mark.parametrize("case", MATRIX, ids=[case.id for case in MATRIX])
def test_each_caller_gets_exactly_the_contracts_answer_on_every_endpoint(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = fake_world()
    monkeypatch.setattr(case.app, "deps", lambda: world.deps)
    world.deps.domains.put(DOMAIN, subdomains=True, now=world.clock.iso())
    who = _who(case.kind, case.seed)
    target = _user(world, "target", staff=who is not None and who.staff_target)
    token = None
    if who is not None:
        caller = _user(world, "caller", staff=who.staff, factor=who.factor)
        token = _token(world, caller, who.flags)
        if who.own:
            target = caller
    expected = _expected(case.seed, who)

    status, body = _call(case.app, case.endpoint.method, _concrete(case.endpoint.path, target.id), token)

    answered = (status, body.get("code", ""))
    if expected == "allowed":
        assert answered not in REFUSALS, f"refused, but the CONTRACT lets this caller through: {body}"
        assert status not in (500, 503), body
        assert answered != NO_ROUTE, "the path did not reach the endpoint"
    else:
        assert answered == expected, body


# ------------------------------------------------------------------------------------------ its reach


def test_the_matrix_covers_every_registered_endpoint_and_every_seed_row_with_every_caller() -> None:
    registered = [(e.method, _seed_path(e.path)) for _, e in REGISTERED]
    assert len(registered) == len(set(registered))
    assert sorted(registered) == sorted(BY_KEY), (
        f"registered only: {sorted(set(registered) - set(BY_KEY))}; "
        f"seed only: {sorted(set(BY_KEY) - set(registered))}"
    )
    covered = {(case.seed.key, case.kind) for case in MATRIX}
    assert covered == {(seed.key, kind) for seed in SEED_ENDPOINTS for kind in KINDS}
    assert len(MATRIX) == len(SEED_ENDPOINTS) * len(KINDS)
    assert all(case.seed.key == (case.endpoint.method, _seed_path(case.endpoint.path)) for case in MATRIX)


def test_the_matrix_expects_every_refusal_and_relies_on_the_default_settings() -> None:
    """Not vacuous: each refusal is expected somewhere, and staff need a second factor by default."""
    assert SETTINGS.staff_require_second_factor
    expected = {_expected(case.seed, _who(case.kind, case.seed)) for case in MATRIX}
    assert expected == {"allowed", *REFUSALS}
