"""Routes of the accounts group."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from nimbus_core.http.guard import Endpoint, current_request, guard
from nimbus_core.http.responses import json_response
from nimbus_core.scopes import Scope

router = APIGatewayHttpRouter()

GET_ME = Endpoint(scope=Scope.ACCOUNT_READ)


@router.get("/users/me", middlewares=[guard(GET_ME)])
def get_me() -> Response[str]:
    """GET /users/me: the caller's own User record, as authenticated (no further reads)."""
    caller = current_request(router).require_caller()
    return json_response(200, caller.user.to_public())
