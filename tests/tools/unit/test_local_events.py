"""Payload format 2.0 events built like API Gateway builds them, and responses read like it reads them."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from nimbus_tools.local.events import (
    HttpRequest,
    MalformedResponseError,
    build_event,
    response_from_result,
)
from nimbus_tools.local.router import RouteMatch, RouteTarget
from nimbus_tools.template import HttpRoute

WHEN = datetime(2026, 3, 12, 19, 3, 58, 390000, tzinfo=UTC)
LOGIN = RouteMatch(RouteTarget(HttpRoute("POST", "/login"), "AuthFunction"), {})


def _request(**overrides: object) -> HttpRequest:
    fields: dict[str, object] = {
        "method": "POST",
        "target": "/login?next=%2Fhome&tag=a&tag=b&flag",
        "headers": [
            ("Host", "127.0.0.1:3000"),
            ("User-Agent", "curl/8"),
            ("X-Multi", "one"),
            ("x-multi", "two"),
            ("Cookie", "session=abc; theme=dark"),
            ("Content-Type", "application/json"),
        ],
        "body": b'{"username": "alice"}',
        "source_ip": "203.0.113.9",
        "server_port": 3000,
        "received_at": WHEN,
        "request_id": "JKJaXmPLvHcESHA=",
    }
    fields.update(overrides)
    return HttpRequest(**fields)  # type: ignore[arg-type]


def test_event_has_the_payload_v2_shape() -> None:
    event = build_event(_request(), LOGIN)
    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /login"
    assert event["rawPath"] == "/login"
    assert event["rawQueryString"] == "next=%2Fhome&tag=a&tag=b&flag"
    assert event["queryStringParameters"] == {"next": "/home", "tag": "a,b", "flag": ""}
    assert event["body"] == '{"username": "alice"}'
    assert event["isBase64Encoded"] is False
    assert "pathParameters" not in event
    context = event["requestContext"]
    assert context["http"] == {
        "method": "POST",
        "path": "/login",
        "protocol": "HTTP/1.1",
        "sourceIp": "203.0.113.9",
        "userAgent": "curl/8",
    }
    assert context["routeKey"] == "POST /login"
    assert context["stage"] == "$default"
    assert context["requestId"] == "JKJaXmPLvHcESHA="
    assert context["time"] == "12/Mar/2026:19:03:58 +0000"
    assert context["timeEpoch"] == 1773342238390
    assert context["domainName"] == "127.0.0.1"
    assert {"accountId", "apiId", "domainPrefix"} <= set(context)


def test_headers_are_lower_cased_and_repeated_headers_comma_joined() -> None:
    headers = build_event(_request(), LOGIN)["headers"]
    assert headers["x-multi"] == "one,two"
    assert headers["content-type"] == "application/json"
    assert all(name == name.lower() for name in headers)


def test_cookies_move_from_the_header_to_their_own_field() -> None:
    event = build_event(_request(), LOGIN)
    assert event["cookies"] == ["session=abc", "theme=dark"]
    assert "cookie" not in event["headers"]


def test_source_ip_comes_from_the_socket_even_with_x_forwarded_for() -> None:
    request = _request(headers=[("X-Forwarded-For", "6.6.6.6"), ("X-Real-IP", "7.7.7.7")])
    event = build_event(request, LOGIN)
    assert event["requestContext"]["http"]["sourceIp"] == "203.0.113.9"
    # API Gateway appends the real peer to whatever the client claimed
    assert event["headers"]["x-forwarded-for"] == "6.6.6.6, 203.0.113.9"


def test_binary_body_is_base64_encoded() -> None:
    event = build_event(_request(body=b"\xff\xfe\x00binary"), LOGIN)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\xfe\x00binary"


def test_a_request_without_body_or_query_omits_those_fields() -> None:
    event = build_event(_request(target="/login", body=b"", headers=[]), LOGIN)
    assert "body" not in event
    assert "queryStringParameters" not in event
    assert "cookies" not in event
    assert event["isBase64Encoded"] is False


def test_the_request_target_splits_into_raw_path_and_query_like_the_wire_form() -> None:
    assert (_request(target="//double/slash?a=1").raw_path, _request(target="//x?a=1").raw_query) == (
        "//double/slash",
        "a=1",
    )
    assert _request(target="http://127.0.0.1:3000/login?x=1").raw_path == "/login"
    assert _request(target="?only=query").raw_path == "/"


def test_path_parameters_and_default_route_key_are_passed_on() -> None:
    by_id = RouteMatch(RouteTarget(HttpRoute("GET", "/users/{id}"), "F"), {"id": "42"})
    assert build_event(_request(target="/users/42"), by_id)["pathParameters"] == {"id": "42"}
    fallback = RouteMatch(RouteTarget(HttpRoute("ANY", "$default"), "F"), {})
    event = build_event(_request(target="/nowhere"), fallback)
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "$default"


def test_full_response_sets_status_headers_cookies_and_body() -> None:
    result = {
        "statusCode": 201,
        "headers": {"Content-Type": "application/json", "RateLimit-Remaining": 4},
        "cookies": ["a=1; Path=/", "b=2"],
        "body": '{"ok": true}',
    }
    response = response_from_result(json.dumps(result))
    assert response.status == 201
    assert ("RateLimit-Remaining", "4") in response.headers
    assert [v for k, v in response.headers if k == "set-cookie"] == ["a=1; Path=/", "b=2"]
    assert response.body == b'{"ok": true}'


def test_base64_response_body_is_decoded() -> None:
    body = base64.b64encode(b"\x89PNG").decode()
    response = response_from_result(json.dumps({"statusCode": 200, "body": body, "isBase64Encoded": True}))
    assert response.body == b"\x89PNG"


def test_bare_results_are_answered_200_json() -> None:
    bare = response_from_result('{"hello": "world"}')
    assert (bare.status, bare.body) == (200, b'{"hello": "world"}')
    assert ("content-type", "application/json") in bare.headers
    assert response_from_result('"text"').body == b'"text"'


@pytest.mark.parametrize(
    "result",
    ['{"statusCode": "teapot"}', '{"statusCode": 700}', '{"statusCode": 200, "headers": []}', "not json"],
)
def test_malformed_results_are_refused(result: str) -> None:
    with pytest.raises(MalformedResponseError):
        response_from_result(result)
