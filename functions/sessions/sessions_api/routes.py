"""Routes of the sessions group: the caller's own sessions, scoped sessions, and staff access to any
user's sessions (the seed's session endpoints, CONTRACT sections 3, 5 and 8)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import ErrorCode, SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import Session
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import ErrorAt, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, counted, success
from sessions_api import service
from sessions_api.service import Owner

if TYPE_CHECKING:
    from nimbus_core.http.views import (
        CountedSuccessView,
        ScopedSessionView,
        SessionListView,
        SessionView,
        SuccessView,
    )
    from sessions_api.models import (
        CreateScopedSessionBody,
        DeleteAllSessionsQuery,
        DeleteSessionsBody,
        RenameSessionBody,
        SessionsQuery,
    )

routes = EndpointRouter(models="sessions_api.models")

# The seed's "ACCOUNT_MODIFY, shown with number 2" is ACCOUNT_MODIFY, number 1 (CONTRACT section 8).
_MODIFY = (KillSwitch.ACCOUNT_MODIFY,)
# A session id naming no live session of the owner's (CONTRACT section 6: 404, not the code's 401).
_NO_SUCH_SESSION = (ErrorAt(404, ErrorCode.INVALID_SESSION_ERROR),)


def _me(request: Request[Any, Any, Any]) -> Owner:
    return Owner.me(request.require_caller(), request.actor())


def _user(request: Request[Any, Any, Any]) -> Owner:
    # Read with the caller's session (Policy.target): no read of its own.
    return Owner(request.target())


def _list(request: Request[None, SessionsQuery], owner: Owner) -> Reply[SessionListView]:
    query = request.query
    count, page = service.list_sessions(
        request.deps, owner, request.now, limit=query.limit, offset=query.offset
    )
    return Reply({"count": count, "items": [s.to_public() for s in page]})


def _one(session: Session) -> Reply[SessionView]:
    return Reply(session.to_public())


# ------------------------------------------------------------------------------------- own sessions


@routes.endpoint(
    "GET",
    "/users/me/sessions",
    Policy(scope=Scope.SESSION_READ),
    summary="The caller's live sessions, newest first",
)
def list_my_sessions(request: Request[None, SessionsQuery]) -> Reply[SessionListView]:
    """GET /users/me/sessions: ``{count, items}``; ``count`` is every live session."""
    return _list(request, _me(request))


@routes.endpoint(
    "GET",
    "/users/me/sessions/<sid>",
    Policy(scope=Scope.SESSION_READ),
    errors=_NO_SUCH_SESSION,
    summary="One of the caller's sessions",
)
def get_my_session(request: Request) -> Reply[SessionView]:
    """GET /users/me/sessions/:sid (``me``: the calling session, with no further read)."""
    return _one(service.get_session(request.deps, _me(request), request.path["sid"], request.now))


@routes.endpoint(
    "PATCH",
    "/users/me/sessions/<sid>",
    Policy(scope=Scope.SESSION_MODIFY),
    errors=_NO_SUCH_SESSION,
    summary="Rename one of the caller's sessions",
)
def rename_my_session(request: Request[RenameSessionBody]) -> Reply[SessionView]:
    """PATCH /users/me/sessions/:sid: 200 with the renamed Session."""
    sid, name = request.path["sid"], request.body.name
    return _one(service.rename_session(request.deps, _me(request), sid, name, request.now))


@routes.endpoint(
    "DELETE",
    "/users/me/sessions/<sid>",
    Policy(scope=Scope.SESSION_MODIFY, killswitches=_MODIFY),
    errors=_NO_SUCH_SESSION,
    summary="Revoke one of the caller's sessions (me: log out)",
)
def delete_my_session(request: Request) -> Reply[SuccessView]:
    """DELETE /users/me/sessions/:sid: 200 DELETE_SESSION_SUCCESS."""
    service.delete_session(request.deps, _me(request), request.path["sid"], request.now)
    return success(SuccessCode.DELETE_SESSION_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/me/sessions",
    Policy(scope=Scope.SESSION_MODIFY, killswitches=_MODIFY),
    summary="Revoke several of the caller's sessions (at most 50 ids; me allowed)",
)
def delete_my_sessions(request: Request[DeleteSessionsBody]) -> Reply[CountedSuccessView]:
    """DELETE /users/me/sessions: 200 DELETE_SESSIONS_SUCCESS with how many were revoked."""
    count = service.delete_sessions(request.deps, _me(request), request.body.ids, request.now)
    return counted(SuccessCode.DELETE_SESSIONS_SUCCESS, count)


@routes.endpoint(
    "DELETE",
    "/users/me/sessions/all",
    Policy(scope=Scope.SESSION_MODIFY, killswitches=_MODIFY),
    # include-self: the account deleted between the caller's read and the revocation.
    errors=(ErrorCode.INVALID_USER_ERROR,),
    summary="Revoke every session of the caller (include-self: the calling one too)",
)
def delete_all_my_sessions(request: Request[None, DeleteAllSessionsQuery]) -> Reply[CountedSuccessView]:
    """DELETE /users/me/sessions/all: 200 DELETE_SESSIONS_SUCCESS; effective on the next request."""
    keep = not request.query.include_self
    count = service.revoke_all_sessions(request.deps, _me(request), keep_current=keep, now=request.now)
    return counted(SuccessCode.DELETE_SESSIONS_SUCCESS, count)


@routes.endpoint(
    "POST",
    "/users/me/sessions",
    Policy(
        scoped_sessions=False,
        killswitches=(KillSwitch.ACCOUNT_MODIFY, KillSwitch.ACCOUNT_LOGIN),
        rate_limit=ratelimits.CREATE_SCOPED_SESSION,
        reverify=True,
    ),
    status=201,
    summary="Create a scoped session (an API key); its token is shown once",
)
def create_scoped_session(request: Request[CreateScopedSessionBody]) -> Reply[ScopedSessionView]:
    """POST /users/me/sessions: 201 with the Session and its token."""
    body = request.body
    issued = service.create_scoped_session(
        request.deps,
        request.require_caller(),
        name=body.name,
        permission_flags=body.permission_flags,
        long_lived=body.long_lived,
        now=request.now,
        actor=request.actor(),
        answer=request.answer,
    )
    return Reply({**issued.session.to_public(), "token": issued.token})


# ----------------------------------------------------------------------------------- staff: any user


_STAFF_READ = Policy(staff=True, target="uid", scope=Scope.STAFF_READ_SESSIONS)
_STAFF_MODIFY = Policy(staff=True, audit=True, target="uid", scope=Scope.STAFF_MODIFY_SESSIONS)


@routes.endpoint("GET", "/users/<uid>/sessions", _STAFF_READ, summary="A user's live sessions, newest first")
def list_user_sessions(request: Request[None, SessionsQuery]) -> Reply[SessionListView]:
    """GET /users/:uid/sessions."""
    return _list(request, _user(request))


@routes.endpoint(
    "GET",
    "/users/<uid>/sessions/<sid>",
    _STAFF_READ,
    errors=_NO_SUCH_SESSION,
    summary="One session of a user",
)
def get_user_session(request: Request) -> Reply[SessionView]:
    """GET /users/:uid/sessions/:sid."""
    return _one(service.get_session(request.deps, _user(request), request.path["sid"], request.now))


@routes.endpoint(
    "PATCH",
    "/users/<uid>/sessions/<sid>",
    _STAFF_MODIFY,
    errors=_NO_SUCH_SESSION,
    summary="Rename a session of a user",
)
def rename_user_session(request: Request[RenameSessionBody]) -> Reply[SessionView]:
    """PATCH /users/:uid/sessions/:sid."""
    sid, name = request.path["sid"], request.body.name
    return _one(service.rename_session(request.deps, _user(request), sid, name, request.now))


@routes.endpoint(
    "DELETE",
    "/users/<uid>/sessions/<sid>",
    _STAFF_MODIFY,
    errors=_NO_SUCH_SESSION,
    summary="Revoke a session of a user",
)
def delete_user_session(request: Request) -> Reply[SuccessView]:
    """DELETE /users/:uid/sessions/:sid."""
    service.delete_session(request.deps, _user(request), request.path["sid"], request.now)
    return success(SuccessCode.DELETE_SESSION_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/<uid>/sessions",
    _STAFF_MODIFY,
    summary="Revoke several sessions of a user (at most 50 ids)",
)
def delete_user_sessions(request: Request[DeleteSessionsBody]) -> Reply[CountedSuccessView]:
    """DELETE /users/:uid/sessions."""
    count = service.delete_sessions(request.deps, _user(request), request.body.ids, request.now)
    return counted(SuccessCode.DELETE_SESSIONS_SUCCESS, count)


@routes.endpoint(
    "DELETE", "/users/<uid>/sessions/all", _STAFF_MODIFY, summary="Revoke every session of a user"
)
def delete_all_user_sessions(request: Request) -> Reply[CountedSuccessView]:
    """DELETE /users/:uid/sessions/all."""
    count = service.revoke_all_sessions(request.deps, _user(request), keep_current=False, now=request.now)
    return counted(SuccessCode.DELETE_SESSIONS_SUCCESS, count)
