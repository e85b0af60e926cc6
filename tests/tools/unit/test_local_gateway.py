"""API Gateway's own answers: 404 without a route, 502 on function failure, CORS, request ids."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nimbus_tools.local.events import HttpRequest
from nimbus_tools.local.functions import Invocation
from nimbus_tools.local.gateway import CorsPolicy, Gateway
from nimbus_tools.local.router import Router, RouteTarget
from nimbus_tools.template import HttpRoute


class FakeInvoker:
    """Returns a fixed invocation and remembers the events."""

    def __init__(self, invocation: Invocation) -> None:
        self.invocation = invocation
        self.events: list[tuple[str, Mapping[str, Any]]] = []

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        self.events.append((function, event))
        return self.invocation


def _ok(body: Any, headers: dict[str, str] | None = None) -> Invocation:
    result = {"statusCode": 200, "headers": headers or {}, "body": json.dumps(body)}
    return Invocation(ok=True, result_json=json.dumps(result))


ROUTER = Router([RouteTarget(HttpRoute("POST", "/login"), "AuthFunction")])
CORS = CorsPolicy.from_config(
    {
        "AllowOrigins": ["https://files.example"],
        "AllowHeaders": ["Authorization", "Content-Type"],
        "AllowMethods": ["GET", "POST"],
        "ExposeHeaders": ["Retry-After"],
        "MaxAge": 600,
    }
)


def _request(
    method: str = "POST", path: str = "/login", headers: list[tuple[str, str]] | None = None
) -> HttpRequest:
    return HttpRequest(method=method, target=path, headers=headers or [], body=b"", source_ip="127.0.0.1")


def test_function_result_is_answered_with_the_request_id_header() -> None:
    invoker = FakeInvoker(_ok({"token": "t"}))
    request = _request()
    result = Gateway(ROUTER, invoker).handle(request)
    assert result.response.status == 200
    assert json.loads(result.response.body) == {"token": "t"}
    assert ("apigw-requestid", request.request_id) in result.response.headers
    assert result.function == "AuthFunction"
    assert invoker.events[0][1]["routeKey"] == "POST /login"


def test_unmatched_request_without_default_route_is_404_not_found() -> None:
    invoker = FakeInvoker(_ok({}))
    result = Gateway(ROUTER, invoker).handle(_request("GET", "/nope"))
    assert (result.response.status, json.loads(result.response.body)) == (404, {"message": "Not Found"})
    assert invoker.events == []


def test_function_error_is_answered_502_internal_server_error() -> None:
    result = Gateway(ROUTER, FakeInvoker(Invocation(ok=False, error="RuntimeError: boom"))).handle(_request())
    assert result.response.status == 502
    assert json.loads(result.response.body) == {"message": "Internal Server Error"}
    assert (result.function, result.error) == ("AuthFunction", "RuntimeError: boom")


def test_malformed_function_result_is_answered_502() -> None:
    invoker = FakeInvoker(Invocation(ok=True, result_json='{"statusCode": "nope"}'))
    result = Gateway(ROUTER, invoker).handle(_request())
    assert result.response.status == 502
    assert result.error is not None
    assert "malformed" in result.error


def test_preflight_is_answered_by_the_gateway_without_invoking() -> None:
    invoker = FakeInvoker(_ok({}))
    headers = [("Origin", "https://files.example"), ("Access-Control-Request-Method", "POST")]
    result = Gateway(ROUTER, invoker, CORS).handle(_request("OPTIONS", "/login", headers))
    response = dict(result.response.headers)
    assert result.response.status == 204
    assert response["access-control-allow-origin"] == "https://files.example"
    assert response["access-control-allow-methods"] == "GET,POST"
    assert response["access-control-max-age"] == "600"
    assert invoker.events == []


def test_configured_cors_headers_replace_the_functions_own() -> None:
    invoker = FakeInvoker(_ok({}, {"Access-Control-Allow-Origin": "*"}))
    allowed = Gateway(ROUTER, invoker, CORS).handle(_request(headers=[("Origin", "https://files.example")]))
    assert ("access-control-allow-origin", "https://files.example") in allowed.response.headers
    assert ("access-control-expose-headers", "retry-after") in allowed.response.headers
    assert ("Access-Control-Allow-Origin", "*") not in allowed.response.headers
    other = Gateway(ROUTER, invoker, CORS).handle(_request(headers=[("Origin", "https://evil.example")]))
    assert not any(k.lower().startswith("access-control-") for k, _ in other.response.headers)
