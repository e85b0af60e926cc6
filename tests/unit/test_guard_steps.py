"""The guard's steps answer exactly what they declare (the OpenAPI document lists it from them).

Each case drives one request through a real app on the fakes, with the input that makes one step
refuse; the step that raised is found by watching every step hand the request on. The refusal is
one that step declares for the endpoint, and every error a step declares is answered by some case.
A request several steps would refuse is answered by the earliest in the contract's order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pydantic import Field

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import SecondFactor
from nimbus_core.domain.ratelimits import Per, RateLimit
from nimbus_core.domain.scopes import Scope as Scopes
from nimbus_core.http.app import create_app
from nimbus_core.http.guard import STEPS, Request, guard_errors, steps_for
from nimbus_core.http.policy import Auth, Endpoint, Policy
from nimbus_core.http.registry import EndpointRouter, UnguardedRouteError
from nimbus_core.http.request_input import MAX_BODY_BYTES
from nimbus_core.http.responses import Response, json_response
from nimbus_core.http.steps.base import Passage, Proceed, Refusal, Step
from nimbus_core.http.steps.input import Input
from nimbus_core.http.steps.killswitches import KillSwitches
from nimbus_core.http.steps.ratelimit import RateLimit as RateLimitStep
from nimbus_core.http.steps.reverification import Reverification
from nimbus_core.http.steps.scope import Scope
from nimbus_core.http.steps.session import Session
from nimbus_core.http.steps.siblings import LiteralSiblings
from nimbus_core.http.steps.staff import Staff
from nimbus_core.http.steps.target import Target
from nimbus_core.http.validation import Body, Query, QueryBool
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.session_issuer import new_session
from tests.fakes import FakeWorld, fake_world
from tests.races import PASSWORD, read, register, staff_member

# Upstream's TOTP secrets are 16 base32 characters (80 bits).
SEED = "JBSWY3DPEHPK3PXP"
ONCE = RateLimit("test", 1, 60, Per.IP)


class NameBody(Body):
    name: str = Field(max_length=8)


class Flags(Query):
    include_self: QueryBool = Field(False, alias="include-self")


def _plain(request: Request) -> Response:
    return json_response(200, {})


def _named(request: Request[NameBody]) -> Response:
    return json_response(200, {})


def _flagged(request: Request[None, Flags]) -> Response:
    return json_response(200, {})


def _target(request: Request) -> Response:
    request.target()
    return json_response(200, {})


@dataclass(frozen=True)
class Case:
    """One request that one step refuses: who calls (``caller``), what they send, and how."""

    step: type[Step]
    answers: ErrorCode
    policy: Policy = field(default_factory=Policy)
    route: Callable[..., Response] = _plain
    path: str = "/x"
    caller: str = "none"  # none, user, staff, scoped, factor (a user with a TOTP factor)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] | None = None
    switches: frozenset[KillSwitch] = frozenset()
    before: int = 0  # requests sent first, alike (a rate limit's earlier hits, wrong passwords)
    first: Any = None  # the body of those requests, when not ``body``


def _case_id(case: Case) -> str:
    return f"{case.step.__name__}-{case.answers.name}"


_STAFF = Policy(staff=True)
_REVERIFY = Policy(reverify=True)
_BODY = {"name": "n"}
CASES = [
    Case(LiteralSiblings, ErrorCode.INVALID_ENDPOINT_ERROR, Policy(auth=Auth.NONE), path="/x/<id>"),
    Case(KillSwitches, ErrorCode.SERVICE_UNAVAILABLE_ERROR, switches=frozenset({KillSwitch.GLOBAL})),
    Case(Session, ErrorCode.INVALID_SESSION_ERROR),
    Case(Session, ErrorCode.INVALID_SESSION_ERROR, Policy(auth=Auth.GUEST), caller="user"),
    Case(Staff, ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR, _STAFF, caller="user"),
    Case(Staff, ErrorCode.ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR, _STAFF, caller="staff"),
    Case(Scope, ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR, Policy(scope=Scopes.SESSION_READ), caller="scoped"),
    Case(Scope, ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR, Policy(scoped_sessions=False), caller="scoped"),
    Case(Input, ErrorCode.INVALID_BODY_ERROR, route=_named, caller="user", body="{"),
    Case(Input, ErrorCode.BODY_TOO_LARGE_ERROR, route=_named, caller="user", body="x" * (MAX_BODY_BYTES + 1)),
    Case(Input, ErrorCode.MISSING_FIELDS_ERROR, route=_named, caller="user", body={}),
    Case(Input, ErrorCode.INVALID_FIELDS_ERROR, route=_named, caller="user", body={"name": "n" * 9}),
    Case(Input, ErrorCode.INVALID_FIELDS_ERROR, route=_flagged, caller="user", query={"include-self": "x"}),
    Case(
        Input,
        ErrorCode.INVALID_FIELDS_ERROR,
        Policy(auth=Auth.NONE, names_session=True),
        headers={"x-session-name": " "},
    ),
    Case(Input, ErrorCode.INVALID_BODY_ERROR, _REVERIFY, caller="user", body="[]"),
    Case(RateLimitStep, ErrorCode.RATELIMITED_ERROR, Policy(auth=Auth.NONE, rate_limit=ONCE), before=1),
    Case(Reverification, ErrorCode.MISSING_FIELDS_ERROR, _REVERIFY, caller="user", body={}),
    Case(Reverification, ErrorCode.INVALID_PASSWORD_ERROR, _REVERIFY, caller="user", body={"password": "no"}),
    Case(
        Reverification,
        ErrorCode.RATELIMITED_ERROR,
        _REVERIFY,
        caller="user",
        body={"password": "no"},
        before=5,
    ),
    Case(
        Reverification,
        ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR,
        _REVERIFY,
        caller="factor",
        body={"password": PASSWORD},
    ),
    Case(
        Reverification,
        ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR,
        _REVERIFY,
        caller="factor",
        body={"2fa": {"token": "t", "type": "sms", "code": "123456"}},
    ),
    Case(
        Reverification,
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
        _REVERIFY,
        caller="factor",
        body={"2fa": {"token": "not a challenge", "type": "totp", "code": "123456"}},
    ),
    # Answered when the route asks for the user the path names: here, one that does not exist.
    Case(Target, ErrorCode.INVALID_USER_ERROR, Policy(target="id"), _target, "/x/<id>", "user"),
]


def _token(world: FakeWorld, caller: str) -> str | None:
    """A session of the kind ``caller`` names (staff members here have a second factor only when
    the case wants none: ``staff`` is one without)."""
    if caller == "none":
        return None
    if caller == "staff":
        return staff_member(world)[0]
    token = register(world).token
    user = read(world, token)
    if caller == "scoped":  # an API key of the same user
        key = new_session(
            user.user,
            name="ci",
            lifetime=3600,
            now=world.clock.now(),
            permission_flags=int(Scopes.ACCOUNT_MODIFY),
        )
        world.tx.commit([world.deps.sessions.put_op(key.session)])
        return key.token
    if caller == "factor":
        stamp = world.clock.iso()
        phone = SecondFactor(
            id="f1", type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret=SEED
        )
        world.tx.commit(
            world.deps.users.change_ops(user.user, user.user.changed(second_factors={"f1": phone}))
        )
    return token


def _event(case: Case, path: str, token: str | None) -> dict[str, Any]:
    headers = {"content-type": "application/json", **case.headers}
    if token is not None:
        headers["authorization"] = token
    body = case.body if isinstance(case.body, str) or case.body is None else json.dumps(case.body)
    return {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "&".join(f"{k}={v}" for k, v in (case.query or {}).items()),
        "queryStringParameters": case.query,
        "headers": headers,
        "isBase64Encoded": False,
        "body": body,
        "requestContext": {
            "http": {"method": "POST", "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }


def _watch_refusals(monkeypatch: pytest.MonkeyPatch) -> list[Step]:
    """The steps that refuse from now on, each before it handed the request on (its own refusal)."""
    refused: list[Step] = []
    for kind in {type(step) for step in STEPS}:

        def run(self: Step, passage: Passage, proceed: Proceed, _original: Any = kind.run) -> Response:
            handed_on = False

            def onward() -> Response:
                nonlocal handed_on
                handed_on = True
                return proceed()

            try:
                response: Response = _original(self, passage, onward)
                return response
            except NimbusError:
                if not handed_on:
                    refused.append(self)
                raise

        monkeypatch.setattr(kind, "run", run)
    return refused


def _answer(case: Case, monkeypatch: pytest.MonkeyPatch) -> tuple[Endpoint, list[Step], Refusal]:
    """The endpoint, the steps that refused on their own, and what the request answered."""
    world = fake_world()
    world.config.switches = set(case.switches)
    routes = EndpointRouter(models=__name__)
    # A sibling spelling "all" literally (with another method), so that /x/all is no value of /x/<id>.
    siblings = ["/x/all"] if "<" in case.path else []
    routes.endpoint("POST", case.path, case.policy)(case.route)
    for sibling in siblings:
        routes.endpoint("GET", sibling, Policy(auth=Auth.NONE))(_plain)
    app = create_app(routes, deps=lambda: world.deps)
    token = _token(world, case.caller)
    path = case.path.replace("<id>", "all" if case.step is LiteralSiblings else new_id())
    for _ in range(case.before):
        app.resolve(_event(case if case.first is None else replace(case, body=case.first), path, token))
    refused = _watch_refusals(monkeypatch)
    result = app.resolve(_event(case, path, token))
    answered = json.loads(result["body"])
    (endpoint,) = [e for e in app.endpoints if e.path == case.path]
    return endpoint, refused, (result["statusCode"], ErrorCode[answered["code"]])


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_steps_refusal_is_one_it_declares_for_the_endpoint(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, refused, answered = _answer(case, monkeypatch)
    (step,) = [s for s in STEPS if type(s) is case.step]

    assert step in steps_for(endpoint)
    assert answered == (case.answers.status, case.answers)
    assert answered in step.errors(endpoint)
    assert answered in guard_errors(endpoint)
    if case.step is Target:  # answered by the route, when it asks for the target
        assert refused == []
    else:
        assert refused == [step]


# Requests that several steps would refuse: the earliest in the contract's order answers.
_MANY = Policy(staff=True, scope=Scopes.SESSION_READ, rate_limit=ONCE, reverify=True)
_LIMITED = Policy(rate_limit=ONCE, reverify=True)
_ALL_CLEAR = {"name": "n", "password": PASSWORD}
ORDER = [
    Case(
        KillSwitches,
        ErrorCode.SERVICE_UNAVAILABLE_ERROR,
        _MANY,
        _named,
        body="{",
        switches=frozenset({KillSwitch.GLOBAL}),
    ),
    Case(Session, ErrorCode.INVALID_SESSION_ERROR, _MANY, _named, body="{"),
    Case(Staff, ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR, _MANY, _named, caller="scoped", body="{"),
    Case(
        Scope,
        ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR,
        replace(_MANY, staff=False),
        _named,
        caller="scoped",
        body="{",
    ),
    Case(
        Input,
        ErrorCode.INVALID_BODY_ERROR,
        _LIMITED,
        _named,
        caller="user",
        body="{",
        before=1,
        first=_ALL_CLEAR,
    ),
    Case(
        RateLimitStep,
        ErrorCode.RATELIMITED_ERROR,
        _LIMITED,
        _named,
        caller="user",
        body={"name": "n"},
        before=1,
    ),
]


@pytest.mark.parametrize("case", ORDER, ids=_case_id)
def test_a_request_several_steps_would_refuse_gets_the_earliest_ones_answer(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, refused, answered = _answer(case, monkeypatch)

    assert answered == (case.answers.status, case.answers)
    assert [type(step) for step in refused] == [case.step]


def test_every_error_a_step_declares_is_answered_by_a_case() -> None:
    for step in STEPS:
        declared = {
            refusal for case in CASES if type(step) is case.step for refusal in step.errors(_declared(case))
        }
        answered = {(case.answers.status, case.answers) for case in CASES if type(step) is case.step}
        assert declared == answered, type(step).__name__


def _declared(case: Case) -> Endpoint:
    routes = EndpointRouter(models=__name__)
    routes.endpoint("POST", case.path, case.policy)(case.route)
    (endpoint,) = routes.endpoints
    return endpoint


def test_a_step_applies_only_where_its_policy_field_is_set() -> None:
    plain = _declared(Case(Session, ErrorCode.INVALID_SESSION_ERROR, Policy(auth=Auth.NONE)))

    assert [type(s).__name__ for s in steps_for(plain)] == ["ReadToken", "KillSwitches", "StoreChallenge"]
    assert guard_errors(plain) == {
        (500, ErrorCode.INTERNAL_SERVER_ERROR),
        (503, ErrorCode.SERVICE_UNAVAILABLE_ERROR),
    }


@pytest.mark.parametrize(
    "policy",
    [
        Policy(auth=Auth.NONE, staff=True),
        Policy(auth=Auth.GUEST, scope=Scopes.SESSION_READ),
        Policy(auth=Auth.NONE, reverify=True),
        Policy(auth=Auth.NONE, target="id"),
        Policy(auth=Auth.GUEST, scoped_self=False),
    ],
)
def test_the_app_refuses_a_policy_whose_checks_no_step_would_run(policy: Policy) -> None:
    # Staff, scope, reverification... judge a caller: without a session required, nobody is judged.
    routes = EndpointRouter()
    routes.endpoint("POST", "/x/<id>", policy)(_plain)

    with pytest.raises(UnguardedRouteError, match=r"POST /x/<id>: .* the policy requires no session"):
        create_app(routes, deps=lambda: fake_world().deps)
