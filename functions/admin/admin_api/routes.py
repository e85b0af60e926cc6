"""Routes of the admin group: service identity. Unknown routes fall to the app's JSON 404."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

import nimbus_core
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import json_response
from nimbus_core.views import ServiceView

routes = EndpointRouter()


@routes.endpoint(
    "GET",
    "/",
    Policy(auth=Auth.NONE, statuses=(200, 503), response=ServiceView, summary="Service name and version"),
)
def root(_request: Request) -> Response[str]:
    """GET /: the service name and version."""
    return json_response(200, {"name": "nimbus", "version": nimbus_core.__version__})
