"""One endpoint registry: each route is declared once, with its policy, by one decorator.

``@router.endpoint("PUT", "/users/me/username", Policy(...))`` declares the route AND its guard. It
is the only way to declare a route: a group holds nothing else, and
:func:`nimbus_core.http.app.create_app` builds its route table from these declarations alone, each
behind :func:`nimbus_core.http.guard.guard` with its policy.

A group's router names the module that holds its request models
(``EndpointRouter(models="accounts_api.models")``); its policies name their body, query and path
models in it by class name (``Policy(body="ChangeUsernameBody")``), resolved on first use
(:mod:`nimbus_core.http.request_models`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from nimbus_core.http.guard import RouteFunction
from nimbus_core.http.policy import Endpoint, Policy
from nimbus_core.http.request_models import ModelKind, check_model_name


class UnguardedRouteError(RuntimeError):
    """A route declared without a policy."""


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared route: its endpoint (method, path, policy, documentation) and its function."""

    endpoint: Endpoint
    route: RouteFunction


class EndpointRouter:
    """A group's routes, each declared with :meth:`endpoint`."""

    def __init__(
        self, *, models: str | None = None, reserved: dict[str, frozenset[str]] | None = None
    ) -> None:
        self.declared: list[Declared] = []
        # The module (``accounts_api.models``) holding the body, query and path models that this
        # group's policies name; imported by the first request that validates one, never before.
        self.models = models
        # Values a path parameter must not take because another function's literal route spells
        # them (``/users/me/...`` is Accounts', so ``/users/<id>/ban`` with id=me is no route).
        self.reserved = reserved or {}

    @property
    def endpoints(self) -> list[Endpoint]:
        """The declared endpoints, in declaration order."""
        return [declared.endpoint for declared in self.declared]

    def endpoint(self, method: str, path: str, policy: Policy) -> Callable[[RouteFunction], RouteFunction]:
        """Declare ``method path`` guarded by ``policy``; the function receives the guarded Request.

        Refuses anything but a :class:`Policy` at once, where the route is declared, and a policy
        whose body, query or path model is not a class name this group could resolve (no module
        is imported here: see :func:`~nimbus_core.http.request_models.check_model_name`).
        """
        if not isinstance(policy, Policy):
            raise UnguardedRouteError(f"{method.upper()} {path} has no policy")
        named: tuple[tuple[ModelKind, str | None], ...] = (
            ("body", policy.body),
            ("query", policy.query),
            ("path", policy.path),
        )
        for kind, name in named:
            check_model_name(f"{method.upper()} {path}", kind, name, self.models)

        def register(func: RouteFunction) -> RouteFunction:
            doc = inspect.getdoc(func) or ""
            endpoint = Endpoint(method.upper(), path, policy, func.__name__, doc, self.models)
            self.declared.append(Declared(endpoint, func))
            return func

        return register
