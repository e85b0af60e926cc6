"""The request models a policy names, resolved to their pydantic classes on first use.

A policy names its body, query and path models by class name (``Policy(body="ChangeUsernameBody")``)
and its group's router names the module that holds them (``EndpointRouter(models="accounts_api.models")``).
Importing a handler therefore imports neither that module nor pydantic's validation
(:mod:`nimbus_core.http.validation`): the first request that validates a model imports its module, and
every later one finds the class in this module's cache. ``tests/unit/test_endpoint_registry.py``
resolves every name a function declares, so a misspelt name fails a test, never a request.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

type ModelKind = Literal["body", "query", "path"]
"""What a policy can name a model for: the JSON body, the query string, the path parameters."""


class UnknownModelError(LookupError):
    """A policy names a model its group's models module does not hold (or its group names no module)."""


def check_model_name(endpoint: str, kind: ModelKind, name: object, module: str | None) -> None:
    """Refuse, where ``endpoint`` (``"PUT /users/me/username"``) is declared, a ``kind`` model that
    cannot be a name in ``module``: a class given instead of its name, a name that is no
    identifier, or no module to look it up in. Nothing is imported: whether the module holds the
    model is the registry test's to check."""
    if name is None:
        return
    if not isinstance(name, str):
        raise TypeError(f"{endpoint}: Policy.{kind} names its model by class name (a str), not {name!r}")
    if not name.isidentifier():
        raise UnknownModelError(f"{endpoint}: Policy.{kind}={name!r} is not a class name")
    if module is None:
        raise UnknownModelError(
            f"{endpoint}: Policy.{kind}={name!r}, but its EndpointRouter names no models module (models=...)"
        )


@functools.cache
def request_model(module: str, name: str) -> type[BaseModel]:
    """The pydantic class ``name`` of ``module``, imported on the first call and cached; raises
    :class:`UnknownModelError` when the module holds no pydantic model of that name."""
    from pydantic import BaseModel  # already imported by any module that holds a model

    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise UnknownModelError(f"{module} has no pydantic model {name!r}")
    return found


def validated(module: str | None, name: str, data: dict[str, Any]) -> Any:
    """``data`` validated by the model ``name`` of ``module``: the model's instance, or the CONTRACT's
    400 (see :func:`nimbus_core.http.validation.validate`). Pydantic's validation is imported here, with
    the first request that needs it."""
    from nimbus_core.http.validation import validate

    if module is None:  # refused where the route was declared (check_model_name); never reached
        raise UnknownModelError(f"no models module to find {name!r} in")
    return validate(request_model(module, name), data)
