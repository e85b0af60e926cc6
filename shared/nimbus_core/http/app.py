"""The app (a function's route table) and the Lambda entry point that every HTTP function uses.

A request goes: handler (logging context, runtime configuration, trailing slash) -> the app's route
table (:mod:`nimbus_core.http.routing`) -> the route's guard (:mod:`nimbus_core.http.guard`) ->
the route; its :class:`~nimbus_core.http.responses.Reply` is sent with the status the route was
declared with, whatever it raises becomes a response in :func:`response_for_exception`, and the
:class:`~nimbus_core.http.responses.Response` becomes the payload 2.0 result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.loglevels import set_log_level
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.http.event import HttpEvent
from nimbus_core.http.guard import GuardedRoute, guard, unguardable
from nimbus_core.http.policy import Endpoint, Policy
from nimbus_core.http.registry import Declared, EndpointRouter, UnguardedRouteError
from nimbus_core.http.responses import error_response, response_for_exception
from nimbus_core.http.routing import RouteTable, literal_siblings
from nimbus_core.platform import metrics

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
DepsFactory = Callable[[], Deps]

logger = Logger()


class NimbusApp:
    """A function's registered endpoints, their route table, and where its dependencies come from."""

    def __init__(self, routers: list[EndpointRouter], deps: DepsFactory) -> None:
        declared = [d for group in routers for d in group.declared]
        _refuse_unguarded(declared)
        self.endpoints: list[Endpoint] = [d.endpoint for d in declared]
        self.deps = deps
        reserved = _reserved(routers, self.endpoints)
        self.routes: RouteTable[GuardedRoute] = RouteTable.build(
            (
                d.endpoint.method,
                d.endpoint.path,
                guard(d.endpoint, d.route, reserved=reserved.get(d.endpoint.path, {})),
            )
            for d in declared
        )

    def resolve(self, event: dict[str, Any], config: RuntimeConfig | None = None) -> dict[str, Any]:
        """Answer one API Gateway event with this app's dependencies; ``config`` is the runtime
        configuration already read for this request (None: the guard reads it).

        An unknown path, or a known path with another method, is 404 INVALID_ENDPOINT_ERROR; any
        exception a guard or route raises is answered by :func:`response_for_exception`.
        """
        # Outside the try, as with Powertools: dependencies that cannot be built, or an event API
        # Gateway never sends (no method, stage or path), fail the invocation; they are no request.
        deps = self.deps()
        http = HttpEvent(event)
        found = self.routes.match(http.method, http.path)
        try:
            if found is None:
                response = error_response(NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR))
            else:
                route, path = found
                response = route(http, path, deps, config)
        except Exception as exc:
            response = response_for_exception(exc)
        return response.to_lambda()


def create_app(*routers: EndpointRouter, deps: DepsFactory) -> NimbusApp:
    """An app whose errors, unknown routes and unexpected failures all answer contract JSON, and
    which refuses to exist if any route lacks a policy or is declared twice."""
    return NimbusApp(list(routers), deps)


def _refuse_unguarded(declared: list[Declared]) -> None:
    # EndpointRouter.endpoint already refuses a route without a policy; this also catches one
    # appended to a group's declarations by hand, and a policy the guard's steps cannot hold.
    for d in declared:
        label = f"{d.endpoint.method} {d.endpoint.path}"
        if not isinstance(d.endpoint.policy, Policy):
            raise UnguardedRouteError(f"{label} has no policy")
        if (reason := unguardable(d.endpoint)) is not None:
            raise UnguardedRouteError(f"{label}: {reason}")


def _reserved(
    routers: list[EndpointRouter], endpoints: list[Endpoint]
) -> dict[str, dict[str, frozenset[str]]]:
    """Per path, the values its parameters must not take: the literal siblings among this app's
    routes, and the literals of other functions' routes that a group declares (``reserved``)."""
    reserved = literal_siblings(e.path for e in endpoints)
    for group in routers:
        for endpoint in group.endpoints:
            for name, values in group.reserved.items():
                if f"<{name}>" in endpoint.path:
                    params = reserved.setdefault(endpoint.path, {})
                    params[name] = params.get(name, frozenset()) | values
    return reserved


def create_handler(app: NimbusApp) -> LambdaHandler:
    """The Lambda handler for ``app``: structured logging with the request id, the operator's log
    level and a tolerated trailing slash (the handler module registers the SnapStart hooks)."""

    # The correlation id is set from the event directly: the decorator's correlation_id_path would
    # run a JMESPath query on every request to read the same key.
    @logger.inject_lambda_context(clear_state=True)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        logger.set_correlation_id(_request_id(event))
        config = _runtime_config(app)
        if config is not None:
            set_log_level(logger, config.log_level)
        _strip_trailing_slash(event)
        metrics.begin()
        try:
            return app.resolve(event, config)
        finally:
            metrics.flush()

    return lambda_handler


def _request_id(event: dict[str, Any]) -> str | None:
    """API Gateway's id of the request (``requestContext.requestId``), as Powertools'
    ``correlation_paths.API_GATEWAY_HTTP`` read it: None when the event has none."""
    context = event.get("requestContext")
    return context.get("requestId") if isinstance(context, dict) else None


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
