"""What an endpoint requires, declared once next to its route (CONTRACT section 4 and the seed).

A :class:`Policy` holds what the guard checks; an :class:`Endpoint` is one declared route: its method
and path, its policy, the types its signature names (:mod:`nimbus_core.http.request_models`), its
success status and the errors it answers beyond the guard's (:class:`ErrorAt` for a code answered
with a status other than its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.ratelimits import RateLimit
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.request_models import ModelKind, RequestKind, RouteSignature, resolve, resolve_view

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel


class Auth(Enum):
    """What an endpoint needs of the caller's session."""

    REQUIRED = "required"
    NONE = "none"  # no session needed; the token is only read to let staff past kill switches
    GUEST = "guest"  # register/login: a valid session means "already logged in" (401)


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the guard checks for one endpoint (the body, query and path models it validates
    are the route's signature's, see :class:`Endpoint`).

    ``scope=None`` on an endpoint that requires a session means "no scoped session may call it"
    only when ``scoped_sessions`` is False; otherwise it needs no particular scope.

    Each field is read by the guard's steps (:mod:`nimbus_core.http.steps`), which say from it
    whether they apply and what they can answer; a route's special case is a field here, never a
    "METHOD /path" string in a lower layer.
    """

    auth: Auth = Auth.REQUIRED
    killswitches: tuple[KillSwitch, ...] = ()
    staff: bool = False
    scope: Scope | None = None
    scoped_sessions: bool = True
    rate_limit: RateLimit | None = None
    # Requests the rate limit does not count, judged on the validated body: the first step of a
    # two-step endpoint, which proves nothing (its second step is counted).
    uncounted: Callable[[Any], bool] | None = None
    # Identity reverification (CONTRACT section 9): normal sessions must send their password.
    reverify: bool = False
    # The route sets the caller's own password: the reverification then leaves a stored hash of
    # another profile as it is (the route's write replaces it anyway, and two writes of the hash in
    # one request would make the second one's condition fail).
    sets_own_password: bool = False
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
    # Whether a scoped session may act here on a staff account (the ``target`` parameter's user,
    # its own included): False where the change would let a leaked staff key take a staff account
    # (its password, address, second factors or verification) and with it the staff it holds:
    # 403 INSUFFICIENT_PERMISSIONS_ERROR at the scope step (CONTRACT section 8, staff by people).
    scoped_staff: bool = True
    # Staff changes to other accounts and to the service leave an audit line (nimbus_core.accounts.audit).
    audit: bool = False


@dataclass(frozen=True, slots=True)
class ErrorAt:
    """An error a route answers with a status other than its code's own (404 INVALID_SESSION_ERROR
    for an unknown session id, where the code's own is 401)."""

    status: int
    code: ErrorCode


type RouteError = ErrorCode | ErrorAt
"""An error a route declares it can answer: a code (with its own status), or :class:`ErrorAt`."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One declared route: method, path (``/users/<id>`` style) and policy; the route function's name
    and docstring (the OpenAPI document's operation id and description); the types its signature
    names (``signature``: the body, query and path models, the views of its successes); the status
    of its success (and of its others, ``also``), the errors it can answer beyond the guard's, and
    its one-line summary."""

    method: str
    path: str
    policy: Policy
    name: str
    doc: str = ""
    signature: RouteSignature = field(default_factory=RouteSignature)
    status: int = 200
    errors: tuple[RouteError, ...] = ()
    summary: str = ""
    # The statuses of the route's other successes (a step of a two-step endpoint), in the order of
    # the other replies its return annotation names (``-> Reply[A] | Reply[B]``: B's).
    also: tuple[int, ...] = ()

    @property
    def models(self) -> str | None:
        """The group's models module, where the signature's request models are found."""
        return self.signature.models

    def model_name(self, kind: ModelKind) -> str | None:
        """The class name the signature gives for ``kind`` (body, query, path or response), or None."""
        return self.signature.name(kind)

    def model(self, kind: RequestKind) -> type[BaseModel] | None:
        """The pydantic class the signature names for ``kind``, found on first use (cached), None
        when it names none; :class:`~nimbus_core.http.request_models.UnknownModelError` when no
        such model exists where it is looked for."""
        return resolve(self.signature, kind)

    def successes(self) -> dict[int, type | None]:
        """Each status the route answers a success with, and the view of that success (its
        ``TypedDict``, found on first use; None for a route that builds its own Response): the
        declared status first, then ``also``'s. For the OpenAPI document and the tests."""
        view = self.signature.response
        others = zip(self.also, self.signature.others, strict=True)
        return {
            self.status: resolve_view(self.signature, view) if view is not None else None,
            **{status: resolve_view(self.signature, other) for status, other in others},
        }

    def route_errors(self) -> set[tuple[int, ErrorCode]]:
        """The (status, code) pairs the route declares, beyond the guard's."""
        return {(e.status, e.code) if isinstance(e, ErrorAt) else (e.status, e) for e in self.errors}
