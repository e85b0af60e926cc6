"""Routes of the staff group: staff operations on other accounts (the seed's staff account
endpoints). Every one is staff only, with STAFF_READ_ACCOUNTS or STAFF_MODIFY_ACCOUNTS; the
changes reverify the staff member (password, then their second factor). The target user is read
with the staff member's session (``target="id"``), and an unknown id is 404 INVALID_USER_ERROR only
after the staff and reverification checks (CONTRACT section 4)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nimbus_core.accounts import account_changes, activity, notices
from nimbus_core.domain.errors import ErrorCode, NimbusError, SuccessCode
from nimbus_core.domain.models import User
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, counted, success
from staff_api import service

if TYPE_CHECKING:
    from nimbus_core.http.views import (
        ActivityListView,
        CountedSuccessView,
        SuccessView,
        UserListView,
        UserView,
    )
    from staff_api.models import (
        ActivityQuery,
        BanBody,
        ChangeDomainBody,
        ChangeEmailBody,
        ChangePasswordBody,
        ChangeUsernameBody,
        DeleteUsersBody,
        UsersQuery,
    )

# /users/me/... belongs to the self-service functions: "me" is never a user id here (CONTRACT 1).
# Its bodies and queries are in staff_api.models, with the shared nimbus_core.http.account_bodies.
routes = EndpointRouter(models="staff_api.models", reserved={"id": frozenset({"me"})})


# A change to the account in ``:id``, reverified and audited. _MODIFY_NOT_OWN refuses a scoped session
# its own account, where the same change through /users/me is closed to it (Policy.scoped_self).
_MODIFY = Policy(
    staff=True,
    target="id",
    scope=Scope.STAFF_MODIFY_ACCOUNTS,
    reverify=True,
    audit=True,
)
_MODIFY_NOT_OWN = replace(_MODIFY, scoped_self=False)
# A change that hands an account to whoever makes it (its password, address, verification): never by
# a scoped session on a staff account, its own or another's (CONTRACT section 8: staff by people).
_TAKES_ACCOUNT = replace(_MODIFY_NOT_OWN, scoped_staff=False)
# Staff is granted and removed by people: never by a scoped session, whatever its scopes.
_GRANTS_STAFF = replace(_MODIFY, scoped_sessions=False)
_READ = Policy(staff=True, target="id", scope=Scope.STAFF_READ_ACCOUNTS)


def _user(user: User) -> Reply[UserView]:
    return Reply(user.to_public())


@routes.endpoint(
    "GET",
    "/users",
    Policy(staff=True, scope=Scope.STAFF_READ_ACCOUNTS),
    summary="Every user, newest first",
)
def list_users(request: Request[None, UsersQuery]) -> Reply[UserListView]:
    """GET /users: ``{count, items}``; ``count`` is the number of users, exact."""
    count, page = service.list_users(request.deps, limit=request.query.limit, offset=request.query.offset)
    return Reply({"count": count, "items": [u.to_public() for u in page]})


@routes.endpoint("GET", "/users/<id>/activity", _READ, summary="A user's security events, newest first")
def get_user_activity(request: Request[None, ActivityQuery]) -> Reply[ActivityListView]:
    """GET /users/:id/activity: ``{count, items}`` of ActivityEvent, or 404 INVALID_USER_ERROR."""
    query = request.query
    count, page = activity.page(request.deps, request.target().id, limit=query.limit, offset=query.offset)
    return Reply({"count": count, "items": [e.to_public() for e in page]})


@routes.endpoint("GET", "/users/<id>", _READ, summary="One user")
def get_user(request: Request) -> Reply[UserView]:
    """GET /users/:id: the User, or 404 INVALID_USER_ERROR."""
    return _user(request.target())


@routes.endpoint(
    "PUT",
    "/users/<id>/username",
    _MODIFY,
    errors=(ErrorCode.INVALID_USERNAME_ERROR, ErrorCode.USER_EXISTS_ERROR),
    summary="Change a user's username",
)
def set_username(request: Request[ChangeUsernameBody]) -> Reply[UserView]:
    """PUT /users/:id/username: 200 with the User; 409 USER_EXISTS_ERROR if the name is taken."""
    return _user(
        account_changes.rename(
            request.deps,
            request.target(),
            request.body.username,
            request.now,
            by=request.require_caller(),
            gone=ErrorCode.INVALID_USER_ERROR,
            answer=request.answer,
            actor=notices.STAFF,
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/email",
    _TAKES_ACCOUNT,
    errors=(ErrorCode.INVALID_EMAIL_ERROR, ErrorCode.USER_EXISTS_ERROR),
    summary="Change a user's email address (it must be verified again; never a key's own)",
)
def set_email(request: Request[ChangeEmailBody]) -> Reply[UserView]:
    """PUT /users/:id/email: 200 with the User, unverified; a verification email is queued."""
    return _user(
        account_changes.change_email(
            request.deps,
            request.target(),
            request.body.email,
            request.now,
            actor=notices.STAFF,
            by=request.require_caller(),
            gone=ErrorCode.INVALID_USER_ERROR,
            answer=request.answer,
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/password",
    _TAKES_ACCOUNT,
    errors=(ErrorCode.PASSWORDS_DO_NOT_MATCH_ERROR, ErrorCode.INSECURE_PASSWORD_ERROR),
    summary="Set a user's password (every session of theirs is revoked; never a key's own)",
)
def set_password(request: Request[ChangePasswordBody]) -> Reply[UserView]:
    """PUT /users/:id/password: 200 with the User; all of the user's sessions are revoked."""
    return _user(
        service.set_password(
            request.deps,
            request.target(),
            request.body.new_password,
            request.now,
            by=request.require_caller(),
            answer=request.answer,
        )
    )


@routes.endpoint(
    "PUT",
    "/users/<id>/domain",
    replace(_MODIFY, reverify=False),
    errors=(
        ErrorCode.SUBDOMAIN_NOT_ALLOWED_ERROR,
        ErrorCode.SUBDOMAIN_TOO_LONG_ERROR,
        ErrorCode.INVALID_DOMAIN_ERROR,
    ),
    summary="Change a user's domain and subdomain",
)
def set_domain(request: Request[ChangeDomainBody]) -> Reply[UserView]:
    """PUT /users/:id/domain: 200 with the User; 404 INVALID_DOMAIN_ERROR if not offered."""
    user = account_changes.change_domain(
        request.deps,
        request.target(),
        request.body.domain,
        request.body.subdomain,
        request.now,
        by=request.require_caller(),
        gone=ErrorCode.INVALID_USER_ERROR,
    )
    return _user(user)


@routes.endpoint(
    "PUT",
    "/users/<id>/verify",
    replace(_MODIFY, scoped_staff=False),
    errors=(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR,),
    summary="Mark a user's email address verified",
)
def set_verified(request: Request) -> Reply[UserView]:
    """PUT /users/:id/verify: 200 with the User; 400 EMAIL_ALREADY_VERIFIED_ERROR."""
    return _user(
        service.set_verified(
            request.deps, request.target(), request.now, by=request.require_caller(), answer=request.answer
        )
    )


@routes.endpoint(
    "DELETE",
    "/users/<id>/verify",
    replace(_MODIFY, scoped_staff=False),
    errors=(ErrorCode.EMAIL_NOT_VERIFIED_ERROR,),
    summary="Remove a user's verified mark",
)
def clear_verified(request: Request) -> Reply[UserView]:
    """DELETE /users/:id/verify: 200 with the User; 400 EMAIL_NOT_VERIFIED_ERROR."""
    return _user(
        service.clear_verified(
            request.deps, request.target(), request.now, by=request.require_caller(), answer=request.answer
        )
    )


@routes.endpoint(
    "GET",
    "/users/<id>/verify",
    replace(_MODIFY, reverify=False),
    status=201,
    errors=(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR,),
    summary="Send a user the verification email again",
)
def resend_verification(request: Request) -> Reply[SuccessView]:
    """GET /users/:id/verify: 201 SEND_VERIFICATION_EMAIL_SUCCESS; 400 EMAIL_ALREADY_VERIFIED_ERROR."""
    account_changes.resend_verification(
        request.deps,
        request.target(),
        request.now,
        by=request.require_caller(),
        gone=ErrorCode.INVALID_USER_ERROR,
    )
    return success(SuccessCode.SEND_VERIFICATION_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/<id>/staff",
    _GRANTS_STAFF,
    errors=(ErrorCode.USER_REQUIRES_SECOND_FACTOR_ERROR,),
    summary="Promote a user to staff (they need a second factor)",
)
def promote(request: Request) -> Reply[UserView]:
    """PUT /users/:id/staff: 200 with the User; 400 USER_REQUIRES_SECOND_FACTOR_ERROR."""
    return _user(
        service.set_staff(
            request.deps,
            request.target(),
            True,
            request.now,
            by=request.require_caller(),
            answer=request.answer,
        )
    )


@routes.endpoint("DELETE", "/users/<id>/staff", _GRANTS_STAFF, summary="Demote a user from staff")
def demote(request: Request) -> Reply[UserView]:
    """DELETE /users/:id/staff: 200 with the User."""
    return _user(
        service.set_staff(
            request.deps,
            request.target(),
            False,
            request.now,
            by=request.require_caller(),
            answer=request.answer,
        )
    )


@routes.endpoint(
    "PUT", "/users/<id>/ban", _MODIFY, summary="Ban a user (every session revoked, a notice emailed)"
)
def ban(request: Request[BanBody]) -> Reply[UserView]:
    """PUT /users/:id/ban: 200 with the User (``bannedAt``, ``banReason``)."""
    return _user(
        service.ban(
            request.deps,
            request.target(),
            request.body.reason,
            request.now,
            by=request.require_caller(),
            answer=request.answer,
        )
    )


@routes.endpoint("DELETE", "/users/<id>/ban", _MODIFY, summary="Lift a user's ban")
def unban(request: Request) -> Reply[UserView]:
    """DELETE /users/:id/ban: 200 with the User."""
    return _user(
        service.unban(
            request.deps, request.target(), request.now, by=request.require_caller(), answer=request.answer
        )
    )


@routes.endpoint(
    "DELETE",
    "/users/<id>",
    _MODIFY_NOT_OWN,
    errors=(ErrorCode.INVALID_USER_ERROR,),
    summary="Delete a user",
)
def delete_user(request: Request) -> Reply[SuccessView]:
    """DELETE /users/:id: 200 DELETE_USER_SUCCESS; 404 INVALID_USER_ERROR (also if deleted meanwhile)."""
    caller = request.require_caller()
    if not service.delete_user(
        request.deps, request.target(), by=caller, now=request.now, answer=request.answer
    ):
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)  # deleted meanwhile
    return success(SuccessCode.DELETE_USER_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users",
    Policy(staff=True, scope=Scope.STAFF_MODIFY_ACCOUNTS, reverify=True, audit=True, scoped_self=False),
    summary="Delete several users (at most 50 ids; unknown ones are skipped)",
)
def delete_users(request: Request[DeleteUsersBody]) -> Reply[CountedSuccessView]:
    """DELETE /users: 200 DELETE_USERS_SUCCESS with how many users this request deleted; nothing
    deleted when a scoped session names its own account among them."""
    request.refuse_own_account_to_scoped(request.body.ids)
    count = service.delete_users(
        request.deps, request.body.ids, by=request.require_caller(), now=request.now, answer=request.answer
    )
    return counted(SuccessCode.DELETE_USERS_SUCCESS, count)
