"""What an endpoint requires, declared once next to its route (CONTRACT section 4 and the seed)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel

from nimbus_core.killswitches import KillSwitch
from nimbus_core.ratelimits import RateLimit
from nimbus_core.scopes import Scope


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
    """

    auth: Auth = Auth.REQUIRED
    killswitches: tuple[KillSwitch, ...] = ()
    staff: bool = False
    scope: Scope | None = None
    scoped_sessions: bool = True
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    # Path parameters with rules of their own (a kill switch's number), checked with the body.
    path: type[BaseModel] | None = None
    rate_limit: RateLimit | None = None
    # Identity reverification (CONTRACT section 9): normal sessions must send their password.
    reverify: bool = False
    # Sessions created here are named by X-Session-Name, or else after the User-Agent.
    names_session: bool = False
    # The path parameter naming the user a staff endpoint works on: read with the caller's session
    # in the authentication's one BatchGetItem (Request.target_user).
    target: str | None = None
    # Staff changes to other accounts and to the service leave an audit line (nimbus_core.audit).
    audit: bool = False
    # For the OpenAPI document (nimbus_tools.openapi): the success status and its response model.
    # The error statuses are derived from the policy and the route's docstring, never listed by hand.
    success: int = 200
    # The name of its response model in ``nimbus_core.views``: named, not imported, because the
    # views only describe responses (the routes build the JSON themselves) and their twenty-odd
    # pydantic classes were about 15 ms of every cold start. The document's test resolves each name.
    response: str | None = None
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One registered route: method, path (``/users/<id>`` style) and its policy, with the route
    function's name and docstring (the OpenAPI document's operation id and description: the
    docstring names the error codes the route answers beyond the guard's)."""

    method: str
    path: str
    policy: Policy
    name: str
    doc: str = ""
