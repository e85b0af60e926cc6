"""Routes of the auth group (register, login, account recovery): parse input, call one service
function, shape the answer."""

from __future__ import annotations

from auth_api import recovery, service
from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Response, json_response, success_response

routes = EndpointRouter(models="auth_api.models")


@routes.endpoint(
    "POST",
    "/register",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_CREATE, KillSwitch.ACCOUNT_EMAIL_VERIFY),
        body="RegisterBody",
        names_session=True,
        rate_limit=ratelimits.REGISTER,
        success=201,
        response="SuccessfulAuthView",
        summary="Register a user and log in",
    ),
)
def register(request: Request) -> Response:
    """POST /register: create an account and log it in (201 SuccessfulAuth).

    Errors: 400 INVALID_USERNAME_ERROR, 400 INVALID_EMAIL_ERROR, 400 PASSWORDS_DO_NOT_MATCH_ERROR,
    404 INVALID_DOMAIN_ERROR, 409 USER_EXISTS_ERROR.
    """
    issued = service.register(
        request.deps,
        request.body,
        session_name=request.session_name,
        user_agent=request.user_agent,
        now=request.now,
    )
    return json_response(201, issued.to_public())


@routes.endpoint(
    "POST",
    "/login",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        body="LoginBody",
        names_session=True,
        rate_limit=ratelimits.LOGIN,
        success=201,
        response="SuccessfulAuthView",
        summary="Log in with a username or email and a password",
    ),
)
def login(request: Request) -> Response:
    """POST /login: open a normal session with a username or email and a password (201 SuccessfulAuth).

    Errors: 400 INVALID_SECOND_FACTOR_METHOD_ERROR, 401 INVALID_PASSWORD_ERROR,
    401 SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR, 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR, 403 BANNED_ERROR,
    404 INVALID_USER_ERROR.
    """
    issued = service.login(
        request.deps,
        request.body,
        session_name=request.session_name,
        user_agent=request.user_agent,
        now=request.now,
    )
    return json_response(201, issued.to_public())


@routes.endpoint(
    "POST",
    "/users/recover",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        body="RecoverBody",
        rate_limit=ratelimits.RECOVER,
        success=201,
        response="SuccessView",
        summary="Mail a password recovery link (the same answer whether or not the account exists)",
    ),
)
def request_recovery(request: Request) -> Response:
    """POST /users/recover: 201 SEND_RECOVERY_EMAIL_SUCCESS, whatever the name names: an account,
    none, a banned one, or one past its silent limit of recovery mails."""
    recovery.request_recovery(request.deps, request.body, request.now)
    return success_response(SuccessCode.SEND_RECOVERY_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/recover",
    Policy(
        auth=Auth.NONE,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        body="ResetPasswordBody",
        names_session=True,
        rate_limit=ratelimits.RESET_PASSWORD,
        response="ResetPasswordView",
        summary="Choose a new password with the mailed recovery token, and be signed in",
    ),
)
def reset_password(request: Request) -> Response:
    """PUT /users/recover: 200 RESET_PASSWORD_SUCCESS with the token and expiry of a new normal
    session (named as at login); every other session revoked, the login lock cleared.

    Errors: 400 INVALID_RECOVERY_TOKEN_ERROR, 400 INVALID_SECOND_FACTOR_METHOD_ERROR,
    401 SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR, 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR,
    403 BANNED_ERROR.
    """
    issued = recovery.reset_password(
        request.deps,
        request.body,
        source_ip=request.source_ip,
        now=request.now,
        session_name=request.session_name,
        user_agent=request.user_agent,
    )
    return success_response(SuccessCode.RESET_PASSWORD_SUCCESS, **issued.to_public())
