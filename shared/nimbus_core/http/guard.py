"""The endpoint guard: CONTRACT section 4's order of checks, implemented once for every endpoint.

0. a path parameter spelling a sibling route's literal (``/sessions/all``) is no route: 404
1. read the token if present (no error yet)
2. kill switches of the endpoint, and GLOBAL always: 503 unless the caller is staff
3. session required (401), or refused when already logged in (register/login)
4. staff required (403); on staff endpoints, a staff caller without a second factor: 401
5. scope of a scoped session (403), or scoped sessions refused outright, or refused the path's
   user when it is their own account where the policy closes it to them (``scoped_self``)
6. body, query and header validation (400); the route's signature names its models, imported with
   the first request that validates one (:mod:`nimbus_core.http.request_models`)
7. endpoint rate limit (429), with RateLimit-* headers; "not counted" responses give the hit back
   (a second-factor challenge in the same transaction that stores it)
8. identity reverification of normal sessions (400 / 401 / 429 account lock / the second-factor
   challenge); a challenge answered is recorded with the route's first transaction
Then the route runs with a :class:`Request` that holds all of the above, and its
:class:`~nimbus_core.http.responses.Reply` is sent with the status the endpoint was declared with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nimbus_core.accounts import audit
from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.limiter import RateLimiter
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.domain.ratelimits import Per, RateLimit
from nimbus_core.factors import challenges
from nimbus_core.factors.challenges import ChallengeRequiredError
from nimbus_core.factors.reverify import AnswerCarrier, reverify
from nimbus_core.http.event import HttpEvent
from nimbus_core.http.permissions import check_permissions
from nimbus_core.http.policy import Auth, Endpoint, Policy
from nimbus_core.http.request_input import read_query, session_name
from nimbus_core.http.request_models import validated
from nimbus_core.http.responses import Reply, Response, rate_limit_headers, response_for_exception
from nimbus_core.platform import ids, metrics
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.tokens import SessionToken, parse_session_token
from nimbus_core.sessions.upstream_tokens import parse_upstream_token


@dataclass(slots=True)
class Request[B = None, Q = None, P = None]:
    """What the guard learnt about the request, for the route to use: ``body``, ``query`` and
    ``path_model`` are the validated models of the route's signature (``Request[ChangeUsernameBody]``,
    ``Request[None, SessionsQuery]``), None where it names none."""

    deps: Deps
    source_ip: str
    headers: dict[str, str]
    now: float
    token: SessionToken | None
    raw_body: dict[str, Any] = field(default_factory=dict)
    body: B = None  # type: ignore[assignment]  # None until step 6 validates it
    query: Q = None  # type: ignore[assignment]
    path: dict[str, str] = field(default_factory=dict)
    path_model: P = None  # type: ignore[assignment]  # the path parameters' model, validated (step 6)
    # Sessions created here: the X-Session-Name given, else None (named after the User-Agent when
    # shown, see Session.display_name: parsing it is no part of the login's work).
    session_name: str | None = None
    user_agent: str | None = None
    target_id: str | None = None
    scoped_self: bool = True  # the policy's: may a scoped session name its own account here
    endpoint: str = ""  # "METHOD /path/<param>": what a second-factor challenge is bound to
    challenge_hash: str | None = None  # of the challenge a reverified request answers, read with the caller
    config: RuntimeConfig | None = None  # the runtime configuration, once read for this request
    _caller: Caller | None = None
    _authenticated: bool = False

    def caller(self) -> Caller | None:
        """The authenticated caller, resolved at most once per request."""
        if not self._authenticated:
            if self.token:
                self._caller = authenticate(
                    self.deps,
                    self.token,
                    self.now,
                    target_id=self.target_id,
                    challenge_hash=self.challenge_hash,
                )
            self._authenticated = True
        return self._caller

    def target_user(self, user_id: str) -> User | None:
        """The user ``user_id`` names: the one read with the caller when the policy declared its
        ``target`` parameter, else one more read (None if there is no such user)."""
        caller = self.require_caller()
        if user_id == caller.user.id:
            return caller.user
        if caller.target_id == user_id:
            return caller.target
        return self.deps.users.get(user_id) if ids.is_id(user_id) else None

    def target(self) -> User:
        """The user the policy's ``target`` path parameter names (read with the caller), or 404
        INVALID_USER_ERROR: unknown, deleted, or not an id at all. (A scoped session naming its own
        account where the policy forbids it was refused at step 5.)"""
        user = self.target_user(self.target_id) if self.target_id is not None else None
        if user is None:
            raise NimbusError(ErrorCode.INVALID_USER_ERROR)
        return user

    def refuse_own_account_to_scoped(self, user_ids: Iterable[str]) -> None:
        """403 INSUFFICIENT_PERMISSIONS_ERROR when a scoped session names its own account where its
        policy forbids it (``Policy.scoped_self``): staff scopes never reach what /users/me keeps
        from scoped sessions. The guard does this for the path's user at step 5; a route calls it
        for the ids of its body."""
        caller = self.require_caller()
        if (
            not self.scoped_self
            and caller.session.permission_flags is not None
            and caller.user.id in user_ids
        ):
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)

    def record_answer_now(self) -> None:
        """Record a second-factor answer before a change that no DynamoDB transaction can carry
        (an SSM write): should the change then fail, the staff member answers a new challenge;
        the answer can never be replayed for a change that landed."""
        if isinstance(self.deps.tx, AnswerCarrier):
            self.deps.tx.settle()

    def require_caller(self) -> Caller:
        """The caller on an endpoint whose guard required a session."""
        caller = self.caller()
        if caller is None:  # pragma: no cover - the guard refused the request already
            raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
        return caller

    def actor(self) -> Actor:
        """The caller as a security notice names them: this request's IP address and session."""
        return Actor.user(self.source_ip, self.require_caller().session)


RouteFunction = Callable[[Request[Any, Any, Any]], Reply[Any] | Response]
# A guarded route, as the app's route table holds it: the event, the path parameters matched, this
# request's dependencies and the runtime configuration the handler read (None: not read).
GuardedRoute = Callable[[HttpEvent, dict[str, str], Deps, RuntimeConfig | None], Response]


def guard(
    endpoint: Endpoint, route: RouteFunction, *, reserved: Mapping[str, frozenset[str]]
) -> GuardedRoute:
    """``route`` behind ``endpoint``'s policy (see the module docstring for the order of the checks),
    its success sent with the endpoint's declared status.

    ``reserved`` holds the values each path parameter must not take because a sibling route spells
    them literally (step 0).
    """
    policy = endpoint.policy

    def guarded(event: HttpEvent, path: dict[str, str], deps: Deps, config: RuntimeConfig | None) -> Response:
        _check_literal_siblings(reserved, path)
        request = _request(endpoint, event, path, deps, config)
        peeked = _peek_answer(policy, event, request)
        _check_killswitches(policy, request)
        caller = _check_session(policy, request)
        staff_need_factor = deps.settings.staff_require_second_factor
        check_permissions(policy, caller, staff_need_factor=staff_need_factor, target_id=request.target_id)
        _read_input(endpoint, event, request, peeked)

        def proceed() -> Response:
            return _answered(endpoint, route, request, caller)

        if policy.audit and caller is not None:
            return _audited(request, caller, lambda: _limited(policy, request, caller, proceed))
        return _limited(policy, request, caller, proceed)

    return guarded


def _request(
    endpoint: Endpoint, event: HttpEvent, path: dict[str, str], deps: Deps, config: RuntimeConfig | None
) -> Request[Any, Any, Any]:
    """The request as the guard starts it: headers, time, the token read (step 1), the path."""
    headers = event.headers()
    now = deps.clock.now()
    return Request(
        deps=deps,
        source_ip=event.source_ip,
        headers=headers,
        now=now,
        token=_session_token(headers.get("authorization"), deps, now),
        target_id=_target_id(endpoint.policy, path),
        scoped_self=endpoint.policy.scoped_self,
        endpoint=f"{endpoint.method} {endpoint.path}",
        path=path,
        config=config,
    )


def _peek_answer(policy: Policy, event: HttpEvent, request: Request[Any, Any, Any]) -> dict[str, Any] | None:
    """A reverified request answering a challenge: the challenge is read with the session (one
    round trip). The body is only peeked at here: when it is no JSON object, its error is raised
    again at step 6."""
    if not (policy.reverify and request.token):
        return None
    try:
        peeked = event.json_body()
    except NimbusError:
        return None
    request.challenge_hash = challenges.answered_hash(peeked.get("2fa"))
    return peeked


def _read_input(
    endpoint: Endpoint, event: HttpEvent, request: Request[Any, Any, Any], peeked: dict[str, Any] | None
) -> None:
    """Step 6: the body, query and path models of the route's signature, validated (each found,
    and its module imported, by the first request that validates it), and the session's name."""
    signature = endpoint.signature
    if signature.body is not None or endpoint.policy.reverify:
        request.raw_body = peeked if peeked is not None else event.json_body()
    if (body := endpoint.model("body")) is not None:
        request.body = validated(body, request.raw_body)
    if (query := endpoint.model("query")) is not None:
        request.query = validated(query, read_query(event.query))
    if (path := endpoint.model("path")) is not None:
        request.path_model = validated(path, dict(request.path))
    if endpoint.policy.names_session:
        request.session_name = session_name(request.headers)
        request.user_agent = request.headers.get("user-agent")


def _answered(
    endpoint: Endpoint, route: RouteFunction, request: Request[Any, Any, Any], caller: Caller | None
) -> Response:
    """The route's answer (step 8 first: reverification), its Reply sent with the declared status.
    A challenge answered is recorded in the change's own transaction, and used up by a refusal."""
    answer_ops = []
    if endpoint.policy.reverify and caller is not None:
        answer_ops = reverify(request.deps, caller, request.raw_body, request.now, endpoint=request.endpoint)
    if not answer_ops:
        return _response(route(request), endpoint)
    carrier = AnswerCarrier(request.deps.tx, answer_ops)
    request.deps = replace(request.deps, tx=carrier)
    try:
        response = _response(route(request), endpoint)
    except NimbusError:
        carrier.settle()  # a refused change still used the challenge up
        raise
    carrier.settle()
    return response


def _response(answer: Reply[Any] | Response, endpoint: Endpoint) -> Response:
    """A route's Reply sent with its declared status (or another it declared); a Response it built, as is."""
    return answer if isinstance(answer, Response) else answer.response(endpoint.status, endpoint.also)


def _limited(
    policy: Policy, request: Request, caller: Caller | None, proceed: Callable[[], Response]
) -> Response:
    if policy.rate_limit is None or (policy.uncounted is not None and policy.uncounted(request.body)):
        return _challenge_stored(request, proceed)
    return _rate_limited(policy.rate_limit, request, caller, proceed)


def _audited(request: Request, caller: Caller, respond: Callable[[], Response]) -> Response:
    """``respond()``, then the audit line with the status it answered (or will answer)."""
    status = 500
    try:
        response = respond()
        status = response.status_code
        return response
    except NimbusError as refused:
        status = refused.status
        raise
    finally:
        ids = getattr(request.body, "ids", None)
        audit.record(
            caller,
            endpoint=request.endpoint,
            path=dict(request.path),
            ids=list(ids) if isinstance(ids, list) else None,
            status=status,
            source_ip=request.source_ip,
            now=request.now,
        )


def _challenge_stored(request: Request, proceed: Callable[[], Response]) -> Response:
    """``proceed()``, storing the challenge of a second-factor 401 before it is answered."""
    try:
        return proceed()
    except ChallengeRequiredError as required:
        challenges.store(request.deps, required)
        raise


def _session_token(authorization: str | None, deps: Deps, now: float) -> SessionToken | None:
    """The session the header names: a Nimbus token, or one an upstream deployment signed."""
    return parse_session_token(authorization) or parse_upstream_token(authorization, deps.settings, now)


def _check_literal_siblings(reserved: Mapping[str, frozenset[str]], path: dict[str, str]) -> None:
    """A parameter spelling a sibling route's literal segment is no route at all (404)."""
    for name, values in reserved.items():
        if path.get(name) in values:
            raise NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR)


def _target_id(policy: Policy, path: dict[str, str]) -> str | None:
    """The well-formed user id in the policy's ``target`` path parameter, if any."""
    if policy.target is None:
        return None
    value = path.get(policy.target)
    return value if value is not None and ids.is_id(value) else None


def _check_killswitches(policy: Policy, request: Request) -> None:
    if request.config is None:  # not read yet, or unreadable when the handler tried: 500 if it still is
        request.config = request.deps.config.current()
    enabled = request.config.enabled_switches
    fired = [s for s in (KillSwitch.GLOBAL, *policy.killswitches) if s in enabled]
    if not fired:
        return
    caller = request.caller()
    if caller is None or not caller.user.staff:
        metrics.count(metrics.Event.KILL_SWITCH_REFUSED)
        feature = KillSwitch.GLOBAL if KillSwitch.GLOBAL in fired else min(fired)
        raise NimbusError(ErrorCode.SERVICE_UNAVAILABLE_ERROR, feature=int(feature))


def _check_session(policy: Policy, request: Request) -> Caller | None:
    if policy.auth is Auth.NONE:
        return None
    caller = request.caller()
    if policy.auth is Auth.REQUIRED and caller is None:
        raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
    if policy.auth is Auth.GUEST and caller is not None:
        raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
    return caller


def _rate_limited(
    limit: RateLimit, request: Request, caller: Caller | None, proceed: Callable[[], Response]
) -> Response:
    subject = request.source_ip if limit.per is Per.IP or caller is None else caller.user.id
    limiter = RateLimiter(request.deps.counters)
    hit = limiter.hit(limit, subject, request.now)
    if not hit.state.allowed:
        metrics.count(metrics.Event.RATE_LIMITED)
        raise RateLimitedError(
            retry_after=hit.state.reset_in(request.now), headers=rate_limit_headers(hit.state, request.now)
        )
    given_back = False
    try:
        response = proceed()
    except ChallengeRequiredError as required:
        # A challenge is not counted, the answer that completes it is (CONTRACT section 4 step 7):
        # it is stored and the hit given back in one transaction.
        try:
            challenges.store(request.deps, required, give_back=limiter.give_back_op(hit))
            response, given_back = response_for_exception(required), True
        except Exception as failed:
            response = response_for_exception(failed)
    except Exception as exc:  # the status decides whether this request counts, so answer it here
        response = response_for_exception(exc)
        if isinstance(exc, RateLimitedError) and exc.account_lock:
            return response  # the account lock's 429 carries its own Retry-After, not this window
    if given_back:
        state = limiter.given_back(hit)
    elif response.status_code in limit.not_counted:
        state = limiter.give_back(hit)
    else:
        state = hit.state
    response.headers.update(rate_limit_headers(state, request.now))
    return response
