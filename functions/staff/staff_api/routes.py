"""Routes of the staff group: staff operations on other accounts (the seed's staff account
endpoints). Every one is staff only, with STAFF_READ_ACCOUNTS or STAFF_MODIFY_ACCOUNTS; the
changes reverify the staff member (password, then their second factor). The target user is read
with the staff member's session (``target="id"``), and an unknown id is 404 INVALID_USER_ERROR only
after the staff and reverification checks (CONTRACT section 4)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nimbus_core.accounts import account_changes, notices
from nimbus_core.domain.errors import ErrorCode, NimbusError, SuccessCode
from nimbus_core.domain.models import User
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Response, json_response, success_response
from staff_api import service

if TYPE_CHECKING:
    from staff_api.models import ChangeDomainBody, ChangePasswordBody, UsersQuery

# /users/me/... belongs to the self-service functions: "me" is never a user id here (CONTRACT 1).
# Its bodies and queries are named in staff_api.models, with the shared nimbus_core.http.account_bodies.
routes = EndpointRouter(models="staff_api.models", reserved={"id": frozenset({"me"})})


# A change to the account in ``:id``; each endpoint adds its summary and body (``replace``).
_MODIFY = Policy(
    staff=True,
    target="id",
    scope=Scope.STAFF_MODIFY_ACCOUNTS,
    reverify=True,
    audit=True,
    response="UserView",
)


def _user(user: User) -> Response:
    return json_response(200, user.to_public())


@routes.endpoint(
    "GET",
    "/users",
    Policy(
        staff=True,
        scope=Scope.STAFF_READ_ACCOUNTS,
        query="UsersQuery",
        response="UserListView",
        summary="Every user, newest first",
    ),
)
def list_users(request: Request) -> Response:
    """GET /users: ``{count, items}``; ``count`` is the number of users, exact."""
    query: UsersQuery = request.query
    count, page = service.list_users(request.deps, limit=query.limit, offset=query.offset)
    return json_response(200, {"count": count, "items": [u.to_public() for u in page]})


@routes.endpoint(
    "GET",
    "/users/<id>",
    Policy(
        staff=True,
        target="id",
        scope=Scope.STAFF_READ_ACCOUNTS,
        response="UserView",
        summary="One user",
    ),
)
def get_user(request: Request) -> Response:
    """GET /users/:id: the User, or 404 INVALID_USER_ERROR."""
    return _user(request.target())


@routes.endpoint(
    "PUT",
    "/users/<id>/username",
    replace(_MODIFY, summary="Change a user's username", body="ChangeUsernameBody"),
)
def set_username(request: Request) -> Response:
    """PUT /users/:id/username: 200 with the User; 409 USER_EXISTS_ERROR if the name is taken.

    Errors: 400 INVALID_USERNAME_ERROR.
    """
    return _user(
        account_changes.rename(
            request.deps,
            request.target(),
            request.body.username,
            request.now,
            by=request.require_caller(),
            gone=ErrorCode.INVALID_USER_ERROR,
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/email",
    replace(
        _MODIFY,
        summary="Change a user's email address (it must be verified again; never a key's own)",
        body="ChangeEmailBody",
        scoped_self=False,
    ),
)
def set_email(request: Request) -> Response:
    """PUT /users/:id/email: 200 with the User, unverified; a verification email is queued.

    Errors: 400 INVALID_EMAIL_ERROR, 409 USER_EXISTS_ERROR.
    """
    return _user(
        account_changes.change_email(
            request.deps,
            request.target(),
            request.body.email,
            request.now,
            actor=notices.STAFF,
            by=request.require_caller(),
            gone=ErrorCode.INVALID_USER_ERROR,
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/password",
    replace(
        _MODIFY,
        summary="Set a user's password (every session of theirs is revoked; never a key's own)",
        body="ChangePasswordBody",
        scoped_self=False,
    ),
)
def set_password(request: Request) -> Response:
    """PUT /users/:id/password: 200 with the User; all of the user's sessions are revoked.

    Errors: 400 PASSWORDS_DO_NOT_MATCH_ERROR.
    """
    body: ChangePasswordBody = request.body
    return _user(
        service.set_password(
            request.deps, request.target(), body.new_password, request.now, by=request.require_caller()
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/domain",
    replace(_MODIFY, summary="Change a user's domain and subdomain", body="ChangeDomainBody", reverify=False),
)
def set_domain(request: Request) -> Response:
    """PUT /users/:id/domain: 200 with the User; 404 INVALID_DOMAIN_ERROR if not offered.

    Errors: 400 SUBDOMAIN_NOT_ALLOWED_ERROR, 400 SUBDOMAIN_TOO_LONG_ERROR.
    """
    body: ChangeDomainBody = request.body
    user = account_changes.change_domain(
        request.deps,
        request.target(),
        body.domain,
        body.subdomain,
        request.now,
        by=request.require_caller(),
        gone=ErrorCode.INVALID_USER_ERROR,
    )
    return _user(user)


@routes.endpoint(
    "PUT", "/users/<id>/verify", replace(_MODIFY, summary="Mark a user's email address verified")
)
def set_verified(request: Request) -> Response:
    """PUT /users/:id/verify: 200 with the User; 400 EMAIL_ALREADY_VERIFIED_ERROR."""
    return _user(
        service.set_verified(request.deps, request.target(), request.now, by=request.require_caller())
    )


@routes.endpoint("DELETE", "/users/<id>/verify", replace(_MODIFY, summary="Remove a user's verified mark"))
def clear_verified(request: Request) -> Response:
    """DELETE /users/:id/verify: 200 with the User; 400 EMAIL_NOT_VERIFIED_ERROR."""
    return _user(
        service.clear_verified(request.deps, request.target(), request.now, by=request.require_caller())
    )


@routes.endpoint(
    "GET",
    "/users/<id>/verify",
    replace(
        _MODIFY,
        summary="Send a user the verification email again",
        reverify=False,
        success=201,
        response="SuccessView",
    ),
)
def resend_verification(request: Request) -> Response:
    """GET /users/:id/verify: 201 SEND_VERIFICATION_EMAIL_SUCCESS; 400 EMAIL_ALREADY_VERIFIED_ERROR."""
    account_changes.resend_verification(
        request.deps,
        request.target(),
        request.now,
        by=request.require_caller(),
        gone=ErrorCode.INVALID_USER_ERROR,
    )
    return success_response(SuccessCode.SEND_VERIFICATION_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/<id>/staff",
    replace(_MODIFY, summary="Promote a user to staff (they need a second factor)"),
)
def promote(request: Request) -> Response:
    """PUT /users/:id/staff: 200 with the User; 400 USER_REQUIRES_SECOND_FACTOR_ERROR."""
    return _user(
        service.set_staff(request.deps, request.target(), True, request.now, by=request.require_caller())
    )


@routes.endpoint("DELETE", "/users/<id>/staff", replace(_MODIFY, summary="Demote a user from staff"))
def demote(request: Request) -> Response:
    """DELETE /users/:id/staff: 200 with the User."""
    return _user(
        service.set_staff(request.deps, request.target(), False, request.now, by=request.require_caller())
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/ban",
    replace(_MODIFY, summary="Ban a user (every session revoked, a notice emailed)", body="BanBody"),
)
def ban(request: Request) -> Response:
    """PUT /users/:id/ban: 200 with the User (``bannedAt``, ``banReason``)."""
    return _user(
        service.ban(
            request.deps, request.target(), request.body.reason, request.now, by=request.require_caller()
        )
    )


@routes.endpoint("DELETE", "/users/<id>/ban", replace(_MODIFY, summary="Lift a user's ban"))
def unban(request: Request) -> Response:
    """DELETE /users/:id/ban: 200 with the User."""
    return _user(service.unban(request.deps, request.target(), request.now, by=request.require_caller()))


@routes.endpoint(
    "DELETE",
    "/users/<id>",
    replace(_MODIFY, summary="Delete a user", response="SuccessView", scoped_self=False),
)
def delete_user(request: Request) -> Response:
    """DELETE /users/:id: 200 DELETE_USER_SUCCESS; 404 INVALID_USER_ERROR (also if deleted meanwhile)."""
    if not service.delete_user(request.deps, request.target(), by=request.require_caller(), now=request.now):
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)  # deleted meanwhile
    return success_response(SuccessCode.DELETE_USER_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users",
    Policy(
        staff=True,
        scope=Scope.STAFF_MODIFY_ACCOUNTS,
        body="DeleteUsersBody",
        reverify=True,
        audit=True,
        scoped_self=False,
        response="CountedSuccessView",
        summary="Delete several users (at most 50 ids; unknown ones are skipped)",
    ),
)
def delete_users(request: Request) -> Response:
    """DELETE /users: 200 DELETE_USERS_SUCCESS with how many users this request deleted; nothing
    deleted when a scoped session names its own account among them."""
    request.refuse_own_account_to_scoped(request.body.ids)
    count = service.delete_users(request.deps, request.body.ids, by=request.require_caller(), now=request.now)
    return success_response(SuccessCode.DELETE_USERS_SUCCESS, count=count)
