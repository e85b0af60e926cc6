"""Routes of the auth group (register, login, account recovery): parse input, call one service
function, shape the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from auth_api import recovery, service
from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import ErrorCode, NimbusError, SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, success, success_payload

if TYPE_CHECKING:
    from auth_api.models import LoginBody, PasskeyLoginBody, RecoverBody, RegisterBody, ResetPasswordBody
    from nimbus_core.http.views import (
        PasskeyChallengeView,
        ResetPasswordView,
        SuccessfulAuthView,
        SuccessView,
    )

routes = EndpointRouter(models="auth_api.models")


@routes.endpoint(
    "POST",
    "/register",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_CREATE, KillSwitch.ACCOUNT_EMAIL_VERIFY),
        names_session=True,
        rate_limit=ratelimits.REGISTER,
    ),
    status=201,
    errors=(
        ErrorCode.INVALID_USERNAME_ERROR,
        ErrorCode.INVALID_EMAIL_ERROR,
        ErrorCode.PASSWORDS_DO_NOT_MATCH_ERROR,
        ErrorCode.INSECURE_PASSWORD_ERROR,
        ErrorCode.INVALID_DOMAIN_ERROR,
        ErrorCode.USER_EXISTS_ERROR,
    ),
    summary="Register a user and log in",
)
def register(request: Request[RegisterBody]) -> Reply[SuccessfulAuthView]:
    """POST /register: create an account and log it in (201 SuccessfulAuth)."""
    issued = service.register(
        request.deps,
        request.body,
        session_name=request.session_name,
        user_agent=request.user_agent,
        now=request.now,
        ip=request.source_ip,
    )
    return Reply(issued.to_public())


@routes.endpoint(
    "POST",
    "/login",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        names_session=True,
        rate_limit=ratelimits.LOGIN,
    ),
    status=201,
    errors=(
        ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR,
        ErrorCode.INVALID_PASSWORD_ERROR,
        ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR,
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
        ErrorCode.BANNED_ERROR,
        ErrorCode.INVALID_USER_ERROR,
    ),
    summary="Log in with a username or email and a password",
)
def login(request: Request[LoginBody]) -> Reply[SuccessfulAuthView]:
    """POST /login: open a normal session with a username or email and a password (201 SuccessfulAuth)."""
    issued = service.login(
        request.deps,
        request.body,
        session_name=request.session_name,
        user_agent=request.user_agent,
        now=request.now,
        attempt=request.attempt(),
    )
    return Reply(issued.to_public())


def _asks_for_challenge(body: PasskeyLoginBody) -> bool:
    return body.asks_for_challenge


@routes.endpoint(
    "POST",
    "/login/passkey",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        names_session=True,
        rate_limit=ratelimits.PASSKEY_LOGIN,
        uncounted=_asks_for_challenge,
    ),
    status=201,
    also=(200,),
    errors=(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR, ErrorCode.BANNED_ERROR),
    summary="Sign in with a passkey alone: a challenge for {}, then a session for its answer",
)
def passkey_login(
    request: Request[PasskeyLoginBody],
) -> Reply[SuccessfulAuthView] | Reply[PasskeyChallengeView]:
    """POST /login/passkey: ``{}`` answers 200 ``{token, exp, challenge}`` (request options that
    name no credential and require user verification; not counted by the limit); the answer
    ``{token, response, rememberMe?}`` opens a normal session (201 SuccessfulAuth), named as at
    login. Unknown, deleted and wrong credentials all answer the same 401."""
    body = request.body
    if body.asks_for_challenge:
        if body.response is not None:
            raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["token"])
        return Reply(service.passkey_challenge(request.deps, request.now), status=200)
    issued = service.passkey_login(
        request.deps,
        body,
        session_name=request.session_name,
        user_agent=request.user_agent,
        now=request.now,
        attempt=request.attempt(),
    )
    return Reply(issued.to_public())


@routes.endpoint(
    "POST",
    "/users/recover",
    Policy(
        auth=Auth.GUEST,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        rate_limit=ratelimits.RECOVER,
    ),
    status=201,
    summary="Mail a password recovery link (the same answer whether or not the account exists)",
)
def request_recovery(request: Request[RecoverBody]) -> Reply[SuccessView]:
    """POST /users/recover: 201 SEND_RECOVERY_EMAIL_SUCCESS, whatever the name names: an account,
    none, a banned one, or one past its silent limit of recovery mails."""
    recovery.request_recovery(request.deps, request.body, request.now)
    return success(SuccessCode.SEND_RECOVERY_EMAIL_SUCCESS)


@routes.endpoint(
    "PUT",
    "/users/recover",
    Policy(
        auth=Auth.NONE,
        killswitches=(KillSwitch.ACCOUNT_LOGIN,),
        names_session=True,
        rate_limit=ratelimits.RESET_PASSWORD,
    ),
    errors=(
        ErrorCode.INVALID_RECOVERY_TOKEN_ERROR,
        ErrorCode.INSECURE_PASSWORD_ERROR,
        ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR,
        ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR,
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
        ErrorCode.BANNED_ERROR,
    ),
    summary="Choose a new password with the mailed recovery token, and be signed in",
)
def reset_password(request: Request[ResetPasswordBody]) -> Reply[ResetPasswordView]:
    """PUT /users/recover: 200 RESET_PASSWORD_SUCCESS with the token and expiry of a new normal
    session (named as at login); every other session revoked, the login lock cleared."""
    issued = recovery.reset_password(
        request.deps,
        request.body,
        source_ip=request.source_ip,
        now=request.now,
        session_name=request.session_name,
        user_agent=request.user_agent,
    )
    code = SuccessCode.RESET_PASSWORD_SUCCESS
    shown = issued.to_public()  # the new session (never "compromised": the reset refused such a password)
    return Reply(
        {**success_payload(code), "token": shown["token"], "exp": shown["exp"], "device": shown["device"]},
        code,
    )
