"""The guard applies CONTRACT section 4's checks in order, on a tiny app with the fake ports."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, cast

import pytest
from pydantic import Field

from nimbus_core.domain.errors import DependencyError, SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import Session, User
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.domain.ratelimits import Per, RateLimit
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.app import NimbusApp, create_app, create_handler
from nimbus_core.http.app import logger as app_logger
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, Response, json_response, success
from nimbus_core.http.validation import Body, Query, QueryBool
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.local.inprocess import LambdaContextStub
from tests.fakes import FakeConfig, fake_world

USER_ID, SESSION_ID, SECRET = new_id(), new_id(), "s" * 43
TOKEN = f"{USER_ID}.{SESSION_ID}.{SECRET}"
LIMIT = RateLimit("test", 2, 60, Per.IP, frozenset({404}))


# The models these tests' routes name (request: Request[NameBody]): their routers name this module.
class NameBody(Body):
    name: str


class Flags(Query):
    include_self: QueryBool = Field(False, alias="include-self")


@dataclass
class Caller:
    user: User
    session: Session


def _caller(*, staff: bool = False, flags: int | None = None) -> Caller:
    user = User(
        id=USER_ID,
        username="u",
        email="u@x.io",
        password_hash="h",
        created_at="2027-01-15T08:00:00.250Z",
        updated_at="2027-01-15T08:00:00.250Z",
        domain="d",
        staff=staff,
    )
    session = Session(
        user_id=USER_ID,
        id=SESSION_ID,
        secret_hash=hash_secret(SECRET),
        name="n",
        exp=2**40,
        created_at="2027-01-15T08:00:00.250Z",
        updated_at="2027-01-15T08:00:00.250Z",
        used_at="2027-01-15T08:00:00.250Z",
        permission_flags=flags,
    )
    return Caller(user=user, session=session)


class Fakes:
    """The fake deployment seen through what these tests look at."""

    def __init__(self) -> None:
        self.world = fake_world()

    @property
    def switches(self) -> set[KillSwitch]:
        return self.world.config.switches

    @switches.setter
    def switches(self, value: set[KillSwitch]) -> None:
        self.world.config.switches = set(value)

    @property
    def caller(self) -> Caller | None:
        return None

    @caller.setter
    def caller(self, value: Caller | None) -> None:
        assert value is not None
        self.world.db.users[value.user.id] = value.user
        self.world.db.sessions[(value.user.id, value.session.id)] = value.session

    def _count(self, call: str) -> int:
        return self.world.db.calls.count(call)

    @property
    def hits(self) -> int:
        return self._count("counters.hit")

    @property
    def released(self) -> int:
        return self._count("counters.release")

    @property
    def authentications(self) -> int:
        return self._count("sessions.get_with_user")


@pytest.fixture
def fakes() -> Fakes:
    return Fakes()


_CURRENT: list[Fakes] = []


@pytest.fixture(autouse=True)
def _current(fakes: Fakes) -> Any:
    _CURRENT[:] = [fakes]
    yield
    _CURRENT.clear()


def _app(policy: Policy, status: int = 200, *, body: bool = False) -> NimbusApp:
    """An app with one route, POST /x, guarded by ``policy``; with ``body``, it takes a NameBody.
    It answers ``status`` with a Response it builds (a 404 the rate limit gives back)."""
    routes = EndpointRouter(models=__name__)

    def answer(request: Request[NameBody | None]) -> Response:
        return json_response(
            status,
            {
                "body": request.body.model_dump() if request.body else None,
                "session": request.session_name,
                "userAgent": request.user_agent,
            },
        )

    def without_body(request: Request) -> Response:
        return answer(cast(Request[NameBody | None], request))

    def with_body(request: Request[NameBody]) -> Response:
        return answer(cast(Request[NameBody | None], request))

    routes.endpoint("POST", "/x", policy)(with_body if body else without_body)
    return create_app(routes, deps=lambda: _CURRENT[0].world.deps)


def _call(
    app: NimbusApp, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    event = {
        "version": "2.0",
        "routeKey": "POST /x",
        "rawPath": "/x",
        "rawQueryString": "",
        "headers": headers or {},
        "isBase64Encoded": False,
        "body": body if isinstance(body, str) or body is None else json.dumps(body),
        "requestContext": {
            "http": {"method": "POST", "path": "/x", "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"]), result["headers"]


def test_kill_switch_answers_503_with_the_switch_number(fakes: Fakes) -> None:
    fakes.switches = {KillSwitch.ACCOUNT_LOGIN}
    status, body, _ = _call(_app(Policy(auth=Auth.NONE, killswitches=(KillSwitch.ACCOUNT_LOGIN,))))
    assert (status, body) == (
        503,
        {"code": "SERVICE_UNAVAILABLE_ERROR", "message": "Service Unavailable", "feature": 4},
    )


def test_global_wins_over_the_endpoint_switch(fakes: Fakes) -> None:
    fakes.switches = {KillSwitch.ACCOUNT_LOGIN, KillSwitch.GLOBAL}
    _, body, _ = _call(_app(Policy(auth=Auth.NONE, killswitches=(KillSwitch.ACCOUNT_LOGIN,))))
    assert body["feature"] == 8


def test_switches_of_other_endpoints_do_not_apply(fakes: Fakes) -> None:
    fakes.switches = {KillSwitch.ACCOUNT_CREATE}
    assert _call(_app(Policy(auth=Auth.NONE, killswitches=(KillSwitch.ACCOUNT_LOGIN,))))[0] == 200


def test_staff_pass_kill_switches(fakes: Fakes) -> None:
    fakes.switches = {KillSwitch.GLOBAL}
    fakes.caller = _caller(staff=True)
    assert _call(_app(Policy()), headers={"authorization": TOKEN})[0] == 200


def test_kill_switch_comes_before_the_session_check(fakes: Fakes) -> None:
    fakes.switches = {KillSwitch.GLOBAL}
    assert _call(_app(Policy()))[0] == 503


def test_session_required_answers_401(fakes: Fakes) -> None:
    status, body, _ = _call(_app(Policy()), headers={"authorization": TOKEN})
    assert (status, body["code"]) == (401, "INVALID_SESSION_ERROR")


def test_guest_endpoints_refuse_a_valid_session_and_ignore_an_invalid_one(fakes: Fakes) -> None:
    app = _app(Policy(auth=Auth.GUEST))
    assert _call(app, headers={"authorization": TOKEN})[0] == 200  # unknown session: ignored
    fakes.caller = _caller()
    assert _call(app, headers={"authorization": TOKEN})[0] == 401


def test_endpoints_without_a_session_never_authenticate(fakes: Fakes) -> None:
    _call(_app(Policy(auth=Auth.NONE)), headers={"authorization": TOKEN})
    assert fakes.authentications == 0


def test_staff_endpoints_refuse_non_staff_with_403(fakes: Fakes) -> None:
    fakes.caller = _caller()
    assert _call(_app(Policy(staff=True)), headers={"authorization": TOKEN})[0] == 403


@pytest.mark.parametrize(
    ("flags", "status"),
    [(None, 200), (Scope.ALL, 200), (Scope.ACCOUNT_READ, 200), (Scope.ACCOUNT_MODIFY, 403), (0, 403)],
)
def test_scoped_sessions_need_the_endpoint_scope(fakes: Fakes, flags: int | None, status: int) -> None:
    fakes.caller = _caller(flags=flags)
    assert _call(_app(Policy(scope=Scope.ACCOUNT_READ)), headers={"authorization": TOKEN})[0] == status


def test_endpoints_closed_to_scoped_sessions_refuse_even_scope_all(fakes: Fakes) -> None:
    fakes.caller = _caller(flags=Scope.ALL)
    assert _call(_app(Policy(scoped_sessions=False)), headers={"authorization": TOKEN})[0] == 403


def test_permission_check_comes_before_body_validation(fakes: Fakes) -> None:
    fakes.caller = _caller()
    assert _call(_app(Policy(staff=True), body=True), body="nope", headers={"authorization": TOKEN})[0] == 403


def test_body_validation_comes_before_the_rate_limit(fakes: Fakes) -> None:
    app = _app(Policy(auth=Auth.NONE, rate_limit=LIMIT), body=True)
    assert _call(app, body="{")[0] == 400
    assert fakes.hits == 0


def test_rate_limit_headers_and_429_with_retry_after(fakes: Fakes) -> None:
    app = _app(Policy(auth=Auth.NONE, rate_limit=LIMIT))
    first = _call(app)
    assert (first[0], first[2]["RateLimit-Limit"], first[2]["RateLimit-Remaining"]) == (200, "2", "1")
    assert first[2]["RateLimit-Reset"] == "60"
    _call(app)
    status, body, headers = _call(app)
    assert (status, body["code"]) == (429, "RATELIMITED_ERROR")
    assert headers["Retry-After"] == "60"
    assert headers["RateLimit-Remaining"] == "0"


def test_not_counted_statuses_give_the_hit_back(fakes: Fakes) -> None:
    app = _app(Policy(auth=Auth.NONE, rate_limit=LIMIT), status=404)
    for _ in range(5):
        assert _call(app)[0] == 404
    assert fakes.released == 5


def test_session_name_comes_from_the_header_or_the_user_agent(fakes: Fakes) -> None:
    app = _app(Policy(auth=Auth.NONE, names_session=True))
    assert _call(app, headers={"x-session-name": "  laptop  "})[1]["session"] == "laptop"
    # No name given: the User-Agent is kept for the session, named after it only when shown.
    _, body, _ = _call(app, headers={"user-agent": "curl/8.1"})
    assert (body["session"], body["userAgent"]) == (None, "curl/8.1")
    status, body, _ = _call(app, headers={"x-session-name": "x" * 65})
    assert (status, body["fields"]) == (400, ["X-Session-Name"])


def test_unexpected_errors_answer_a_clean_500(fakes: Fakes) -> None:
    routes = EndpointRouter()

    @routes.endpoint("GET", "/boom", Policy(auth=Auth.NONE))
    def boom(_request: Request) -> Response:
        raise RuntimeError("secret detail")

    app = create_app(routes, deps=lambda: fakes.world.deps)

    event = {
        "version": "2.0",
        "rawPath": "/boom",
        "headers": {},
        "rawQueryString": "",
        "requestContext": {
            "http": {"method": "GET", "path": "/boom", "sourceIp": "1.1.1.1"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    assert result["statusCode"] == 500
    assert json.loads(result["body"]) == {"code": "INTERNAL_SERVER_ERROR", "message": "Internal Server Error"}
    assert result["headers"]["Cache-Control"] == "no-store"


def test_query_validation_runs_with_the_body_checks_before_the_rate_limit(fakes: Fakes) -> None:
    routes = EndpointRouter(models=__name__)

    @routes.endpoint("GET", "/q", Policy(auth=Auth.NONE, rate_limit=LIMIT))
    def route(request: Request[None, Flags]) -> Response:
        return json_response(200, {"includeSelf": request.query.include_self})

    app = create_app(routes, deps=lambda: fakes.world.deps)

    def get(raw: str) -> dict[str, Any]:
        event = {
            "version": "2.0",
            "rawPath": "/q",
            "rawQueryString": f"include-self={raw}",
            "headers": {},
            "queryStringParameters": {"include-self": raw},
            "requestContext": {
                "http": {"method": "GET", "path": "/q", "sourceIp": "1.1.1.1"},
                "stage": "$default",
            },
        }
        return app.resolve(event)

    assert json.loads(get("1")["body"]) == {"includeSelf": True}
    bad = get("maybe")
    assert (bad["statusCode"], json.loads(bad["body"])["fields"]) == (400, ["include-self"])
    assert fakes.hits == 1


def test_two_apps_built_from_one_router_each_serve_with_their_own_dependencies() -> None:
    # An app's routes are guarded with the dependencies of the app answering, not of the last app
    # built over the same group (tests build several apps over the same routes).
    routes = EndpointRouter()

    @routes.endpoint("GET", "/who", Policy(auth=Auth.NONE))
    def who(request: Request) -> Response:
        return json_response(200, {"domain": request.deps.settings.default_domain})

    first, second = fake_world(), fake_world()
    second_settings = replace(second.deps.settings, default_domain="second.test")
    first_app = create_app(routes, deps=lambda: first.deps)
    create_app(routes, deps=lambda: replace(second.deps, settings=second_settings))
    event = {
        "version": "2.0",
        "rawPath": "/who",
        "headers": {},
        "rawQueryString": "",
        "requestContext": {
            "http": {"method": "GET", "path": "/who", "sourceIp": "1.1.1.1"},
            "stage": "$default",
        },
    }
    result = first_app.resolve(event)
    assert (result["statusCode"], json.loads(result["body"])) == (200, {"domain": "nimbus.test"})


class _CountedConfig(FakeConfig):
    """A runtime configuration that counts its reads; the first ``failures`` reads fail (SSM down)."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.reads = 0
        self.failures = failures

    def current(self) -> RuntimeConfig:
        self.reads += 1
        if self.reads <= self.failures:
            raise DependencyError("runtime configuration unavailable")
        return super().current()


def _handle(config: _CountedConfig, fakes: Fakes) -> int:
    routes = EndpointRouter()

    @routes.endpoint("GET", "/x", Policy(auth=Auth.NONE, killswitches=(KillSwitch.ACCOUNT_LOGIN,)))
    def route(request: Request) -> Response:
        return json_response(200, {})

    deps = replace(fakes.world.deps, config=config)
    handler = create_handler(create_app(routes, deps=lambda: deps))
    event = {
        "version": "2.0",
        "rawPath": "/x",
        "headers": {},
        "rawQueryString": "",
        "requestContext": {
            "http": {"method": "GET", "path": "/x", "sourceIp": "1.1.1.1"},
            "stage": "$default",
        },
    }
    status: int = handler(event, cast(Any, LambdaContextStub("X")))["statusCode"]
    return status


def test_the_runtime_config_is_read_once_per_request(fakes: Fakes) -> None:
    # The handler reads it for the log level and hands it to the guard for the kill switches.
    config = _CountedConfig()
    assert _handle(config, fakes) == 200
    assert config.reads == 1
    config.switches = {KillSwitch.ACCOUNT_LOGIN}
    assert _handle(config, fakes) == 503
    assert config.reads == 2


def test_an_unreadable_runtime_config_is_read_again_by_the_guard(fakes: Fakes) -> None:
    # SSM failing for the log level keeps logging as it is; the guard tries again, and answers 500
    # (fail closed) only if the kill switches still cannot be read.
    assert _handle(config := _CountedConfig(failures=1), fakes) == 200
    assert config.reads == 2
    assert _handle(config := _CountedConfig(failures=2), fakes) == 500
    assert config.reads == 2


def test_log_lines_carry_api_gateways_request_id_as_the_correlation_id(fakes: Fakes) -> None:
    seen: list[str | None] = []
    routes = EndpointRouter()

    @routes.endpoint("GET", "/x", Policy(auth=Auth.NONE))
    def route(request: Request) -> Response:
        seen.append(app_logger.get_correlation_id())
        return json_response(200, {})

    handler = create_handler(create_app(routes, deps=lambda: fakes.world.deps))
    event: dict[str, Any] = {
        "rawPath": "/x",
        "requestContext": {"http": {"method": "GET", "sourceIp": "1.1.1.1"}, "stage": "$default"},
    }
    for request_id in ("req-1", None):
        if request_id is not None:
            event["requestContext"]["requestId"] = request_id
        else:
            del event["requestContext"]["requestId"]
        assert handler(event, cast(Any, LambdaContextStub("X")))["statusCode"] == 200
    assert seen == ["req-1", None]


def _get(app: NimbusApp, path: str) -> tuple[int, dict[str, Any]]:
    event = {
        "version": "2.0",
        "rawPath": path,
        "headers": {},
        "rawQueryString": "",
        "requestContext": {
            "http": {"method": "GET", "path": path, "sourceIp": "1.1.1.1"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"])


def test_a_reply_is_answered_with_the_status_its_route_declares(fakes: Fakes) -> None:
    routes = EndpointRouter()

    @routes.endpoint("GET", "/made", Policy(auth=Auth.NONE), status=201)
    def made(_request: Request) -> Reply[Any]:
        return Reply({"made": True})

    @routes.endpoint("GET", "/sent", Policy(auth=Auth.NONE), status=201)
    def sent(_request: Request) -> Reply[Any]:
        return success(SuccessCode.SEND_RECOVERY_EMAIL_SUCCESS)

    app = create_app(routes, deps=lambda: fakes.world.deps)
    assert _get(app, "/made") == (201, {"made": True})
    assert _get(app, "/sent")[0] == 201


def test_a_success_code_whose_status_is_not_the_declared_one_is_a_500_never_a_wrong_status(
    fakes: Fakes,
) -> None:
    routes = EndpointRouter()

    @routes.endpoint("GET", "/sent", Policy(auth=Auth.NONE))  # the code's status is 201
    def sent(_request: Request) -> Reply[Any]:
        return success(SuccessCode.SEND_RECOVERY_EMAIL_SUCCESS)

    assert _get(create_app(routes, deps=lambda: fakes.world.deps), "/sent") == (
        500,
        {"code": "INTERNAL_SERVER_ERROR", "message": "Internal Server Error"},
    )
