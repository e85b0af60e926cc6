"""Routes of the auth group: parse input, call one service function, shape the answer."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from auth_api import service
from auth_api.models import LoginBody, RegisterBody
from nimbus_core import ratelimits
from nimbus_core.http.guard import Auth, Endpoint, current_request, guard
from nimbus_core.http.responses import json_response
from nimbus_core.killswitches import KillSwitch

router = APIGatewayHttpRouter()

REGISTER = Endpoint(
    auth=Auth.GUEST,
    killswitches=(KillSwitch.ACCOUNT_CREATE, KillSwitch.ACCOUNT_EMAIL_VERIFY),
    body=RegisterBody,
    names_session=True,
    rate_limit=ratelimits.REGISTER,
)
LOGIN = Endpoint(
    auth=Auth.GUEST,
    killswitches=(KillSwitch.ACCOUNT_LOGIN,),
    body=LoginBody,
    names_session=True,
    rate_limit=ratelimits.LOGIN,
)


@router.post("/register", middlewares=[guard(REGISTER)])
def register() -> Response[str]:
    """POST /register: create an account and log it in (201 SuccessfulAuth)."""
    request = current_request(router)
    issued = service.register(request.body, session_name=request.session_name, now=request.now)
    return json_response(201, issued.to_public())


@router.post("/login", middlewares=[guard(LOGIN)])
def login() -> Response[str]:
    """POST /login: open a normal session with a username or email and a password (201 SuccessfulAuth)."""
    request = current_request(router)
    issued = service.login(request.body, session_name=request.session_name, now=request.now)
    return json_response(201, issued.to_public())
