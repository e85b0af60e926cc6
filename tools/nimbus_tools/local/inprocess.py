"""Call the functions in this process, routed as the local API routes them (same router, same
payload v2 events), without HTTP or workers: for tests and benchmarks, which provide AWS (moto)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from nimbus_tools.local.events import HttpRequest, build_event
from nimbus_tools.local.router import Router
from nimbus_tools.local.worker import LambdaContext
from nimbus_tools.template import FunctionSpec, Template, function_specs


@dataclass
class Reply:
    """A function's answer, decoded."""

    status: int
    body: Any
    headers: dict[str, str]
    function: str


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# The context handlers are called with in process: the function's name is all a caller gives.
LambdaContextStub = LambdaContext


class InProcessApi:
    """Routes requests to the template's functions and invokes their handlers in this process."""

    def __init__(self, template: Template, params: Mapping[str, str] | None = None) -> None:
        self.specs: dict[str, FunctionSpec] = {s.logical_id: s for s in function_specs(template, params)}
        self.router = Router.from_specs(self.specs.values())

    def environment(self) -> dict[str, str]:
        """The functions' environment (the template gives every function the same variables)."""
        return {name: value for spec in self.specs.values() for name, value in spec.environment.items()}

    def handler(self, logical_id: str) -> Handler:
        """The handler callable of a function (its module is imported once, like a warm container)."""
        spec = self.specs[logical_id]
        return cast(Handler, getattr(importlib.import_module(spec.handler_module), spec.handler_function))

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: str | bytes | None = None,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        ip: str = "198.51.100.7",
    ) -> Reply:
        """Send one request; ``raw`` sends the body bytes as they are, ``body`` sends it as JSON."""
        sent = [("host", "api.test"), ("user-agent", "pytest/9.2")]
        if token:
            sent.append(("authorization", token))
        sent += list((headers or {}).items())
        payload = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        request = HttpRequest(
            method=method,
            target=path,
            headers=sent,
            body=payload.encode() if isinstance(payload, str) else payload,
            source_ip=ip,
        )
        match = self.router.match(method, request.raw_path)
        if match is None:
            raise LookupError(f"no route for {method} {path}; the template's $default should catch it")
        result = self.handler(match.function)(build_event(request, match), LambdaContextStub(match.function))
        return Reply(
            status=result["statusCode"],
            body=json.loads(result["body"]),
            headers=dict(result.get("headers") or {}),
            function=match.function,
        )
