"""One registry, four agreements: template routes = registered routes; every registered policy = the
seed's requirements (tests/seed_endpoints.py); every type a route's signature names resolves, lazily,
to the class Python and mypy see; and no route can exist without a policy and a typed signature."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
import typing
from collections import Counter
from typing import Any, cast

import pytest
from pydantic import BaseModel
from typing_extensions import is_typeddict

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.scopes import Scope
from nimbus_core.http import views
from nimbus_core.http.app import NimbusApp, create_app
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Endpoint, ErrorAt, Policy
from nimbus_core.http.registry import Declared, EndpointRouter, UnguardedRouteError
from nimbus_core.http.request_models import RequestKind, RouteSignatureError, UnknownModelError
from nimbus_core.http.responses import Reply, Response, json_response
from nimbus_core.http.routing import DuplicateRouteError
from nimbus_tools.openapi import endpoint_errors
from nimbus_tools.template import FunctionSpec, function_specs, load_template
from tests.seed_endpoints import BY_KEY, SEED_ENDPOINTS, SeedEndpoint

# HTTP functions (the mail function is fed by a stream and has no routes).
SPECS = {spec.logical_id: spec for spec in function_specs(load_template()) if spec.routes}
_AUTH = {"required": Auth.REQUIRED, "none": Auth.NONE, "guest": Auth.GUEST}


def _app(spec: FunctionSpec) -> NimbusApp:
    module = importlib.import_module(spec.handler_module)
    app = getattr(module, "app", None)
    assert isinstance(app, NimbusApp), f"{spec.handler_module} has no module-level NimbusApp `app`"
    return app


def _template_path(path: str) -> str:
    """Declared ``/domains/<id>`` -> API Gateway ``/domains/{id}``."""
    return re.sub(r"<(\w+)>", r"{\1}", path)


def _seed_path(path: str) -> str:
    """Declared ``/users/<uid>/sessions/<sid>`` -> the seed's ``/users/:uid/sessions/:sid``."""
    return re.sub(r"<(\w+)>", r":\1", path)


def _registered() -> list[tuple[str, Endpoint]]:
    return [(lid, e) for lid, spec in SPECS.items() for e in _app(spec).endpoints]


def _declared() -> list[tuple[str, Declared]]:
    """Every HTTP function's declarations (endpoint and route function)."""
    found = []
    for lid, spec in SPECS.items():
        package = spec.handler_module.rpartition(".")[0]
        routes = importlib.import_module(f"{package}.routes").routes
        found += [(lid, declared) for declared in routes.declared]
    return found


# ---------------------------------------------------------------------------------------- (a) template


@pytest.mark.parametrize("logical_id", sorted(SPECS))
def test_registered_endpoints_are_exactly_the_functions_http_events(logical_id: str) -> None:
    spec = SPECS[logical_id]
    registered = [(e.method, _template_path(e.path)) for e in _app(spec).endpoints]
    events = [(r.method, r.path) for r in spec.routes if r.path != "$default"]
    assert len(registered) == len(set(registered)), f"{logical_id} registers a route twice"
    assert sorted(registered) == sorted(events), (
        f"{logical_id}: only registered {sorted(set(registered) - set(events))}; "
        f"only in template.yaml {sorted(set(events) - set(registered))}"
    )


def test_only_the_admin_function_catches_default() -> None:
    catching = [lid for lid, spec in SPECS.items() for r in spec.routes if r.path == "$default"]
    assert catching == ["AdminFunction"]


def test_no_route_is_registered_by_two_functions() -> None:
    counts = Counter((e.method, e.path) for _, e in _registered())
    assert [key for key, n in counts.items() if n > 1] == []


# ---------------------------------------------------------------------------------------- (b) the seed


def test_the_seed_table_is_complete_and_well_formed() -> None:
    """38 seed endpoints (24 account, 14 session), each once, with names the spec defines."""
    assert len([e for e in SEED_ENDPOINTS if e.source == "seed"]) == 38
    assert len(BY_KEY) == len(SEED_ENDPOINTS)
    for e in SEED_ENDPOINTS:
        assert e.scope is None or e.scope in Scope.__members__, e
        assert all(name in KillSwitch.__members__ and name != "GLOBAL" for name in e.killswitches), e
        # STAFF_* scopes exactly on staff endpoints (seed: Authentication 6).
        assert (e.scope or "").startswith("STAFF_") == e.staff, e
        # No stated authorization requirement: nothing a scoped session could be refused for.
        if e.auth != "required":
            assert e.scope is None, e
            assert not e.staff, e
            assert e.scoped_sessions, e
        # Endpoints closed to scoped sessions need no scope (seed: Authentication 5), but for the
        # staff ones the CONTRACT closes, which keep the seed's (section 8: staff by people).
        if not e.scoped_sessions:
            assert e.scope is None or e.staff, e
        # Only a staff endpoint can name an account other than the caller's.
        if not e.scoped_self or not e.scoped_staff:
            assert e.staff, e


REGISTERED = _registered()


@pytest.mark.parametrize(
    ("function", "endpoint"), REGISTERED, ids=[f"{e.method} {e.path}" for _, e in REGISTERED]
)
def test_registered_policy_agrees_with_the_seed(function: str, endpoint: Endpoint) -> None:
    key = (endpoint.method, _seed_path(endpoint.path))
    seed = BY_KEY.get(key)
    assert seed is not None, f"{function} registers {key}, which neither the seed nor the CONTRACT lists"
    assert _policy_view(endpoint.policy) == _expected_view(seed)


def _expected_view(seed: SeedEndpoint) -> dict[str, object]:
    limit = seed.rate_limit
    return {
        "auth": _AUTH[seed.auth],
        "staff": seed.staff,
        "scope": seed.scope,
        "killswitches": sorted(seed.killswitches),
        # The guard reverifies a caller's session. Login's "Reverify with second-factor challenge" has
        # no session: its password is the login body's field and the challenge is login's own.
        "reverify": seed.reverify and seed.auth == "required",
        "rate_limit": None if limit is None else (limit.limit, limit.window, limit.per, limit.not_counted),
        "scoped_sessions": seed.scoped_sessions,
        "scoped_self": seed.scoped_self,
        "scoped_staff": seed.scoped_staff,
    }


def _policy_view(policy: Policy) -> dict[str, object]:
    limit = policy.rate_limit
    assert len(set(policy.killswitches)) == len(policy.killswitches), "a switch listed twice"
    return {
        "auth": policy.auth,
        "staff": policy.staff,
        "scope": None if policy.scope is None else policy.scope.name,
        "killswitches": sorted(s.name for s in policy.killswitches),
        "reverify": policy.reverify,
        "rate_limit": None
        if limit is None
        else (limit.limit, limit.window, limit.per.value, frozenset(limit.not_counted)),
        "scoped_sessions": policy.scoped_sessions,
        "scoped_self": policy.scoped_self,
        "scoped_staff": policy.scoped_staff,
    }


@pytest.mark.parametrize(
    ("function", "endpoint"), REGISTERED, ids=[f"{e.method} {e.path}" for _, e in REGISTERED]
)
def test_documented_statuses_follow_the_seeds_observed_rules(function: str, endpoint: Endpoint) -> None:
    """Errors, rules 1 and 2: switched endpoints document 503, rate-limited ones 429 (in the
    generated OpenAPI document's errors)."""
    policy = endpoint.policy
    errors = endpoint_errors(endpoint)
    assert endpoint.status not in errors, function
    if policy.killswitches:
        assert "SERVICE_UNAVAILABLE_ERROR" in errors[503], function
    if policy.rate_limit is not None:
        assert "RATELIMITED_ERROR" in errors[429], function


def test_login_asks_for_the_password_in_its_own_body() -> None:
    """The login row's Reverify is not the guard's: the body itself must require the password,
    unless it answers a second-factor challenge."""
    from nimbus_core.domain.errors import NimbusError
    from nimbus_core.http.validation import validate

    (login,) = [e for _, e in REGISTERED if (e.method, e.path) == ("POST", "/login")]
    body = login.model("body")
    assert body is not None
    with pytest.raises(NimbusError) as refused:
        validate(body, {"username": "alice"})
    assert refused.value.body()["fields"] == ["password"]
    with pytest.raises(NimbusError) as bypass:
        validate(body, {"username": "alice", "2fa": None})
    assert bypass.value.body()["fields"] == ["password"]


# ------------------------------------------------------------------------------ (c) the typed signatures

KINDS: tuple[RequestKind, ...] = ("body", "query", "path")
DECLARED = _declared()
_IDS = [f"{d.endpoint.method} {d.endpoint.path}" for _, d in DECLARED]


def _hints(declared: Declared) -> dict[str, Any]:
    """The route's annotations as Python resolves them: its module's globals, then its group's
    models module and the views (what its ``if TYPE_CHECKING:`` imports give mypy)."""
    models = importlib.import_module(declared.endpoint.models or "")
    namespace = {**vars(views), **vars(models), **declared.route.__globals__}
    return typing.get_type_hints(declared.route, globalns=namespace)


def _type_args(hint: Any) -> tuple[Any, ...]:
    """``Request[A, None]`` -> ``(A, None, None)``; a bare ``Request`` -> ``(None, None, None)``."""
    return tuple(None if a is type(None) else a for a in typing.get_args(hint) or (None, None, None))


@pytest.mark.parametrize(("function", "declared"), DECLARED, ids=_IDS)
def test_every_type_a_signature_names_resolves_to_the_class_python_resolves_it_to(
    function: str, declared: Declared
) -> None:
    """A misspelt or missing name fails here, not in a request: the guard and the OpenAPI document
    resolve each name alone and lazily (Endpoint.model), and must find what get_type_hints finds."""
    endpoint = declared.endpoint
    hints = _hints(declared)
    request = next(iter(inspect.signature(declared.route).parameters))
    assert typing.get_origin(hints[request]) is Request or hints[request] is Request, function
    expected = dict(zip(KINDS, _type_args(hints[request]), strict=True))
    for kind in KINDS:
        model = endpoint.model(kind)
        assert model is expected[kind], (function, endpoint.path, kind)
        if model is not None:
            assert issubclass(model, BaseModel), (function, kind)
            assert model.__name__ == endpoint.model_name(kind), (function, kind)  # the schema's name
    replies = _replies(hints["return"])
    assert all(typing.get_origin(r) is Reply for r in replies), (
        function,
        "every product route answers a Reply",
    )
    views = [view for r in replies for view in typing.get_args(r)]
    assert list(endpoint.successes().values()) == views, (function, endpoint.path)
    assert [endpoint.status, *endpoint.also] == list(endpoint.successes()), (function, endpoint.path)
    for view in views:
        assert is_typeddict(view), (function, view)
        assert view.__name__ in {endpoint.model_name("response"), *endpoint.signature.others}, function


def _replies(hint: Any) -> tuple[Any, ...]:
    """``Reply[A] | Reply[B]`` -> ``(Reply[A], Reply[B])``; ``Reply[A]`` -> ``(Reply[A],)``."""
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


ROUTES_MODULES = sorted({d.route.__module__ for _, d in DECLARED})


@pytest.mark.parametrize("module", ROUTES_MODULES)
def test_what_a_routes_module_imports_for_mypy_is_what_its_routes_resolve_to(module: str) -> None:
    """mypy reads the names of ``if TYPE_CHECKING:`` imports; the guard finds them in the group's
    models module or the views: each such name must be the very class the routes resolve to."""
    source = inspect.getsource(sys.modules[module])
    imported: dict[str, object] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                found = importlib.import_module(statement.module or "")
                imported |= {
                    alias.asname or alias.name: getattr(found, alias.name) for alias in statement.names
                }
    used = 0
    for _, declared in DECLARED:
        if declared.route.__module__ != module:
            continue
        endpoint = declared.endpoint
        for kind in KINDS:
            name = endpoint.model_name(kind)
            if name is not None:
                assert imported.get(name) is endpoint.model(kind), (module, name)
                used += 1
        for view in endpoint.successes().values():
            assert view is not None
            assert imported.get(view.__name__) is view, (module, view.__name__)
            used += 1
    assert used, module


def test_every_function_names_the_models_module_of_its_own_package() -> None:
    for function, endpoint in REGISTERED:
        package = SPECS[function].handler_module.rpartition(".")[0]  # accounts_api.handler -> accounts_api
        assert endpoint.models == f"{package}.models", (function, endpoint.method, endpoint.path)


def test_a_name_no_module_holds_is_refused_when_resolved() -> None:
    group = EndpointRouter(models="staff_api.models")

    def ban(request: Request[NoSuchBody]) -> Reply[NoSuchView]:  # type: ignore[name-defined]  # noqa: F821
        raise AssertionError("never called")

    group.endpoint("PUT", "/users/<id>/ban", Policy())(ban)
    (endpoint,) = group.endpoints
    with pytest.raises(
        UnknownModelError, match=r"'NoSuchBody', which is no pydantic model of staff_api\.models"
    ):
        endpoint.model("body")
    with pytest.raises(
        UnknownModelError, match=r"'NoSuchView', which is no view of nimbus_core\.http\.views"
    ):
        endpoint.successes()


@pytest.mark.parametrize(
    ("annotation", "refusal"),
    [
        ("dict[str, Any]", "'dict' in its signature is not nimbus_core.http.request.Request"),
        ("Request[A, B, C, D]", "a body, query and path model, no more"),
        ("Request[list[int]]", "not a class with names"),
        ("Request[accounts_api.models.ChangeUsernameBody]", "not a class with names"),
    ],
)
def test_a_route_whose_parameter_is_not_a_request_is_refused_where_it_is_declared(
    annotation: str, refusal: str
) -> None:
    def route(request: Any) -> Response:
        raise AssertionError("never called")

    route.__annotations__["request"] = annotation
    with pytest.raises(RouteSignatureError, match=re.escape(refusal)):
        EndpointRouter(models="staff_api.models").endpoint("GET", "/a", Policy())(route)


def test_a_route_that_takes_more_than_its_request_is_refused_where_it_is_declared() -> None:
    def route(request: Request, extra: int) -> Response:
        raise AssertionError("never called")

    with pytest.raises(RouteSignatureError, match="GET /a: a route takes one argument, its Request"):
        EndpointRouter().endpoint("GET", "/a", Policy())(cast(Any, route))


@pytest.mark.parametrize(
    ("annotation", "refusal"),
    [
        ("dict[str, Any]", "returns Reply[View] (or a Response it builds), not dict"),
        ("Reply", "returns Reply[View] (or a Response it builds), not Reply"),
        ("Response[UserView]", "not Response"),
        ("Reply[UserView] | Response", "not Reply[UserView] | Response"),
        ("Reply[UserView] | Reply", "not Reply[UserView] | Reply"),
        ("Reply[None]", "not Reply[None]"),
    ],
)
def test_a_route_that_returns_no_reply_is_refused_where_it_is_declared(annotation: str, refusal: str) -> None:
    def route(request: Request) -> Any:
        raise AssertionError("never called")

    route.__annotations__["return"] = annotation
    with pytest.raises(RouteSignatureError, match=re.escape(refusal)):
        EndpointRouter().endpoint("GET", "/a", Policy())(route)


def test_the_other_replies_a_route_returns_are_its_also_statuses_in_order() -> None:
    group = EndpointRouter()

    def route(request: Request) -> Any:
        raise AssertionError("never called")

    route.__annotations__["return"] = "Reply[SuccessfulAuthView] | Reply[PasskeyChallengeView]"
    group.endpoint("POST", "/a", Policy(), status=201, also=(200,))(route)
    (endpoint,) = group.endpoints
    assert endpoint.successes() == {201: views.SuccessfulAuthView, 200: views.PasskeyChallengeView}


@pytest.mark.parametrize(("also", "returned"), [((), "Reply[A] | Reply[B]"), ((200,), "Reply[A]")])
def test_a_route_whose_also_and_other_replies_differ_in_number_is_refused(
    also: tuple[int, ...], returned: str
) -> None:
    def route(request: Request) -> Any:
        raise AssertionError("never called")

    route.__annotations__["return"] = returned
    with pytest.raises(RouteSignatureError, match="POST /a: also= gives"):
        EndpointRouter().endpoint("POST", "/a", Policy(), also=also)(route)


def test_a_signature_names_request_models_only_in_a_group_that_names_their_module() -> None:
    with pytest.raises(RouteSignatureError, match="GET /a: its body model is named, but its EndpointRouter"):
        EndpointRouter().endpoint("GET", "/a", Policy())(_any_body)


def test_a_route_of_a_module_without_string_annotations_is_refused() -> None:
    def route(request: Any) -> Any:
        raise AssertionError("never called")

    route.__annotations__.update(request=Request, **{"return": Response})
    with pytest.raises(RouteSignatureError, match="from __future__ import annotations"):
        EndpointRouter().endpoint("GET", "/a", Policy())(route)


def test_declaring_and_guarding_a_route_imports_none_of_its_models() -> None:
    group = EndpointRouter(models="no_such_package.models")
    group.endpoint("POST", "/a", Policy(auth=Auth.NONE))(_any_body)
    app = create_app(group, deps=_no_deps)
    assert [e.models for e in app.endpoints] == ["no_such_package.models"]
    assert [e.model_name("body") for e in app.endpoints] == ["AnyBody"]


def _any_body(request: Request[AnyBody]) -> Response:  # type: ignore[name-defined]  # noqa: F821
    raise AssertionError("never called")


def test_the_errors_a_route_declares_are_its_codes_at_their_status_or_the_one_given() -> None:
    group = EndpointRouter()
    errors = (ErrorCode.BANNED_ERROR, ErrorAt(404, ErrorCode.INVALID_SESSION_ERROR))
    group.endpoint("GET", "/a", Policy(), status=201, errors=errors, summary="A")(_hello)
    (endpoint,) = group.endpoints
    assert endpoint.route_errors() == {(403, ErrorCode.BANNED_ERROR), (404, ErrorCode.INVALID_SESSION_ERROR)}
    assert (endpoint.status, endpoint.summary) == (201, "A")


# ---------------------------------------------------------------------------------------- (d) no policy


def _no_deps() -> Deps:
    raise AssertionError("create_app must not build dependencies")


def _hello(_request: Request) -> Response:
    return json_response(200, {})


def test_a_route_declared_without_a_policy_is_refused_where_it_is_declared() -> None:
    group = EndpointRouter()
    with pytest.raises(UnguardedRouteError, match="GET /sneaky"):
        group.endpoint("get", "/sneaky", cast(Policy, None))


def test_endpoint_is_the_only_way_to_declare_a_route() -> None:
    """A group holds its declarations and nothing else: no second, policy-free way to add a route
    (Powertools' router.route, which the old registry had to police after the fact)."""
    public = {name for name in dir(EndpointRouter()) if not name.startswith("_")}
    assert public == {"declared", "endpoint", "endpoints", "models", "reserved"}


def test_create_app_refuses_a_route_slipped_into_the_declarations_without_a_policy() -> None:
    group = EndpointRouter()
    group.endpoint("GET", "/guarded", Policy(auth=Auth.NONE))(_hello)
    group.declared.append(Declared(Endpoint("DELETE", "/users/<id>", cast(Policy, None), "sneaky"), _hello))

    with pytest.raises(UnguardedRouteError, match="DELETE /users/<id>"):
        create_app(group, deps=_no_deps)


def test_create_app_refuses_a_route_declared_twice() -> None:
    first, second = EndpointRouter(), EndpointRouter()
    first.endpoint("GET", "/a/<id>", Policy())(_hello)
    second.endpoint("get", "/a/<id>", Policy(staff=True))(_hello)

    with pytest.raises(DuplicateRouteError, match="GET /a/<id>"):
        create_app(first, second, deps=_no_deps)


def test_create_app_accepts_routes_that_all_have_policies() -> None:
    group = EndpointRouter()
    group.endpoint("GET", "/a", Policy())(_hello)
    group.endpoint("DELETE", "/a/<id>", Policy(staff=True, scope=Scope.STAFF_MODIFY_ACCOUNTS))(_hello)
    app = create_app(group, deps=_no_deps)
    assert [(e.method, e.path) for e in app.endpoints] == [("GET", "/a"), ("DELETE", "/a/<id>")]
