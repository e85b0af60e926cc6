"""API Gateway HTTP API payload format 2.0 (the shapes of AWS's developer guide, "Working with AWS
Lambda proxy integrations for HTTP APIs"): the event built from a request, the function's result
read back into a response."""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from nimbus_tools.local.router import RouteMatch
from nimbus_tools.template import LOCAL_ACCOUNT_ID

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def new_request_id() -> str:
    """An id shaped like API Gateway's (e.g. ``"JKJaXmPLvHcESHA="``)."""
    return base64.b64encode(secrets.token_bytes(10)).decode()


@dataclass(frozen=True)
class HttpRequest:
    """An HTTP request as the local API received it."""

    method: str
    target: str  # the request-target: path and query exactly as sent
    headers: list[tuple[str, str]]
    body: bytes
    source_ip: str  # the socket peer; never taken from a header
    protocol: str = "HTTP/1.1"
    server_port: int = 80
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    request_id: str = field(default_factory=new_request_id)

    @property
    def raw_path(self) -> str:
        """The path part of the target, still percent-encoded."""
        return _split_target(self.target)[0]

    @property
    def raw_query(self) -> str:
        """The query string without the ``?``, still encoded."""
        return _split_target(self.target)[1]

    def header(self, name: str) -> str | None:
        """The (comma-joined) value of a header, case-insensitively; None if absent."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(values) if values else None


def _split_target(target: str) -> tuple[str, str]:
    path, _, query = target.partition("?")
    if "://" in path:  # absolute-form ("GET http://host/path"), which proxies send
        parts = urlsplit(target)
        path, query = parts.path, parts.query
    # Not urlsplit for the usual origin-form: it would read "//x" as a host name.
    return path.split("#", 1)[0] or "/", query.split("#", 1)[0]


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP response to send back."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class MalformedResponseError(ValueError):
    """The function's result is not a response API Gateway can use (it answers 502)."""


def build_event(request: HttpRequest, match: RouteMatch) -> dict[str, Any]:
    """The payload format 2.0 event API Gateway would send for ``request`` on ``match``."""
    headers, cookies = _event_headers(request)
    host = headers.get("host", "localhost")
    domain_name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    moment = request.received_at.astimezone(UTC)
    event: dict[str, Any] = {"version": "2.0", "routeKey": match.route_key, "rawPath": request.raw_path}
    event |= {
        "rawQueryString": request.raw_query,
        **({"cookies": cookies} if cookies else {}),
        "headers": headers,
    }
    if query := _comma_joined(parse_qsl(request.raw_query, keep_blank_values=True)):
        event["queryStringParameters"] = query
    event["requestContext"] = {
        "accountId": LOCAL_ACCOUNT_ID,
        "apiId": "local",
        "domainName": domain_name,
        "domainPrefix": domain_name.split(".")[0],
        "http": {
            "method": request.method.upper(),
            "path": request.raw_path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request.request_id,
        "routeKey": match.route_key,
        "stage": "$default",
        "time": f"{moment.day:02d}/{_MONTHS[moment.month - 1]}/{moment:%Y:%H:%M:%S} +0000",
        "timeEpoch": int(request.received_at.timestamp() * 1000),
    }
    if match.path_parameters:
        event["pathParameters"] = dict(match.path_parameters)
    try:
        event["body"], event["isBase64Encoded"] = request.body.decode("utf-8"), False
    except UnicodeDecodeError:
        event["body"], event["isBase64Encoded"] = base64.b64encode(request.body).decode(), True
    if not request.body:
        del event["body"]
    return event


def _event_headers(request: HttpRequest) -> tuple[dict[str, str], list[str]]:
    """The event's headers (lower-case names, repeated ones comma-joined, API Gateway's own added)
    and its cookies, which go to their own field, one per cookie, and not to the headers."""
    pairs = [(name.lower(), value) for name, value in request.headers]
    headers = _comma_joined((name, value) for name, value in pairs if name != "cookie")
    cookies = [c.strip() for name, value in pairs if name == "cookie" for c in value.split(";") if c.strip()]
    # API Gateway appends the caller's address to X-Forwarded-For and adds its own proxy headers.
    forwarded = headers.get("x-forwarded-for")
    headers["x-forwarded-for"] = f"{forwarded}, {request.source_ip}" if forwarded else request.source_ip
    headers |= {"x-forwarded-proto": "http", "x-forwarded-port": str(request.server_port)}
    moment = request.received_at
    headers.setdefault("x-amzn-trace-id", f"Root=1-{int(moment.timestamp()):08x}-{os.urandom(12).hex()}")
    return headers, cookies


def _comma_joined(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    # Repeated names are comma-joined, as API Gateway does for payload 2.0.
    joined: dict[str, str] = {}
    for key, value in pairs:
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    return joined


def response_from_result(result_json: str) -> HttpResponse:
    """Translate a function's (JSON) result into HTTP, as API Gateway does for payload 2.0.

    A dict with ``statusCode`` is a full response; any other valid JSON (a bare dict, a string, a
    number) is answered 200 with the JSON as an ``application/json`` body.
    """
    try:
        result = json.loads(result_json)
    except ValueError as error:
        raise MalformedResponseError("the function's result is not JSON") from error
    if not (isinstance(result, dict) and "statusCode" in result):
        return HttpResponse(200, [("content-type", "application/json")], result_json.encode())

    status = result["statusCode"]
    if isinstance(status, str) and status.isdigit():
        status = int(status)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise MalformedResponseError(f"statusCode {result['statusCode']!r} is not an HTTP status")

    raw_headers, raw_cookies = result.get("headers"), result.get("cookies")
    if not isinstance(raw_headers, dict | None):
        raise MalformedResponseError("headers must be an object")
    if not isinstance(raw_cookies, list | None):
        raise MalformedResponseError("cookies must be a list")
    headers = [(str(name), _header_value(value)) for name, value in (raw_headers or {}).items()]
    headers += [("set-cookie", str(cookie)) for cookie in raw_cookies or []]

    body = result.get("body")
    if body is None:
        payload = b""
    elif isinstance(body, str):
        payload = body.encode("utf-8")
    else:
        payload = json.dumps(body).encode("utf-8")
    if result.get("isBase64Encoded") is True and payload:
        try:
            payload = base64.b64decode(payload, validate=True)
        except binascii.Error as error:
            raise MalformedResponseError("isBase64Encoded but the body is not base64") from error
    return HttpResponse(status, headers, payload)


def _header_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_header_value(v) for v in value)
    return str(value)
