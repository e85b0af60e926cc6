"""What an endpoint requires, declared once next to its route (CONTRACT section 4 and the seed)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.ratelimits import RateLimit
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.request_models import ModelKind, UnknownModelError, request_model

if TYPE_CHECKING:
    from pydantic import BaseModel


class Auth(Enum):
    """What an endpoint needs of the caller's session."""

    REQUIRED = "required"
    NONE = "none"  # no session needed; the token is only read to let staff past kill switches
    GUEST = "guest"  # register/login: a valid session means "already logged in" (401)


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the guard checks for one endpoint, plus what the OpenAPI document needs.

    ``scope=None`` on an endpoint that requires a session means "no scoped session may call it"
    only when ``scoped_sessions`` is False; otherwise it needs no particular scope.

    ``body``, ``query`` and ``path`` are class names in the module its group's
    :class:`~nimbus_core.http.registry.EndpointRouter` names (``models="accounts_api.models"``):
    named, not imported, so that importing a handler imports no pydantic model; the first request
    that validates one imports it (:mod:`nimbus_core.http.request_models`).
    """

    auth: Auth = Auth.REQUIRED
    killswitches: tuple[KillSwitch, ...] = ()
    staff: bool = False
    scope: Scope | None = None
    scoped_sessions: bool = True
    body: str | None = None
    query: str | None = None
    # Path parameters with rules of their own (a kill switch's number), checked with the body.
    path: str | None = None
    rate_limit: RateLimit | None = None
    # Identity reverification (CONTRACT section 9): normal sessions must send their password.
    reverify: bool = False
    # Sessions created here are named by X-Session-Name, or else after the User-Agent.
    names_session: bool = False
    # The path parameter naming the user a staff endpoint works on: read with the caller's session
    # in the authentication's one BatchGetItem (Request.target_user).
    target: str | None = None
    # Whether a scoped session may name its own account here (the ``target`` parameter, or the ids
    # a route passes to Request.refuse_own_account_to_scoped): False where the same change through
    # /users/me is closed to scoped sessions (deleting the account, removing its factors, changing
    # its password or address), so no path around that rule exists: 403
    # INSUFFICIENT_PERMISSIONS_ERROR, at the scope step for the path's user (CONTRACT section 4).
    scoped_self: bool = True
    # Staff changes to other accounts and to the service leave an audit line (nimbus_core.accounts.audit).
    audit: bool = False
    # For the OpenAPI document (nimbus_tools.openapi): the success status and its response model.
    # The error statuses are derived from the policy and the route's docstring, never listed by hand.
    success: int = 200
    # The name of its response model in ``nimbus_core.http.views``: named, not imported, because the
    # views only describe responses (the routes build the JSON themselves) and their twenty-odd
    # pydantic classes would weigh on every cold start. The document's test resolves each name.
    response: str | None = None
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One registered route: method, path (``/users/<id>`` style) and its policy, with the route
    function's name and docstring (the OpenAPI document's operation id and description: the
    docstring names the error codes the route answers beyond the guard's), and the module its
    group's models are in (where the policy's ``body``, ``query`` and ``path`` names are found)."""

    method: str
    path: str
    policy: Policy
    name: str
    doc: str = ""
    models: str | None = None

    def model_name(self, kind: ModelKind) -> str | None:
        """The class name the policy gives for ``kind`` (body, query or path), None when it has none."""
        return {"body": self.policy.body, "query": self.policy.query, "path": self.policy.path}[kind]

    def model(self, kind: ModelKind) -> type[BaseModel] | None:
        """The pydantic class the policy names for ``kind``, imported from the group's models module
        (on first use; cached), None when the policy names none; :class:`UnknownModelError` when
        the module holds no such model."""
        name = self.model_name(kind)
        if name is None:
            return None
        if self.models is None:
            raise UnknownModelError(f"{self.method} {self.path} names {name!r}, but no models module")
        return request_model(self.models, name)
