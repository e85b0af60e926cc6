"""Routes of the accounts group: each declared once with its policy (the seed's requirements)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts_api import service
from nimbus_core.accounts import verification
from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Response, json_response, success_response

if TYPE_CHECKING:
    from accounts_api.models import ChangeDomainBody

routes = EndpointRouter(models="accounts_api.models")

_MODIFY = (KillSwitch.ACCOUNT_MODIFY,)
_MODIFY_EMAIL = (KillSwitch.ACCOUNT_MODIFY, KillSwitch.ACCOUNT_EMAIL_VERIFY)


@routes.endpoint(
    "GET",
    "/users/me",
    Policy(
        scope=Scope.ACCOUNT_READ,
        response="UserView",
        summary="The current user",
    ),
)
def get_me(request: Request) -> Response:
    """GET /users/me: the caller's own User record, as authenticated (no further reads)."""
    return json_response(200, request.require_caller().user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/username",
    Policy(
        scope=Scope.ACCOUNT_MODIFY,
        killswitches=_MODIFY,
        body="ChangeUsernameBody",
        rate_limit=ratelimits.CHANGE_USERNAME,
        reverify=True,
        response="UserView",
        summary="Change the username",
    ),
)
def change_username(request: Request) -> Response:
    """PUT /users/me/username: 200 with the changed User.

    Errors: 400 INVALID_USERNAME_ERROR, 409 USER_EXISTS_ERROR.
    """
    user = service.change_username(request.deps, request.require_caller(), request.body.username, request.now)
    return json_response(200, user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/email",
    Policy(
        # Never with a scoped session, whatever its scopes: an address that receives the recovery
        # link makes a leaked key the account (CONTRACT section 8).
        scoped_sessions=False,
        killswitches=_MODIFY_EMAIL,
        body="ChangeEmailBody",
        rate_limit=ratelimits.CHANGE_EMAIL,
        reverify=True,
        response="UserView",
        summary="Change the email address (it must be verified again; never with a scoped session)",
    ),
)
def change_email(request: Request) -> Response:
    """PUT /users/me/email: 200 with the changed User (unverified; a verification email is queued).

    Errors: 400 INVALID_EMAIL_ERROR, 409 USER_EXISTS_ERROR.
    """
    user = service.change_email(
        request.deps, request.require_caller(), request.body.email, request.now, actor=request.actor()
    )
    return json_response(200, user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/password",
    Policy(
        # Never with a scoped session, whatever its scopes: a password to log in with makes a
        # leaked key the account (CONTRACT section 8).
        scoped_sessions=False,
        killswitches=_MODIFY,
        body="ChangePasswordBody",
        rate_limit=ratelimits.CHANGE_PASSWORD,
        reverify=True,
        response="UserView",
        summary="Change the password (other sessions are revoked; never with a scoped session)",
    ),
)
def change_password(request: Request) -> Response:
    """PUT /users/me/password: 200 with the User; every other session is revoked.

    Errors: 400 PASSWORDS_DO_NOT_MATCH_ERROR.
    """
    user = service.change_password(
        request.deps, request.require_caller(), request.body.new_password, request.now, actor=request.actor()
    )
    return json_response(200, user.to_public())


@routes.endpoint(
    "PUT",
    "/users/me/domain",
    Policy(
        scope=Scope.ACCOUNT_MODIFY,
        killswitches=_MODIFY,
        body="ChangeDomainBody",
        rate_limit=ratelimits.CHANGE_DOMAIN,
        response="UserView",
        summary="Choose an offered domain and optional subdomain",
    ),
)
def change_domain(request: Request) -> Response:
    """PUT /users/me/domain: 200 with the changed User.

    Errors: 400 SUBDOMAIN_NOT_ALLOWED_ERROR, 400 SUBDOMAIN_TOO_LONG_ERROR, 404 INVALID_DOMAIN_ERROR.
    """
    body: ChangeDomainBody = request.body
    user = service.change_domain(
        request.deps, request.require_caller(), body.domain, body.subdomain, request.now
    )
    return json_response(200, user.to_public())


@routes.endpoint(
    "GET",
    "/users/me/verify",
    Policy(
        scope=Scope.ACCOUNT_MODIFY,
        killswitches=_MODIFY_EMAIL,
        rate_limit=ratelimits.RESEND_VERIFICATION,
        success=201,
        response="SuccessView",
        summary="Send the verification email again",
    ),
)
def resend_verification(request: Request) -> Response:
    """GET /users/me/verify: 201 SEND_VERIFICATION_EMAIL_SUCCESS. Errors: 400 EMAIL_ALREADY_VERIFIED_ERROR."""
    service.resend_verification(request.deps, request.require_caller(), request.now)
    return success_response(SuccessCode.SEND_VERIFICATION_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/verify",
    Policy(
        auth=Auth.NONE,
        killswitches=_MODIFY_EMAIL,
        body="VerifyEmailBody",
        response="SuccessView",
        summary="Verify the email address with the emailed token",
    ),
)
def verify_email(request: Request) -> Response:
    """PUT /users/verify: 200 VERIFY_EMAIL_SUCCESS.

    Errors: 400 INVALID_VERIFICATION_TOKEN_ERROR, 403 BANNED_ERROR.
    """
    verification.verify(request.deps, request.body.token, request.now)
    return success_response(SuccessCode.VERIFY_EMAIL_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/me",
    Policy(
        scoped_sessions=False,
        killswitches=(KillSwitch.ACCOUNT_DELETE,),
        reverify=True,
        response="SuccessView",
        summary="Delete the account (never with a scoped session)",
    ),
)
def delete_me(request: Request) -> Response:
    """DELETE /users/me: 200 DELETE_USER_SUCCESS."""
    service.delete_account(request.deps, request.require_caller())
    return success_response(SuccessCode.DELETE_USER_SUCCESS)


@routes.endpoint(
    "GET",
    "/domains",
    Policy(
        scope=Scope.ACCOUNT_READ,
        query="DomainsQuery",
        response="DomainListView",
        summary="Offered domains",
    ),
)
def list_domains(request: Request) -> Response:
    """GET /domains: ``{count, items}`` of the offered domains, paginated."""
    count, page = service.list_domains(request.deps, limit=request.query.limit, offset=request.query.offset)
    return json_response(200, {"count": count, "items": [d.to_public() for d in page]})


@routes.endpoint(
    "GET",
    "/domains/<id>",
    Policy(
        scope=Scope.ACCOUNT_READ,
        response="DomainView",
        summary="One offered domain",
    ),
)
def get_domain(request: Request) -> Response:
    """GET /domains/:id: one domain, or 404 INVALID_DOMAIN_ERROR."""
    return json_response(200, service.get_domain(request.deps, request.path["id"]).to_public())
