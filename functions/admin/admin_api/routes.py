"""Routes of the admin group: service identity, and the kill switches and log level that staff
change through the API (CONTRACT section 11). Unknown routes fall to the app's JSON 404.

The changes are SSM writes, which no DynamoDB transaction can carry, so a second-factor answer is
recorded before the write (:meth:`Request.record_answer_now`), never after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import nimbus_core
from admin_api import service
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Response, json_response, json_text_response

if TYPE_CHECKING:
    from admin_api.models import KillSwitchPath

routes = EndpointRouter(models="admin_api.models")


_STAFF = Policy(staff=True)
# A change to the kill switches; each endpoint adds its summary (and the switch's path model).
_SWITCH_CHANGE = replace(
    _STAFF, scope=Scope.STAFF_MODIFY_KILLSWITCHES, reverify=True, audit=True, response="KillSwitchListView"
)


def _switch_list(config: RuntimeConfig) -> Response:
    return json_response(200, service.killswitch_list(config))


@routes.endpoint(
    "GET",
    "/",
    Policy(auth=Auth.NONE, response="ServiceView", summary="Service name and version"),
)
def root(_request: Request) -> Response:
    """GET /: the service name and version."""
    return json_response(200, {"name": "nimbus", "version": nimbus_core.__version__})


@routes.endpoint(
    "GET",
    "/openapi.json",
    Policy(auth=Auth.NONE, response="OpenApiDocumentView", summary="This API's OpenAPI 3.1 document"),
)
def openapi_document(_request: Request) -> Response:
    """GET /openapi.json: the OpenAPI 3.1 document of this API (docs/openapi.json)."""
    return json_text_response(200, service.openapi_document())


@routes.endpoint(
    "GET",
    "/killswitches",
    replace(
        _STAFF,
        scope=Scope.STAFF_MODIFY_KILLSWITCHES,
        summary="The kill switches and their states",
        response="KillSwitchListView",
    ),
)
def list_killswitches(request: Request) -> Response:
    """GET /killswitches: ``{count: 9, items: [{id, name, state}]}`` (as this container sees them)."""
    return _switch_list(request.deps.config.current())


@routes.endpoint(
    "PUT",
    "/killswitches/<id>",
    replace(_SWITCH_CHANGE, summary="Enable a kill switch", path="KillSwitchPath"),
)
def enable_killswitch(request: Request) -> Response:
    """PUT /killswitches/:id: enable it; the full list after the change."""
    path: KillSwitchPath = request.path_model
    request.record_answer_now()
    return _switch_list(service.set_switch(request.deps, path.switch, enabled=True))


@routes.endpoint(
    "DELETE",
    "/killswitches/<id>",
    replace(_SWITCH_CHANGE, summary="Disable a kill switch", path="KillSwitchPath"),
)
def disable_killswitch(request: Request) -> Response:
    """DELETE /killswitches/:id: disable it; the full list after the change."""
    path: KillSwitchPath = request.path_model
    request.record_answer_now()
    return _switch_list(service.set_switch(request.deps, path.switch, enabled=False))


@routes.endpoint("DELETE", "/killswitches", replace(_SWITCH_CHANGE, summary="Disable every kill switch"))
def disable_all_killswitches(request: Request) -> Response:
    """DELETE /killswitches: disable all; the full list after the change."""
    request.record_answer_now()
    return _switch_list(service.disable_all(request.deps))


@routes.endpoint(
    "GET",
    "/loglevel",
    replace(_STAFF, scope=Scope.STAFF_MODIFY_LOGLEVEL, summary="The log level", response="LogLevelView"),
)
def get_log_level(request: Request) -> Response:
    """GET /loglevel: ``{name}``."""
    return json_response(200, {"name": request.deps.config.current().log_level})


@routes.endpoint(
    "PATCH",
    "/loglevel",
    replace(
        _STAFF,
        scope=Scope.STAFF_MODIFY_LOGLEVEL,
        summary="Set the log level of every function (within 10 s)",
        body="SetLogLevelBody",
        reverify=True,
        audit=True,
        response="LogLevelView",
    ),
)
def set_log_level(request: Request) -> Response:
    """PATCH /loglevel: ``{name}`` as stored (DEBUG, INFO, WARN, ERROR or NONE).

    Errors: 400 INVALID_LOGLEVEL_ERROR.
    """
    request.record_answer_now()
    return json_response(200, {"name": service.set_log_level(request.deps, request.body.name).log_level})
