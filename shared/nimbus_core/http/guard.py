"""The endpoint guard: CONTRACT section 4's order of checks, one declared step each
(:mod:`nimbus_core.http.steps`), composed here in that order for every endpoint.

0. a path parameter spelling a sibling route's literal (``/sessions/all``) is no route: 404
1. read the token if present (no error yet), with what the authentication reads beside the session:
   the policy's target user, and the challenge a reverified request answers
2. kill switches of the endpoint, and GLOBAL always: 503 unless the caller is staff
3. session required (401), or refused when already logged in (register/login)
4. staff required (403); on staff endpoints, a staff caller without a second factor: 401
5. scope of a scoped session (403), or scoped sessions refused outright, or refused the path's
   user when it is their own account, or a staff account, where the policy closes it to them
6. body, query and header validation (400); the route's signature names its models, imported with
   the first request that validates one (:mod:`nimbus_core.http.request_models`)
   (the audit line of a staff change wraps what follows: it records the status answered)
7. endpoint rate limit (429), with RateLimit-* headers; "not counted" responses give the hit back
   (a second-factor challenge in the same transaction that stores it)
8. identity reverification of normal sessions (400 / 401 / 429 account lock / the second-factor
   challenge); a challenge answered is recorded with the route's first transaction
Then the route runs with a :class:`Request` that holds all of the above, and its
:class:`~nimbus_core.http.responses.Reply` is sent with the status the endpoint was declared with.
Each step says when it applies and which errors it can answer: :func:`guard_errors` is what the
OpenAPI document lists for an endpoint beside the route's own errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.http.event import HttpEvent
from nimbus_core.http.policy import Auth, Endpoint
from nimbus_core.http.request import Request, RouteFunction
from nimbus_core.http.responses import Reply, Response
from nimbus_core.http.steps.audit import Audit
from nimbus_core.http.steps.base import Passage, Refusal, Step, answered
from nimbus_core.http.steps.challenge import StoreChallenge
from nimbus_core.http.steps.input import Input
from nimbus_core.http.steps.killswitches import KillSwitches
from nimbus_core.http.steps.ratelimit import RateLimit
from nimbus_core.http.steps.reverification import PeekAnswer, Reverification
from nimbus_core.http.steps.scope import Scope
from nimbus_core.http.steps.session import Session
from nimbus_core.http.steps.siblings import LiteralSiblings
from nimbus_core.http.steps.staff import Staff
from nimbus_core.http.steps.target import Target
from nimbus_core.http.steps.token import ReadToken

__all__ = ["STEPS", "GuardedRoute", "Request", "RouteFunction", "guard", "guard_errors", "unguardable"]

# A guarded route, as the app's route table holds it: the event, the path parameters matched, this
# request's dependencies and the runtime configuration the handler read (None: not read).
GuardedRoute = Callable[[HttpEvent, dict[str, str], Deps, RuntimeConfig | None], Response]

STEPS: tuple[Step, ...] = (
    LiteralSiblings(),  # 0
    ReadToken(),  # 1
    Target(),  # 1: read with the session
    PeekAnswer(),  # 1: read with the session
    KillSwitches(),  # 2
    Session(),  # 3
    Staff(),  # 4
    Scope(),  # 5
    Input(),  # 6
    Audit(),  # around 7 and 8, and the route
    RateLimit(),  # 7
    StoreChallenge(),  # 7, where no rate limit stores the challenge
    Reverification(),  # 8
)

# Any step's dependency (the runtime configuration, DynamoDB) or the route may fail unexpectedly.
UNEXPECTED = answered(ErrorCode.INTERNAL_SERVER_ERROR)


def steps_for(endpoint: Endpoint) -> tuple[Step, ...]:
    """The steps that apply to ``endpoint``, in the contract's order."""
    return tuple(step for step in STEPS if step.applies(endpoint))


def guard_errors(endpoint: Endpoint) -> set[Refusal]:
    """The (status, code) pairs the guard can answer for ``endpoint``: its steps' (CONTRACT section 4)."""
    return {*UNEXPECTED, *(refusal for step in steps_for(endpoint) for refusal in step.errors(endpoint))}


def unguardable(endpoint: Endpoint) -> str | None:
    """Why the steps cannot guard ``endpoint`` as its policy says, or None: what they judge of a
    caller (staff, scope, the accounts closed to scoped sessions, reverification, the target user,
    the audit line) only runs where a session is required, so asked for elsewhere it would let
    everyone through."""
    policy = endpoint.policy
    judged = {
        "staff": policy.staff,
        "scope": policy.scope is not None,
        "scoped_sessions": not policy.scoped_sessions,
        "scoped_self": not policy.scoped_self,
        "scoped_staff": not policy.scoped_staff,
        "reverify": policy.reverify,
        "sets_own_password": policy.sets_own_password,
        "target": policy.target is not None,
        "audit": policy.audit,
    }
    asked = [name for name, on in judged.items() if on]
    if policy.auth is Auth.REQUIRED or not asked:
        return None
    return f"{', '.join(asked)} need(s) a caller, but the policy requires no session"


def guard(
    endpoint: Endpoint, route: RouteFunction, *, reserved: Mapping[str, frozenset[str]]
) -> GuardedRoute:
    """``route`` behind ``endpoint``'s steps (see the module docstring for their order), its success
    sent with the endpoint's declared status.

    ``reserved`` holds the values each path parameter must not take because a sibling route spells
    them literally (step 0).
    """
    steps = steps_for(endpoint)

    def respond(passage: Passage) -> Response:
        return _response(route(passage.request), endpoint)

    def guarded(event: HttpEvent, path: dict[str, str], deps: Deps, config: RuntimeConfig | None) -> Response:
        request = _request(endpoint, event, path, deps, config)
        return _through(steps, 0, Passage(endpoint, event, request, reserved), respond)

    return guarded


def _through(
    steps: tuple[Step, ...], at: int, passage: Passage, respond: Callable[[Passage], Response]
) -> Response:
    """``passage`` through ``steps`` from ``at`` on, each handing it to the next, the last to ``respond``."""
    if at == len(steps):
        return respond(passage)
    return steps[at].run(passage, lambda: _through(steps, at + 1, passage, respond))


def _request(
    endpoint: Endpoint, event: HttpEvent, path: dict[str, str], deps: Deps, config: RuntimeConfig | None
) -> Request[Any, Any, Any]:
    """The request as the guard starts it: headers, time, the path; the steps fill in the rest."""
    return Request(
        deps=deps,
        source_ip=event.source_ip,
        headers=event.headers(),
        now=deps.clock.now(),
        token=None,
        scoped_self=endpoint.policy.scoped_self,
        endpoint=f"{endpoint.method} {endpoint.path}",
        path=path,
        config=config,
    )


def _response(answer: Reply[Any] | Response, endpoint: Endpoint) -> Response:
    """A route's Reply sent with its declared status (or another it declared); a Response it built, as is."""
    return answer if isinstance(answer, Response) else answer.response(endpoint.status, endpoint.also)
