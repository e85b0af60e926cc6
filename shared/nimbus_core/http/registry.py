"""One endpoint registry: each route is declared once, with its policy, by one decorator.

``@router.endpoint("PUT", "/users/me/username", Policy(...))`` registers the Powertools route AND
its guard; a route cannot exist without a policy, and :func:`nimbus_core.http.app.create_app`
refuses an app holding a route that did not come through here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from nimbus_core.http.guard import Request, current_request, guard
from nimbus_core.http.policy import Endpoint, Policy

RouteFunction = Callable[[Request], Response[Any]]


class EndpointRouter:
    """A group's routes, each declared with :meth:`endpoint`."""

    def __init__(self, *, reserved: dict[str, frozenset[str]] | None = None) -> None:
        self.router = APIGatewayHttpRouter()
        self.endpoints: list[Endpoint] = []
        # Values a path parameter must not take because another function's literal route spells
        # them (``/users/me/...`` is Accounts', so ``/users/<id>/ban`` with id=me is no route).
        self.reserved = reserved or {}

    def endpoint(self, method: str, path: str, policy: Policy) -> Callable[[RouteFunction], RouteFunction]:
        """Register ``method path`` guarded by ``policy``; the function receives the guarded Request."""

        def register(func: RouteFunction) -> RouteFunction:
            router = self.router

            @functools.wraps(func)
            def route(**path_params: str) -> Response[Any]:
                request = current_request()
                request.path = path_params
                return func(request)

            router.route(path, method.upper(), middlewares=[guard(policy)])(route)
            self.endpoints.append(
                Endpoint(method.upper(), path, policy, func.__name__, inspect.getdoc(func) or "")
            )
            return func

        return register
