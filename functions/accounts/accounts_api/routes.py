"""Routes of the accounts group: each declared once with its policy (the seed's requirements)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts_api import service
from nimbus_core.accounts import activity, verification
from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import ErrorCode, SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, success

if TYPE_CHECKING:
    from accounts_api.models import (
        ActivityQuery,
        ChangeDomainBody,
        ChangeEmailBody,
        ChangePasswordBody,
        ChangeUsernameBody,
        DomainsQuery,
        VerifyEmailBody,
    )
    from nimbus_core.http.views import ActivityListView, DomainListView, DomainView, SuccessView, UserView

routes = EndpointRouter(models="accounts_api.models")

_MODIFY = (KillSwitch.ACCOUNT_MODIFY,)
_MODIFY_EMAIL = (KillSwitch.ACCOUNT_MODIFY, KillSwitch.ACCOUNT_EMAIL_VERIFY)


@routes.endpoint(
    "GET",
    "/users/me",
    Policy(scope=Scope.ACCOUNT_READ),
    summary="The current user",
)
def get_me(request: Request) -> Reply[UserView]:
    """GET /users/me: the caller's own User record, as authenticated (no further reads)."""
    return Reply(request.require_caller().user.to_public())


@routes.endpoint(
    "GET",
    "/users/me/activity",
    Policy(scope=Scope.ACCOUNT_READ),
    summary="The account's security events of the last 90 days, newest first",
)
def get_my_activity(request: Request[None, ActivityQuery]) -> Reply[ActivityListView]:
    """GET /users/me/activity: ``{count, items}`` of ActivityEvent (CONTRACT section 17)."""
    query = request.query
    count, page = activity.page(
        request.deps, request.require_caller().user.id, limit=query.limit, offset=query.offset
    )
    return Reply({"count": count, "items": [e.to_public() for e in page]})


@routes.endpoint(
    "PUT",
    "/users/me/username",
    Policy(
        scope=Scope.ACCOUNT_MODIFY,
        killswitches=_MODIFY,
        rate_limit=ratelimits.CHANGE_USERNAME,
        reverify=True,
    ),
    errors=(ErrorCode.INVALID_USERNAME_ERROR, ErrorCode.USER_EXISTS_ERROR),
    summary="Change the username",
)
def change_username(request: Request[ChangeUsernameBody]) -> Reply[UserView]:
    """PUT /users/me/username: 200 with the changed User."""
    user = service.change_username(
        request.deps,
        request.require_caller(),
        request.body.username,
        request.now,
        answer=request.answer,
        actor=request.actor(),
    )
    return Reply(user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/email",
    Policy(
        # Never with a scoped session, whatever its scopes: an address that receives the recovery
        # link makes a leaked key the account (CONTRACT section 8).
        scoped_sessions=False,
        killswitches=_MODIFY_EMAIL,
        rate_limit=ratelimits.CHANGE_EMAIL,
        reverify=True,
    ),
    errors=(ErrorCode.INVALID_EMAIL_ERROR, ErrorCode.USER_EXISTS_ERROR),
    summary="Change the email address (it must be verified again; never with a scoped session)",
)
def change_email(request: Request[ChangeEmailBody]) -> Reply[UserView]:
    """PUT /users/me/email: 200 with the changed User (unverified; a verification email is queued)."""
    user = service.change_email(
        request.deps,
        request.require_caller(),
        request.body.email,
        request.now,
        actor=request.actor(),
        answer=request.answer,
    )
    return Reply(user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/password",
    Policy(
        # Never with a scoped session, whatever its scopes: a password to log in with makes a
        # leaked key the account (CONTRACT section 8).
        scoped_sessions=False,
        killswitches=_MODIFY,
        rate_limit=ratelimits.CHANGE_PASSWORD,
        reverify=True,
        sets_own_password=True,
    ),
    errors=(ErrorCode.PASSWORDS_DO_NOT_MATCH_ERROR, ErrorCode.INSECURE_PASSWORD_ERROR),
    summary="Change the password (other sessions are revoked; never with a scoped session)",
)
def change_password(request: Request[ChangePasswordBody]) -> Reply[UserView]:
    """PUT /users/me/password: 200 with the User; every other session is revoked."""
    user = service.change_password(
        request.deps,
        request.require_caller(),
        request.body.new_password,
        request.now,
        actor=request.actor(),
        answer=request.answer,
    )
    return Reply(user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/domain",
    Policy(scope=Scope.ACCOUNT_MODIFY, killswitches=_MODIFY, rate_limit=ratelimits.CHANGE_DOMAIN),
    errors=(
        ErrorCode.SUBDOMAIN_NOT_ALLOWED_ERROR,
        ErrorCode.SUBDOMAIN_TOO_LONG_ERROR,
        ErrorCode.INVALID_DOMAIN_ERROR,
    ),
    summary="Choose an offered domain and optional subdomain",
)
def change_domain(request: Request[ChangeDomainBody]) -> Reply[UserView]:
    """PUT /users/me/domain: 200 with the changed User."""
    user = service.change_domain(
        request.deps, request.require_caller(), request.body.domain, request.body.subdomain, request.now
    )
    return Reply(user.to_public())


@routes.endpoint(
    "GET",
    "/users/me/verify",
    Policy(
        scope=Scope.ACCOUNT_MODIFY,
        killswitches=_MODIFY_EMAIL,
        rate_limit=ratelimits.RESEND_VERIFICATION,
    ),
    status=201,
    errors=(ErrorCode.EMAIL_ALREADY_VERIFIED_ERROR,),
    summary="Send the verification email again",
)
def resend_verification(request: Request) -> Reply[SuccessView]:
    """GET /users/me/verify: 201 SEND_VERIFICATION_EMAIL_SUCCESS."""
    service.resend_verification(request.deps, request.require_caller(), request.now)
    return success(SuccessCode.SEND_VERIFICATION_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/verify",
    Policy(auth=Auth.NONE, killswitches=_MODIFY_EMAIL),
    errors=(ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR, ErrorCode.BANNED_ERROR),
    summary="Verify the email address with the emailed token",
)
def verify_email(request: Request[VerifyEmailBody]) -> Reply[SuccessView]:
    """PUT /users/verify: 200 VERIFY_EMAIL_SUCCESS."""
    verification.verify(request.deps, request.body.token, request.now)
    return success(SuccessCode.VERIFY_EMAIL_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/me",
    Policy(scoped_sessions=False, killswitches=(KillSwitch.ACCOUNT_DELETE,), reverify=True),
    summary="Delete the account (never with a scoped session)",
)
def delete_me(request: Request) -> Reply[SuccessView]:
    """DELETE /users/me: 200 DELETE_USER_SUCCESS."""
    service.delete_account(request.deps, request.require_caller(), answer=request.answer)
    return success(SuccessCode.DELETE_USER_SUCCESS)


@routes.endpoint(
    "GET",
    "/domains",
    Policy(scope=Scope.ACCOUNT_READ),
    summary="Offered domains",
)
def list_domains(request: Request[None, DomainsQuery]) -> Reply[DomainListView]:
    """GET /domains: ``{count, items}`` of the offered domains, paginated (``limit=-1``: all of them)."""
    query = request.query
    count, page = service.list_domains(request.deps, limit=query.page_limit(), offset=query.offset)
    return Reply({"count": count, "items": [d.to_public() for d in page]})


@routes.endpoint(
    "GET",
    "/domains/<id>",
    Policy(scope=Scope.ACCOUNT_READ),
    errors=(ErrorCode.INVALID_DOMAIN_ERROR,),
    summary="One offered domain",
)
def get_domain(request: Request) -> Reply[DomainView]:
    """GET /domains/:id: one domain, or 404 INVALID_DOMAIN_ERROR."""
    return Reply(service.get_domain(request.deps, request.path["id"]).to_public())
