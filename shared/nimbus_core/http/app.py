"""The resolver factory and Lambda entry point that every function uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core import metrics
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.http import guard
from nimbus_core.http.policy import Endpoint
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import error_response, response_for_exception
from nimbus_core.loglevels import set_log_level
from nimbus_core.ports import RuntimeConfig

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
DepsFactory = Callable[[], Deps]

logger = Logger()


class UnguardedRouteError(RuntimeError):
    """A route was added without a policy (not through ``EndpointRouter.endpoint``)."""


class NimbusApp:
    """A function's resolver, its registered endpoints, and where its dependencies come from."""

    def __init__(self, routers: list[EndpointRouter], deps: DepsFactory) -> None:
        self.resolver = APIGatewayHttpResolver()
        self.resolver.exception_handler(Exception)(response_for_exception)
        self.resolver.not_found(_not_found)
        self.endpoints: list[Endpoint] = []
        for group in routers:
            self.resolver.include_router(group.router)
            self.endpoints += group.endpoints
        self.deps = deps
        _refuse_unguarded(self.resolver, self.endpoints)
        _literals_first(self.resolver)
        self.literal_siblings = literal_siblings(self.endpoints)
        for group in routers:  # literals of other functions' routes, declared by the group
            for endpoint in group.endpoints:
                for name, values in group.reserved.items():
                    if f"<{name}>" in endpoint.path:
                        params = self.literal_siblings.setdefault(endpoint.path, {})
                        params[name] = params.get(name, frozenset()) | values

    def resolve(
        self, event: dict[str, Any], context: LambdaContext, config: RuntimeConfig | None = None
    ) -> dict[str, Any]:
        """Answer one API Gateway event with this app's dependencies; ``config`` is the runtime
        configuration already read for this request (None: the guard reads it)."""
        self.resolver.append_context(
            **{
                guard.DEPS_CONTEXT_KEY: self.deps(),
                guard.LITERALS_CONTEXT_KEY: self.literal_siblings,
                guard.CONFIG_CONTEXT_KEY: config,
            }
        )
        return self.resolver.resolve(event, context)


def create_app(*routers: EndpointRouter, deps: DepsFactory) -> NimbusApp:
    """An app whose errors, unknown routes and unexpected failures all answer contract JSON, and
    which refuses to exist if any route lacks a policy."""
    return NimbusApp(list(routers), deps)


def literal_siblings(endpoints: list[Endpoint]) -> dict[str, dict[str, frozenset[str]]]:
    """Per parameterised path, the values each parameter must not take because a sibling route
    spells them literally (CONTRACT section 1: literal segments win over parameters).

    API Gateway already prefers ``DELETE /users/me/sessions/all`` to ``/users/me/sessions/{sid}``,
    but a GET of ``.../sessions/all`` has no literal route and reaches ``{sid}`` with ``sid=all``:
    that must be 404 INVALID_ENDPOINT_ERROR, not a lookup of a session named "all".
    """
    split = {e.path: e.path.strip("/").split("/") for e in endpoints}
    reserved: dict[str, dict[str, set[str]]] = {}
    for path, segments in split.items():
        for other in split.values():
            if len(other) != len(segments):
                continue
            differing = [i for i, (a, b) in enumerate(zip(segments, other, strict=True)) if not _same(a, b)]
            if len(differing) == 1 and _is_param(segments[i := differing[0]]) and not _is_param(other[i]):
                reserved.setdefault(path, {}).setdefault(segments[i][1:-1], set()).add(other[i])
    return {p: {name: frozenset(values) for name, values in params.items()} for p, params in reserved.items()}


def _is_param(segment: str) -> bool:
    return segment.startswith("<") and segment.endswith(">")


def _same(a: str, b: str) -> bool:
    return a == b or (_is_param(a) and _is_param(b))


def _literals_first(resolver: APIGatewayHttpResolver) -> None:
    """Try ``/users/<uid>/sessions/all`` before ``/users/<uid>/sessions/<sid>``, as API Gateway does.

    Powertools matches routes in registration order; sorting by "literal before parameter, segment
    by segment" (stable, so otherwise unchanged) makes the order of declarations irrelevant.
    """
    resolver._dynamic_routes.sort(key=lambda route: [_is_param(s) for s in route.path.strip("/").split("/")])


def _refuse_unguarded(resolver: APIGatewayHttpResolver, endpoints: list[Endpoint]) -> None:
    declared = {(e.method, e.path) for e in endpoints}
    # Powertools keeps its routes in these two lists; every one must have come through the registry.
    for route in [*resolver._static_routes, *resolver._dynamic_routes]:
        if (route.method, route.path) not in declared:
            raise UnguardedRouteError(f"{route.method} {route.path} has no policy")


def _not_found(_exc: Exception) -> Response[str]:
    return error_response(NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR))


def create_handler(app: NimbusApp) -> LambdaHandler:
    """The Lambda handler for ``app``: structured logging with the request id, the operator's log
    level, and a tolerated trailing slash."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        config = _runtime_config(app)
        if config is not None:
            set_log_level(logger, config.log_level)
        _strip_trailing_slash(event)
        metrics.begin()
        try:
            return app.resolve(event, context, config)
        finally:
            metrics.flush()

    return lambda_handler


def _runtime_config(app: NimbusApp) -> RuntimeConfig | None:
    """The runtime configuration, read once per request: its log level applies here, its kill
    switches in the guard. None if it cannot be read: logging keeps its level, and the guard reads
    again and answers 500 if it still cannot."""
    try:
        return app.deps().config.current()
    except Exception:
        return None


def _strip_trailing_slash(event: dict[str, Any]) -> None:
    path = event.get("rawPath") or ""
    if len(path) > 1 and path.endswith("/"):
        event["rawPath"] = path.rstrip("/") or "/"
        http = event.get("requestContext", {}).get("http", {})
        if "path" in http:
            http["path"] = event["rawPath"]
