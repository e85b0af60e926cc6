"""Routes of the sessions group: the caller's own sessions, scoped sessions, and staff access to any
user's sessions (the seed's session endpoints, CONTRACT sections 3, 5 and 8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import Session
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Response, json_response, success_response
from sessions_api import service
from sessions_api.service import Owner

if TYPE_CHECKING:
    from sessions_api.models import CreateScopedSessionBody, SessionsQuery

routes = EndpointRouter(models="sessions_api.models")

# The seed's "ACCOUNT_MODIFY, shown with number 2" is ACCOUNT_MODIFY, number 1 (CONTRACT section 8).
_MODIFY = (KillSwitch.ACCOUNT_MODIFY,)


def _me(request: Request) -> Owner:
    return Owner.me(request.require_caller())


def _user(request: Request) -> Owner:
    # Read with the caller's session (Policy.target): no read of its own.
    return Owner(request.target())


def _list(request: Request, owner: Owner) -> Response:
    query: SessionsQuery = request.query
    count, page = service.list_sessions(
        request.deps, owner, request.now, limit=query.limit, offset=query.offset
    )
    return json_response(200, {"count": count, "items": [s.to_public() for s in page]})


def _one(session: Session) -> Response:
    return json_response(200, session.to_public())


# ------------------------------------------------------------------------------------- own sessions


@routes.endpoint(
    "GET",
    "/users/me/sessions",
    Policy(
        scope=Scope.SESSION_READ,
        query="SessionsQuery",
        response="SessionListView",
        summary="The caller's live sessions, newest first",
    ),
)
def list_my_sessions(request: Request) -> Response:
    """GET /users/me/sessions: ``{count, items}``; ``count`` is every live session."""
    return _list(request, _me(request))


@routes.endpoint(
    "GET",
    "/users/me/sessions/<sid>",
    Policy(
        scope=Scope.SESSION_READ,
        response="SessionView",
        summary="One of the caller's sessions",
    ),
)
def get_my_session(request: Request) -> Response:
    """GET /users/me/sessions/:sid (``me``: the calling session, with no further read).

    Errors: 404 INVALID_SESSION_ERROR.
    """
    return _one(service.get_session(request.deps, _me(request), request.path["sid"], request.now))


@routes.endpoint(
    "PATCH",
    "/users/me/sessions/<sid>",
    Policy(
        scope=Scope.SESSION_MODIFY,
        body="RenameSessionBody",
        response="SessionView",
        summary="Rename one of the caller's sessions",
    ),
)
def rename_my_session(request: Request) -> Response:
    """PATCH /users/me/sessions/:sid: 200 with the renamed Session. Errors: 404 INVALID_SESSION_ERROR."""
    sid, name = request.path["sid"], request.body.name
    return _one(service.rename_session(request.deps, _me(request), sid, name, request.now))


@routes.endpoint(
    "DELETE",
    "/users/me/sessions/<sid>",
    Policy(
        scope=Scope.SESSION_MODIFY,
        killswitches=_MODIFY,
        response="SuccessView",
        summary="Revoke one of the caller's sessions (me: log out)",
    ),
)
def delete_my_session(request: Request) -> Response:
    """DELETE /users/me/sessions/:sid: 200 DELETE_SESSION_SUCCESS. Errors: 404 INVALID_SESSION_ERROR."""
    service.delete_session(request.deps, _me(request), request.path["sid"], request.now)
    return success_response(SuccessCode.DELETE_SESSION_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/me/sessions",
    Policy(
        scope=Scope.SESSION_MODIFY,
        killswitches=_MODIFY,
        body="DeleteSessionsBody",
        response="CountedSuccessView",
        summary="Revoke several of the caller's sessions (at most 50 ids; me allowed)",
    ),
)
def delete_my_sessions(request: Request) -> Response:
    """DELETE /users/me/sessions: 200 DELETE_SESSIONS_SUCCESS with how many were revoked."""
    count = service.delete_sessions(request.deps, _me(request), request.body.ids, request.now)
    return success_response(SuccessCode.DELETE_SESSIONS_SUCCESS, count=count)


@routes.endpoint(
    "DELETE",
    "/users/me/sessions/all",
    Policy(
        scope=Scope.SESSION_MODIFY,
        killswitches=_MODIFY,
        query="DeleteAllSessionsQuery",
        response="CountedSuccessView",
        summary="Revoke every session of the caller (include-self: the calling one too)",
    ),
)
def delete_all_my_sessions(request: Request) -> Response:
    """DELETE /users/me/sessions/all: 200 DELETE_SESSIONS_SUCCESS; effective on the next request."""
    keep = not request.query.include_self
    count = service.revoke_all_sessions(request.deps, _me(request), keep_current=keep, now=request.now)
    return success_response(SuccessCode.DELETE_SESSIONS_SUCCESS, count=count)


@routes.endpoint(
    "POST",
    "/users/me/sessions",
    Policy(
        scoped_sessions=False,
        killswitches=(KillSwitch.ACCOUNT_MODIFY, KillSwitch.ACCOUNT_LOGIN),
        body="CreateScopedSessionBody",
        rate_limit=ratelimits.CREATE_SCOPED_SESSION,
        reverify=True,
        success=201,
        response="ScopedSessionView",
        summary="Create a scoped session (an API key); its token is shown once",
    ),
)
def create_scoped_session(request: Request) -> Response:
    """POST /users/me/sessions: 201 with the Session and its token."""
    body: CreateScopedSessionBody = request.body
    issued = service.create_scoped_session(
        request.deps,
        request.require_caller(),
        name=body.name,
        permission_flags=body.permission_flags,
        long_lived=body.long_lived,
        now=request.now,
        actor=request.actor(),
    )
    return json_response(201, {**issued.session.to_public(), "token": issued.token})


# ----------------------------------------------------------------------------------- staff: any user


@routes.endpoint(
    "GET",
    "/users/<uid>/sessions",
    Policy(
        staff=True,
        target="uid",
        scope=Scope.STAFF_READ_SESSIONS,
        query="SessionsQuery",
        response="SessionListView",
        summary="A user's live sessions, newest first",
    ),
)
def list_user_sessions(request: Request) -> Response:
    """GET /users/:uid/sessions."""
    return _list(request, _user(request))


@routes.endpoint(
    "GET",
    "/users/<uid>/sessions/<sid>",
    Policy(
        staff=True,
        target="uid",
        scope=Scope.STAFF_READ_SESSIONS,
        response="SessionView",
        summary="One session of a user",
    ),
)
def get_user_session(request: Request) -> Response:
    """GET /users/:uid/sessions/:sid. Errors: 404 INVALID_SESSION_ERROR."""
    return _one(service.get_session(request.deps, _user(request), request.path["sid"], request.now))


@routes.endpoint(
    "PATCH",
    "/users/<uid>/sessions/<sid>",
    Policy(
        staff=True,
        audit=True,
        target="uid",
        scope=Scope.STAFF_MODIFY_SESSIONS,
        body="RenameSessionBody",
        response="SessionView",
        summary="Rename a session of a user",
    ),
)
def rename_user_session(request: Request) -> Response:
    """PATCH /users/:uid/sessions/:sid. Errors: 404 INVALID_SESSION_ERROR."""
    sid, name = request.path["sid"], request.body.name
    return _one(service.rename_session(request.deps, _user(request), sid, name, request.now))


@routes.endpoint(
    "DELETE",
    "/users/<uid>/sessions/<sid>",
    Policy(
        staff=True,
        audit=True,
        target="uid",
        scope=Scope.STAFF_MODIFY_SESSIONS,
        response="SuccessView",
        summary="Revoke a session of a user",
    ),
)
def delete_user_session(request: Request) -> Response:
    """DELETE /users/:uid/sessions/:sid. Errors: 404 INVALID_SESSION_ERROR."""
    service.delete_session(request.deps, _user(request), request.path["sid"], request.now)
    return success_response(SuccessCode.DELETE_SESSION_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/<uid>/sessions",
    Policy(
        staff=True,
        audit=True,
        target="uid",
        scope=Scope.STAFF_MODIFY_SESSIONS,
        body="DeleteSessionsBody",
        response="CountedSuccessView",
        summary="Revoke several sessions of a user (at most 50 ids)",
    ),
)
def delete_user_sessions(request: Request) -> Response:
    """DELETE /users/:uid/sessions."""
    count = service.delete_sessions(request.deps, _user(request), request.body.ids, request.now)
    return success_response(SuccessCode.DELETE_SESSIONS_SUCCESS, count=count)


@routes.endpoint(
    "DELETE",
    "/users/<uid>/sessions/all",
    Policy(
        staff=True,
        audit=True,
        target="uid",
        scope=Scope.STAFF_MODIFY_SESSIONS,
        response="CountedSuccessView",
        summary="Revoke every session of a user",
    ),
)
def delete_all_user_sessions(request: Request) -> Response:
    """DELETE /users/:uid/sessions/all."""
    count = service.revoke_all_sessions(request.deps, _user(request), keep_current=False, now=request.now)
    return success_response(SuccessCode.DELETE_SESSIONS_SUCCESS, count=count)
