"""One endpoint registry: each route is declared once, by one decorator on a typed function.

::

    @routes.endpoint("PUT", "/users/me/username", Policy(...), errors=(ErrorCode.USER_EXISTS_ERROR,))
    def change_username(request: Request[ChangeUsernameBody]) -> Reply[UserView]: ...

declares the route AND its guard: the policy (what the guard checks), the body, query and path
models and the success's view (the signature's types, which mypy checks), the success status
(``status=``, 200 unless given: the one the answer is sent with and the document lists), the
errors it answers beyond the guard's (``errors=``) and its summary. It is the only way to declare a
route: a group holds nothing else, and :func:`nimbus_core.http.app.create_app` builds its route
table from these declarations alone, each behind :func:`nimbus_core.http.guard.guard`.

A group's router names the module that holds its request models
(``EndpointRouter(models="accounts_api.models")``), where the names of its routes' signatures are
found on first use (:mod:`nimbus_core.http.request_models`); the routes module imports them only
under ``if TYPE_CHECKING:``. A signature of any other shape is refused where it is declared.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from nimbus_core.http.policy import Endpoint, Policy, RouteError
from nimbus_core.http.request import Request, RouteFunction
from nimbus_core.http.request_models import REQUEST_KINDS, RouteSignatureError, read_signature
from nimbus_core.http.responses import Reply, Response


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
        # group's signatures name; imported by the first request that validates one, never before.
        self.models = models
        # Values a path parameter must not take because another function's literal route spells
        # them (``/users/me/...`` is Accounts', so ``/users/<id>/ban`` with id=me is no route).
        self.reserved = reserved or {}

    @property
    def endpoints(self) -> list[Endpoint]:
        """The declared endpoints, in declaration order."""
        return [declared.endpoint for declared in self.declared]

    def endpoint[R: RouteFunction](
        self,
        method: str,
        path: str,
        policy: Policy,
        *,
        status: int = 200,
        errors: tuple[RouteError, ...] = (),
        summary: str = "",
        also: tuple[int, ...] = (),
    ) -> Callable[[R], R]:
        """Declare ``method path`` guarded by ``policy``, answering ``status`` on success (the
        function's :class:`~nimbus_core.http.responses.Reply` is sent with it) and, beyond the
        guard's errors, ``errors``; the function receives the guarded :class:`Request`. ``also``
        gives the statuses of a two-step endpoint's other successes, one for each other reply its
        return annotation names (``-> Reply[SuccessfulAuthView] | Reply[PasskeyChallengeView]``
        with ``status=201, also=(200,)``): the route's Reply says which it is (``Reply(...,
        status=200)``).

        Refuses, where the route is declared, anything but a :class:`Policy`, and a function whose
        signature is not ``(request: Request[...]) -> Reply[...]`` (or ``-> Response``: a route
        that builds its own answer) with names its group can resolve later (nothing is imported
        here: see :func:`~nimbus_core.http.request_models.read_signature`).
        """
        label = f"{method.upper()} {path}"
        if not isinstance(policy, Policy):
            raise UnguardedRouteError(f"{label} has no policy")

        def register(func: R) -> R:
            head, signature = read_signature(
                func, label, models=self.models, returns=(Reply.__name__, Response.__name__)
            )
            _check_spelt_with(func, label, head, Request)
            returned = {Reply.__name__: Reply, Response.__name__: Response}[signature.returns]
            _check_spelt_with(func, label, signature.returns, returned)
            if len(also) != len(signature.others):
                raise RouteSignatureError(
                    f"{label}: also= gives {len(also)} other statuses, its return annotation names "
                    f"{len(signature.others)} other replies"
                )
            for kind in REQUEST_KINDS:
                if signature.name(kind) is not None and self.models is None:
                    raise RouteSignatureError(
                        f"{label}: its {kind} model is named, but its EndpointRouter names no models module"
                    )
            doc = inspect.getdoc(func) or ""
            endpoint = Endpoint(
                method.upper(), path, policy, func.__name__, doc, signature, status, errors, summary, also
            )
            self.declared.append(Declared(endpoint, func))
            return func

        return register


def _check_spelt_with(func: Callable[..., object], label: str, name: str, expected: type) -> None:
    """The name an annotation is spelt with is ``expected`` in the route's module (its own
    import of ``Request``, ``Reply`` or ``Response``), not another class of that name."""
    if getattr(func, "__globals__", {}).get(name) is not expected:
        raise RouteSignatureError(
            f"{label}: {name!r} in its signature is not {expected.__module__}.{expected.__qualname__}"
        )
