"""API Gateway's part of a request: CORS (with a CorsConfiguration, API Gateway answers preflights
itself and sets the CORS headers on every response to an allowed origin, replacing the function's),
routing, the event, invoking, and the response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nimbus_tools.local.events import (
    HttpRequest,
    HttpResponse,
    MalformedResponseError,
    build_event,
    response_from_result,
)
from nimbus_tools.local.functions import Invoker
from nimbus_tools.local.router import Router
from nimbus_tools.local.static import StaticSite
from nimbus_tools.template import Template, resolver, resources_of_type


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class CorsPolicy:
    """A resolved CorsConfiguration."""

    allow_origins: tuple[str, ...]
    allow_headers: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    allow_credentials: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CorsPolicy:
        """Build from the template's (resolved) CorsConfiguration mapping."""
        max_age = config.get("MaxAge")
        return cls(
            allow_origins=_names(config.get("AllowOrigins")),
            allow_headers=_names(config.get("AllowHeaders")),
            allow_methods=_names(config.get("AllowMethods")),
            expose_headers=_names(config.get("ExposeHeaders")),
            max_age=int(max_age) if max_age is not None else None,
            allow_credentials=config.get("AllowCredentials") in (True, "true"),
        )

    def _allowed_origin(self, origin: str | None) -> str | None:
        if origin is None:
            return None
        if "*" in self.allow_origins:
            return origin if self.allow_credentials else "*"
        lowered = origin.lower()
        return origin if any(o.lower() == lowered for o in self.allow_origins) else None

    @staticmethod
    def is_preflight(request: HttpRequest) -> bool:
        """An OPTIONS request from a browser asking whether it may send the real request."""
        return (
            request.method.upper() == "OPTIONS"
            and request.header("origin") is not None
            and request.header("access-control-request-method") is not None
        )

    def preflight(self, request: HttpRequest) -> HttpResponse:
        """The 204 API Gateway answers to a preflight request."""
        headers = self._headers(
            request,
            ("access-control-allow-methods", ",".join(self.allow_methods)),
            ("access-control-allow-headers", ",".join(self.allow_headers).lower()),
            ("access-control-max-age", "" if self.max_age is None else str(self.max_age)),
        )
        return HttpResponse(204, headers, b"")

    def apply(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """``response`` with the function's CORS headers replaced by the configured ones."""
        headers = [(k, v) for k, v in response.headers if not k.lower().startswith("access-control-")]
        headers += self._headers(
            request, ("access-control-expose-headers", ",".join(self.expose_headers).lower())
        )
        return HttpResponse(response.status, headers, response.body)

    def _headers(self, request: HttpRequest, *optional: tuple[str, str]) -> list[tuple[str, str]]:
        # The CORS headers for the request's origin, none when it is not allowed; empty ones left out.
        origin = self._allowed_origin(request.header("origin"))
        if origin is None:
            return []
        credentials = [("access-control-allow-credentials", "true")] if self.allow_credentials else []
        given = [(name, value) for name, value in optional if value]
        return [("access-control-allow-origin", origin), *given, *credentials, ("vary", "origin")]


@dataclass(frozen=True)
class GatewayResult:
    """The response plus what the console log line needs: the function, and why it failed."""

    response: HttpResponse
    function: str | None = None
    error: str | None = None


def http_api_cors(template: Template, params: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The resolved CorsConfiguration of the template's (first) HttpApi, or None without one."""
    for resource in resources_of_type(template, "AWS::Serverless::HttpApi").values():
        if cors := (resource.get("Properties") or {}).get("CorsConfiguration"):
            resolved: dict[str, Any] = resolver(template, params).resolve(cors)
            return resolved
    return None


def json_message(status: int, message: str) -> HttpResponse:
    """API Gateway's own error body, e.g. 502 ``{"message":"Internal Server Error"}``."""
    return HttpResponse(
        status, [("content-type", "application/json")], json.dumps({"message": message}).encode()
    )


class Gateway:
    """Everything API Gateway does between the client and the function."""

    def __init__(
        self,
        router: Router,
        invoker: Invoker,
        cors: CorsPolicy | None = None,
        *,
        static: StaticSite | None = None,
    ) -> None:
        self.router = router
        self.invoker = invoker
        self.cors = cors
        # The console, the OpenAPI document and Swagger UI, which `make serve` offers beside the API.
        self.static = static

    def handle(self, request: HttpRequest) -> GatewayResult:
        """Answer one request; every API Gateway response carries its request id."""
        result = self._answer(request)
        headers = [*result.response.headers, ("apigw-requestid", request.request_id)]
        return replace(result, response=replace(result.response, headers=headers))

    def _answer(self, request: HttpRequest) -> GatewayResult:
        if self.cors is not None and CorsPolicy.is_preflight(request):
            return GatewayResult(self.cors.preflight(request))
        if self.static is not None and (page := self.static.answer(request)) is not None:
            return GatewayResult(page)
        match = self.router.match(request.method, request.raw_path)
        if match is None:
            return GatewayResult(json_message(404, "Not Found"))
        invocation = self.invoker.invoke(match.function, build_event(request, match), request.request_id)
        failure = json_message(502, "Internal Server Error")
        if not invocation.ok or invocation.result_json is None:
            return GatewayResult(failure, match.function, invocation.error)
        try:
            response = response_from_result(invocation.result_json)
        except MalformedResponseError as error:
            return GatewayResult(failure, match.function, f"malformed response: {error}")
        if self.cors is not None:
            response = self.cors.apply(request, response)
        return GatewayResult(response, match.function)
