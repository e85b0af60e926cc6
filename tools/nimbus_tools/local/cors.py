"""The HttpApi CorsConfiguration, applied as API Gateway applies it.

With CORS configured, API Gateway answers preflight requests itself (no function runs) and sets
the CORS headers on every response to an allowed origin, ignoring any the function returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nimbus_tools.local.events import HttpRequest, HttpResponse


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
        headers: list[tuple[str, str]] = []
        origin = self._allowed_origin(request.header("origin"))
        if origin is not None:
            headers.append(("access-control-allow-origin", origin))
            if self.allow_methods:
                headers.append(("access-control-allow-methods", ",".join(self.allow_methods)))
            if self.allow_headers:
                headers.append(("access-control-allow-headers", ",".join(self.allow_headers).lower()))
            if self.max_age is not None:
                headers.append(("access-control-max-age", str(self.max_age)))
            if self.allow_credentials:
                headers.append(("access-control-allow-credentials", "true"))
            headers.append(("vary", "origin"))
        return HttpResponse(204, headers, b"")

    def apply(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """``response`` with the function's CORS headers replaced by the configured ones."""
        headers = [(k, v) for k, v in response.headers if not k.lower().startswith("access-control-")]
        origin = self._allowed_origin(request.header("origin"))
        if origin is not None:
            headers.append(("access-control-allow-origin", origin))
            if self.expose_headers:
                headers.append(("access-control-expose-headers", ",".join(self.expose_headers).lower()))
            if self.allow_credentials:
                headers.append(("access-control-allow-credentials", "true"))
            headers.append(("vary", "origin"))
        return HttpResponse(response.status, headers, response.body)
