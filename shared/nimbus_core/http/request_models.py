"""The types a route's signature names, read at declaration and resolved to classes on first use.

A route declares its input and its answer in its signature, which mypy checks::

    def change_username(request: Request[ChangeUsernameBody]) -> Reply[UserView]: ...

``Request`` is generic over the body, query and path models (each ``None`` when absent:
``Request[None, SessionsQuery]``), ``Reply`` over the view, the type of the answer's payload. A
route that answers another success too (a step of a two-step endpoint, at the status its
declaration's ``also`` gives) returns a union: ``-> Reply[SuccessfulAuthView] | Reply[PasskeyChallengeView]``.
Routes modules use ``from __future__ import annotations`` and import those classes only under
``if TYPE_CHECKING:``, so their annotations stay strings and importing a handler imports no pydantic
model and no view.

:func:`read_signature` reads the class NAMES out of those strings where the route is declared (no
import; a signature of another shape is refused there), and :func:`resolve` finds each class when it
is first needed: a request model with the first request that validates one (in the route module's
globals, then in its group's models module, ``EndpointRouter(models="accounts_api.models")``), a view
(a ``TypedDict``) only for the OpenAPI document and the tests (in the route module, then
``nimbus_core.http.views``).
Each annotation is resolved alone, so validating a body never imports the views.
``tests/unit/test_endpoint_registry.py`` resolves every endpoint's annotations with
:func:`typing.get_type_hints` and checks that both agree, so a misspelt name fails a test, not a request.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

type RequestKind = Literal["body", "query", "path"]
"""What a signature can name a request model for: the JSON body, the query string, the path
parameters (the request's type arguments, in that order)."""
type ModelKind = RequestKind | Literal["response"]
"""What a signature can name a class for: a request model, or the view of its success (the reply's)."""

REQUEST_KINDS: tuple[RequestKind, ...] = ("body", "query", "path")
VIEWS = "nimbus_core.http.views"
# ``Request``, ``Request[A]``, ``Reply[UserView]``: a name, then optionally its type arguments.
_GENERIC = re.compile(r"(\w+)\s*(?:\[(.*)\])?")


class UnknownModelError(LookupError):
    """A signature names a class its group's models module (or the views) does not hold."""


class RouteSignatureError(TypeError):
    """A route whose signature is not ``(request: Request[...]) -> Reply[View]`` (or a union of
    replies, or ``Response``)."""


@dataclass(frozen=True, slots=True)
class RouteSignature:
    """The class names a route's signature gives, where it finds them, and what it returns.

    ``module`` is the route's module (its globals are searched first); ``models`` the group's models
    module. ``returns`` is the name of what the route returns (``Reply`` or ``Response``);
    ``response`` names the view of its declared status, ``others`` those of its other successes
    (the union's other replies, in order).
    """

    module: str = ""
    models: str | None = None
    body: str | None = None
    query: str | None = None
    path: str | None = None
    response: str | None = None
    returns: str = "Response"
    others: tuple[str, ...] = ()

    def name(self, kind: ModelKind) -> str | None:
        """The class name given for ``kind``, None when the signature gives none."""
        return {"body": self.body, "query": self.query, "path": self.path, "response": self.response}[kind]


def read_signature(
    route: Callable[..., object], endpoint: str, *, models: str | None, returns: tuple[str, str]
) -> tuple[str, RouteSignature]:
    """The names ``route`` (declared as ``endpoint``, ``"PUT /users/me/username"``) gives in its
    annotations, and the name its first parameter's annotation is spelt with (``Request``), for the
    registry to check. ``returns`` is (the generic reply's name, the plain response's name).

    Refuses (:class:`RouteSignatureError`) anything but ``(request: Request[B, Q, P]) -> Reply[V]``
    (or ``-> Reply[V] | Reply[W]``) or ``-> Response``, with string annotations (``from __future__
    import annotations``) whose type arguments are plain names or ``None``. Nothing is imported here.
    """
    code = getattr(route, "__code__", None)
    annotations: dict[str, object] = getattr(route, "__annotations__", {})
    if code is None or code.co_argcount != 1:
        raise RouteSignatureError(f"{endpoint}: a route takes one argument, its Request")
    head, args = _generic(endpoint, annotations.get(code.co_varnames[0]), "its parameter")
    if len(args) > len(REQUEST_KINDS):
        raise RouteSignatureError(f"{endpoint}: Request takes a body, query and path model, no more")
    body, query, path = (*args, None, None, None)[:3]
    reply, views = _returned(endpoint, annotations.get("return"), returns)
    response, *others = views or (None,)
    module = getattr(route, "__module__", "") or ""
    return head, RouteSignature(module, models, body, query, path, response, reply, tuple(others))


def _returned(endpoint: str, annotation: object, returns: tuple[str, str]) -> tuple[str, list[str]]:
    """``"Reply[A] | Reply[B]"`` -> ``("Reply", ["A", "B"])``; ``"Response"`` -> ``("Response", [])``."""
    parts = annotation.split("|") if isinstance(annotation, str) else [annotation]
    read = [_generic(endpoint, part, "its return") for part in parts]
    views = [view for name, args in read if name == returns[0] and len(args) == 1 for view in args if view]
    if len(views) != len(read) and read != [(returns[1], ())]:
        raise RouteSignatureError(
            f"{endpoint}: a route returns {returns[0]}[View] (or a {returns[1]} it builds), not {annotation}"
        )
    return read[0][0], views


def _generic(endpoint: str, annotation: object, what: str) -> tuple[str, tuple[str | None, ...]]:
    """``"Request[A, None]"`` -> ``("Request", ("A", None))``."""
    if not isinstance(annotation, str):
        raise RouteSignatureError(
            f"{endpoint}: {what} is annotated {annotation!r}: routes modules use "
            "`from __future__ import annotations` (their models are imported with the first request)"
        )
    found = _GENERIC.fullmatch(annotation.strip())
    args = [] if found is None or found.group(2) is None else [a.strip() for a in found.group(2).split(",")]
    if found is None or not all(a.isidentifier() for a in args):
        raise RouteSignatureError(f"{endpoint}: {what} is annotated {annotation!r}: not a class with names")
    return found.group(1), tuple(None if a == "None" else a for a in args)


def resolve(signature: RouteSignature, kind: RequestKind) -> type[BaseModel] | None:
    """The pydantic class the signature names for ``kind``, None when it names none; found (and its
    module imported) on the first call, then cached. :class:`UnknownModelError` when neither the
    route's module nor the group's models module holds such a model."""
    from pydantic import BaseModel  # already imported by any module that holds a model

    name = signature.name(kind)
    if name is None:
        return None
    found = _find(signature.module, signature.models, name)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise UnknownModelError(
            f"{signature.module} names {name!r}, which is no pydantic model of {signature.models}"
        )
    return found


def resolve_view(signature: RouteSignature, name: str) -> type:
    """The view ``name`` that the signature names (its success's, or another's of its union), found
    in the route's module, then :mod:`nimbus_core.http.views` (imported here, never to answer).
    :class:`UnknownModelError` when neither holds such a ``TypedDict``."""
    from typing_extensions import is_typeddict  # the views' TypedDict is typing_extensions'

    found = _find(signature.module, VIEWS, name)
    if not (isinstance(found, type) and is_typeddict(found)):
        raise UnknownModelError(f"{signature.module} names {name!r}, which is no view of {VIEWS}")
    return found


@functools.cache
def _find(module: str, fallback: str | None, name: str) -> object:
    found = getattr(sys.modules.get(module), name, None)
    if found is None and fallback is not None:
        found = getattr(importlib.import_module(fallback), name, None)
    return found


def validated(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``data`` validated by ``model``: its instance, or the CONTRACT's 400 (see
    :func:`nimbus_core.http.validation.validate`). Pydantic's validation is imported here, with the
    first request that needs it."""
    from nimbus_core.http.validation import validate

    return validate(model, data)
