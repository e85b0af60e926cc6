"""The dispatcher's own pieces: the route table (Powertools' matching rules, kept), the event
accessors, and the Lambda result's shape."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from nimbus_core.domain.errors import NimbusError
from nimbus_core.http.event import HttpEvent
from nimbus_core.http.responses import json_response
from nimbus_core.http.routing import DuplicateRouteError, RouteTable, literal_siblings

ACCEPTED = [
    "abc",
    "01M804N41KYSHFMGYX2M1P11M9",
    "a%2Fb",  # percent-encoded, and never decoded
    "%20",
    "a b",
    "a.b-c_d~e",
    "a:b@c",
    "(x)!*'",
    "a;b=c+d&e$",
    "<x>",
    "[x]{y}|^",
    "\u00fcn\u00ef",  # Unicode letters are word characters
    "\u0660\u0661",  # and so are Unicode digits
]
REFUSED = ["", "a/b", 'a"b', "a`b", "a\\b", "a#b", "a?b", "a\tb", "a\u200bb", "e\u0301", "me\n"]


def _table(*paths: str, method: str = "GET") -> RouteTable[str]:
    return RouteTable.build((method, path, path) for path in paths)


@pytest.mark.parametrize("value", ACCEPTED)
def test_a_parameter_takes_what_powertools_took_and_stays_percent_encoded(value: str) -> None:
    assert _table("/domains/<id>").match("GET", f"/domains/{value}") == ("/domains/<id>", {"id": value})


@pytest.mark.parametrize("value", REFUSED)
def test_a_parameter_refuses_what_powertools_refused(value: str) -> None:
    assert _table("/domains/<id>").match("GET", f"/domains/{value}") is None


def test_literal_segments_win_over_parameters_whatever_the_declaration_order() -> None:
    table = _table("/users/<uid>/sessions/<sid>", "/users/<uid>/sessions/all", "/users/<id>/<what>")
    assert table.match("GET", "/users/u1/sessions/all") == ("/users/<uid>/sessions/all", {"uid": "u1"})
    assert table.match("GET", "/users/u1/sessions/s1") == (
        "/users/<uid>/sessions/<sid>",
        {"uid": "u1", "sid": "s1"},
    )
    assert table.match("GET", "/users/u1/ban") == ("/users/<id>/<what>", {"id": "u1", "what": "ban"})


def test_a_route_without_parameters_wins_over_any_with_one() -> None:
    table = _table("/users/<id>", "/users/me")
    assert table.match("GET", "/users/me") == ("/users/me", {})
    assert table.match("GET", "/users/you") == ("/users/<id>", {"id": "you"})


def test_routes_answer_their_own_method_and_exactly_their_path() -> None:
    table = RouteTable.build([("get", "/users/me", "get me"), ("DELETE", "/users/<id>", "delete one")])
    assert table.match("GET", "/users/me") == ("get me", {})
    assert table.match("DELETE", "/users/me") == ("delete one", {"id": "me"})
    for method, path in [
        ("PUT", "/users/me"),
        ("GET", "/users/ME"),
        ("GET", "/users/me/"),
        ("GET", "users/me"),
        ("GET", "/users/me/x"),
        ("GET", "/users//me"),
    ]:
        assert table.match(method, path) is None, (method, path)


def test_a_method_and_path_declared_twice_are_refused() -> None:
    with pytest.raises(DuplicateRouteError, match="PUT /a"):
        RouteTable.build([("PUT", "/a", 1), ("put", "/a", 2)])


def test_literal_siblings_reserve_the_values_other_routes_spell() -> None:
    reserved = literal_siblings(
        ["/users/me/sessions/<sid>", "/users/me/sessions/all", "/users/<id>", "/users/me", "/domains/<id>"]
    )
    assert reserved == {
        "/users/me/sessions/<sid>": {"sid": frozenset({"all"})},
        "/users/<id>": {"id": frozenset({"me"})},
    }


def _event(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "rawPath": "/users/me",
        "requestContext": {"http": {"method": "get", "sourceIp": "203.0.113.9"}, "stage": "$default"},
    }
    event.update(fields)
    return event


def test_the_event_gives_method_path_and_source_as_api_gateway_sent_them() -> None:
    event = HttpEvent(_event())
    assert (event.method, event.path, event.source_ip) == ("GET", "/users/me", "203.0.113.9")
    assert (event.headers(), event.query, event.body, event.is_base64_encoded) == ({}, {}, None, False)


def test_the_stage_prefix_leaves_the_path_off_the_default_stage() -> None:
    staged = _event(rawPath="/prod/users/me")
    staged["requestContext"]["stage"] = "prod"
    assert HttpEvent(staged).path == "/users/me"


def test_an_event_without_a_stage_or_method_fails_loudly_as_it_did() -> None:
    event = _event()
    del event["requestContext"]["stage"]
    with pytest.raises(KeyError):
        _ = HttpEvent(event).path


def test_headers_are_read_under_lower_case_names() -> None:
    event = HttpEvent(_event(headers={"Authorization": "t", "x-session-name": "n"}))
    assert event.headers() == {"authorization": "t", "x-session-name": "n"}


def test_a_base64_body_is_decoded_before_it_is_parsed() -> None:
    encoded = base64.b64encode(json.dumps({"name": "\u00e9"}).encode()).decode()
    assert HttpEvent(_event(body=encoded, isBase64Encoded=True)).json_body() == {"name": "\u00e9"}
    assert HttpEvent(_event(body='{"a":1}', isBase64Encoded=False)).json_body() == {"a": 1}
    assert HttpEvent(_event()).json_body() == {}
    with pytest.raises(NimbusError, match="INVALID_BODY_ERROR"):
        HttpEvent(_event(body="!!not base64", isBase64Encoded=True)).json_body()


def test_the_lambda_result_is_the_dict_powertools_returned() -> None:
    """Key for key and in the same order: statusCode, body, isBase64Encoded, headers (Content-Type
    after the others), and an empty cookies list (the local API and the tests read this shape)."""
    result = json_response(429, {"code": "X"}, {"Retry-After": "60"}).to_lambda()
    assert list(result) == ["statusCode", "body", "isBase64Encoded", "headers", "cookies"]
    assert result == {
        "statusCode": 429,
        "body": '{"code":"X"}',
        "isBase64Encoded": False,
        "headers": {"Cache-Control": "no-store", "Retry-After": "60", "Content-Type": "application/json"},
        "cookies": [],
    }
    assert list(result["headers"]) == ["Cache-Control", "Retry-After", "Content-Type"]
