"""Route matching with API Gateway's priorities."""

from __future__ import annotations

from nimbus_tools.local.router import Router, RouteTarget
from nimbus_tools.template import HttpRoute, function_specs, load_template


def _router(*routes: tuple[str, str, str]) -> Router:
    return Router(RouteTarget(HttpRoute(method, path), function) for method, path, function in routes)


ROUTER = _router(
    ("GET", "/users/{id}", "ById"),
    ("GET", "/users/me", "Me"),
    ("ANY", "/users/me", "AnyMe"),
    ("ANY", "/files/{proxy+}", "Files"),
    ("GET", "/files/{owner}/latest", "Latest"),
    ("GET", "/", "Root"),
    ("ANY", "$default", "Fallback"),
)


def _matched(method: str, path: str) -> tuple[str, str, dict[str, str]] | None:
    match = ROUTER.match(method, path)
    return None if match is None else (match.function, match.route_key, match.path_parameters)


def test_literal_route_beats_parameter_route() -> None:
    assert _matched("GET", "/users/me") == ("Me", "GET /users/me", {})
    assert _matched("GET", "/users/42") == ("ById", "GET /users/{id}", {"id": "42"})


def test_exact_method_beats_any_on_the_same_path() -> None:
    assert _matched("GET", "/users/me")[0] == "Me"  # type: ignore[index]
    assert _matched("DELETE", "/users/me") == ("AnyMe", "ANY /users/me", {})


def test_trailing_slash_is_tolerated_except_on_root() -> None:
    assert _matched("GET", "/users/me/") == ("Me", "GET /users/me", {})
    assert _matched("GET", "/") == ("Root", "GET /", {})


def test_greedy_path_takes_the_rest_but_loses_to_more_literal_routes() -> None:
    assert _matched("PUT", "/files/a/b/c.txt") == ("Files", "ANY /files/{proxy+}", {"proxy": "a/b/c.txt"})
    assert _matched("GET", "/files/alice/latest") == (
        "Latest",
        "GET /files/{owner}/latest",
        {"owner": "alice"},
    )
    # {proxy+} needs at least one segment
    assert _matched("GET", "/files") == ("Fallback", "$default", {})


def test_unknown_path_or_method_goes_to_default() -> None:
    assert _matched("GET", "/nope") == ("Fallback", "$default", {})
    assert _matched("POST", "/users/42") == ("Fallback", "$default", {})


def test_path_parameters_are_percent_decoded_per_segment() -> None:
    assert _matched("GET", "/users/al%20ice") == ("ById", "GET /users/{id}", {"id": "al ice"})
    # an encoded slash stays inside its segment
    assert _matched("GET", "/users/a%2Fb") == ("ById", "GET /users/{id}", {"id": "a/b"})


def test_without_default_route_an_unknown_path_matches_nothing() -> None:
    router = _router(("GET", "/only", "Only"))
    assert router.match("GET", "/other") is None
    assert router.match("POST", "/only") is None


def test_the_real_template_routes_unknown_methods_to_admin_default() -> None:
    router = Router.from_specs(function_specs(load_template()))
    login = router.match("POST", "/login")
    assert login is not None
    assert (login.function, login.route_key) == ("AuthFunction", "POST /login")
    get_login = router.match("GET", "/login")
    assert get_login is not None
    assert (get_login.function, get_login.route_key) == (
        "AdminFunction",
        "$default",
    )
    me = router.match("GET", "/users/me/")
    assert me is not None
    assert me.function == "AccountsFunction"


def test_the_real_template_default_route_takes_any_method_even_unknown_ones() -> None:
    router = Router.from_specs(function_specs(load_template()))
    for method, path in [("FOO", "/"), ("TRACE", "/"), ("PROPFIND", "/users/me"), ("PATCH", "/login")]:
        match = router.match(method, path)
        assert match is not None
        assert (match.function, match.route_key) == ("AdminFunction", "$default"), method
