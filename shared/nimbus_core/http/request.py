"""What the guard hands a route: the :class:`Request`, holding what each step of the guard
(:mod:`nimbus_core.http.guard`) learnt about it. Routes import it from the guard module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.activity import Attempt
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.http.responses import Reply, Response
from nimbus_core.platform import ids
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.tokens import SessionToken


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
    # What the reverification writes (step 8): the route hands it to the service that commits.
    answer: PendingAnswer = NO_ANSWER
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

    def attempt(self) -> Attempt:
        """Where this request comes from, for the activity event of a failed sign-in or
        reverification: its IP address and device (a signed-in caller's session name; else the
        name the request gives its session, or its User-Agent's device)."""
        caller = self._caller
        if caller is not None:
            return Attempt(self.source_ip, caller.session.name, caller.session.user_agent)
        return Attempt(self.source_ip, self.session_name, self.user_agent)

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
