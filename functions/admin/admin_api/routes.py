"""Routes of the admin group: service identity. Unknown routes fall to the app's JSON 404."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

import nimbus_core
from nimbus_core.http.guard import Auth, Endpoint, guard
from nimbus_core.http.responses import json_response

router = APIGatewayHttpRouter()

ROOT = Endpoint(auth=Auth.NONE)


@router.get("/", middlewares=[guard(ROOT)])
def root() -> Response[str]:
    """GET /: the service name and version."""
    return json_response(200, {"name": "nimbus", "version": nimbus_core.__version__})
