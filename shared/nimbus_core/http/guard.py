"""The endpoint guard: CONTRACT section 4's order of checks, implemented once for every endpoint.

Each route declares an :class:`Endpoint` policy and gets ``guard(policy)`` as its middleware:

1. read the token if present (no error yet)
2. kill switches of the endpoint, and GLOBAL always: 503 unless the caller is staff
3. session required (401), or refused when already logged in (register/login)
4. staff required (403)
5. scope of a scoped session (403), or scoped sessions refused outright
6. body, query and header validation (400)
7. endpoint rate limit (429), with RateLimit-* headers; "not counted" responses give the hit back
Then the route runs with a :class:`Request` that holds all of the above.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter as Router
from pydantic import BaseModel

from nimbus_core import clock, metrics
from nimbus_core.adapters import counters, runtime_config
from nimbus_core.auth import Caller, authenticate
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.http.responses import response_for_exception
from nimbus_core.killswitches import KillSwitch
from nimbus_core.ratelimits import Per, RateLimit
from nimbus_core.scopes import Scope, grants
from nimbus_core.settings import get_settings
from nimbus_core.tokens import SessionToken, parse_session_token
from nimbus_core.useragent import device_name
from nimbus_core.validation import read_json_body, read_query, validate


class Auth(Enum):
    """What an endpoint needs of the caller's session."""

    REQUIRED = "required"
    NONE = "none"  # no session needed; the token is only read to let staff past kill switches
    GUEST = "guest"  # register/login: a valid session means "already logged in" (401)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Everything the guard checks for one endpoint."""

    auth: Auth = Auth.REQUIRED
    killswitches: tuple[KillSwitch, ...] = ()
    staff: bool = False
    scope: Scope | None = None
    scoped_sessions: bool = True
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    # Sessions created here are named by X-Session-Name, or else after the User-Agent.
    names_session: bool = False
    rate_limit: RateLimit | None = None


@dataclass(slots=True)
class Request:
    """What the guard learnt about the request, for the route to use."""

    source_ip: str
    headers: dict[str, str]
    now: float
    token: SessionToken | None
    body: Any = None
    query: Any = None
    session_name: str = ""
    _caller: Caller | None = None
    _authenticated: bool = field(default=False)

    def caller(self) -> Caller | None:
        """The authenticated caller, resolved at most once per request."""
        if not self._authenticated:
            self._caller = authenticate(self.token, self.now) if self.token else None
            self._authenticated = True
        return self._caller

    def require_caller(self) -> Caller:
        """The caller on an endpoint whose guard required a session."""
        caller = self.caller()
        if caller is None:  # pragma: no cover - the guard refused the request already
            raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
        return caller


_CONTEXT_KEY = "nimbus_request"
MAX_SESSION_NAME = 64


def current_request(app: APIGatewayHttpResolver | Router) -> Request:
    """The guarded request being handled by ``app``."""
    return cast(Request, app.context[_CONTEXT_KEY])


def guard(policy: Endpoint) -> Any:
    """The middleware that enforces ``policy`` (see the module docstring for the order)."""

    def middleware(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
        event = app.current_event
        headers = {k.lower(): v for k, v in (event.headers or {}).items()}
        request = Request(
            source_ip=event.request_context.http.source_ip,
            headers=headers,
            now=clock.now(),
            token=parse_session_token(headers.get("authorization")),
        )
        _check_killswitches(policy, request)
        caller = _check_session(policy, request)
        _check_permissions(policy, caller)
        if policy.body is not None:
            request.body = validate(
                policy.body, read_json_body(event.body, is_base64=bool(event.is_base64_encoded))
            )
        if policy.query is not None:
            request.query = validate(policy.query, read_query(event.query_string_parameters))
        if policy.names_session:
            request.session_name = _session_name(headers)
        app.append_context(**{_CONTEXT_KEY: request})
        if policy.rate_limit is None:
            return next_middleware(app)
        return _rate_limited(policy.rate_limit, request, caller, app, next_middleware)

    return middleware


def _check_killswitches(policy: Endpoint, request: Request) -> None:
    enabled = runtime_config.current().enabled_switches
    fired = [s for s in (KillSwitch.GLOBAL, *policy.killswitches) if s in enabled]
    if not fired:
        return
    caller = request.caller()
    if caller is None or not caller.user.staff:
        metrics.count(metrics.Event.KILL_SWITCH_REFUSED)
        raise NimbusError(ErrorCode.SERVICE_UNAVAILABLE_ERROR, feature=int(fired[0]))


def _check_session(policy: Endpoint, request: Request) -> Caller | None:
    if policy.auth is Auth.NONE:
        return None
    caller = request.caller()
    if policy.auth is Auth.REQUIRED and caller is None:
        raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
    if policy.auth is Auth.GUEST and caller is not None:
        raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
    return caller


def _check_permissions(policy: Endpoint, caller: Caller | None) -> None:
    if caller is None:
        return
    if policy.staff and not caller.user.staff:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    flags = caller.session.permission_flags
    if flags is not None and not policy.scoped_sessions:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    if policy.scope is not None and not grants(flags, policy.scope):
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)


def _session_name(headers: dict[str, str]) -> str:
    given = headers.get("x-session-name")
    if given is None:
        return device_name(headers.get("user-agent"))
    name = given.strip(" ")
    if not 1 <= len(name) <= MAX_SESSION_NAME:
        raise NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=["X-Session-Name"])
    return name


def _rate_limited(
    limit: RateLimit,
    request: Request,
    caller: Caller | None,
    app: APIGatewayHttpResolver,
    next_middleware: NextMiddleware,
) -> Response[Any]:
    subject = request.source_ip if limit.per is Per.IP else (caller.user.id if caller else request.source_ip)
    spec = counters.CounterSpec(
        table=get_settings().counters_table, key={"pk": {"S": f"{limit.name}#{limit.per.value}#{subject}"}}
    )
    state = counters.hit(spec, limit=limit.limit, window=limit.window, now=request.now)
    reset_in = state.reset_in(request.now)
    headers = {
        "RateLimit-Limit": str(limit.limit),
        "RateLimit-Remaining": str(state.remaining()),
        "RateLimit-Reset": str(reset_in),
    }
    if not state.allowed:
        metrics.count(metrics.Event.RATE_LIMITED)
        raise NimbusError(ErrorCode.RATELIMITED_ERROR, headers={**headers, "Retry-After": str(reset_in)})
    try:
        response = next_middleware(app)
    except Exception as exc:  # the status decides whether this request counts, so answer it here
        response = response_for_exception(exc)
    if response.status_code in limit.not_counted:
        counters.release(spec, reset_at=state.reset_at)
        headers["RateLimit-Remaining"] = str(state.remaining() + 1)
    response.headers.update(headers)
    return response
