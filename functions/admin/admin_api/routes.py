"""Routes of the admin group: service identity, and the kill switches and log level that staff
change through the API (CONTRACT section 11). Unknown routes fall to the app's JSON 404.

The changes are SSM writes, which no DynamoDB transaction can carry, so the service records a
second-factor answer (``request.answer``) before the write, never after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import nimbus_core
from admin_api import service
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply

if TYPE_CHECKING:
    from admin_api.models import KillSwitchPath, SetLogLevelBody
    from nimbus_core.http.views import KillSwitchListView, LogLevelView, OpenApiDocumentView, ServiceView

routes = EndpointRouter(models="admin_api.models")


_STAFF = Policy(staff=True)
# A change to the kill switches.
_SWITCH_CHANGE = replace(_STAFF, scope=Scope.STAFF_MODIFY_KILLSWITCHES, reverify=True, audit=True)


def _switch_list(config: RuntimeConfig) -> Reply[KillSwitchListView]:
    return Reply(service.killswitch_list(config))


@routes.endpoint("GET", "/", Policy(auth=Auth.NONE), summary="Service name and version")
def root(_request: Request) -> Reply[ServiceView]:
    """GET /: the service name and version."""
    return Reply({"name": "nimbus", "version": nimbus_core.__version__})


@routes.endpoint("GET", "/openapi.json", Policy(auth=Auth.NONE), summary="This API's OpenAPI 3.1 document")
def openapi_document(_request: Request) -> Reply[OpenApiDocumentView]:
    """GET /openapi.json: the OpenAPI 3.1 document of this API (docs/openapi.json)."""
    return Reply(json_text=service.openapi_document())


@routes.endpoint(
    "GET",
    "/killswitches",
    replace(_STAFF, scope=Scope.STAFF_MODIFY_KILLSWITCHES),
    summary="The kill switches and their states",
)
def list_killswitches(request: Request) -> Reply[KillSwitchListView]:
    """GET /killswitches: ``{count: 9, items: [{id, name, state}]}`` (as this container sees them)."""
    return _switch_list(request.deps.config.current())


@routes.endpoint("PUT", "/killswitches/<id>", _SWITCH_CHANGE, summary="Enable a kill switch")
def enable_killswitch(request: Request[None, None, KillSwitchPath]) -> Reply[KillSwitchListView]:
    """PUT /killswitches/:id: enable it; the full list after the change."""
    switch = request.path_model.switch
    return _switch_list(service.set_switch(request.deps, switch, enabled=True, answer=request.answer))


@routes.endpoint("DELETE", "/killswitches/<id>", _SWITCH_CHANGE, summary="Disable a kill switch")
def disable_killswitch(request: Request[None, None, KillSwitchPath]) -> Reply[KillSwitchListView]:
    """DELETE /killswitches/:id: disable it; the full list after the change."""
    switch = request.path_model.switch
    return _switch_list(service.set_switch(request.deps, switch, enabled=False, answer=request.answer))


@routes.endpoint("DELETE", "/killswitches", _SWITCH_CHANGE, summary="Disable every kill switch")
def disable_all_killswitches(request: Request) -> Reply[KillSwitchListView]:
    """DELETE /killswitches: disable all; the full list after the change."""
    return _switch_list(service.disable_all(request.deps, answer=request.answer))


@routes.endpoint(
    "GET",
    "/loglevel",
    replace(_STAFF, scope=Scope.STAFF_MODIFY_LOGLEVEL),
    summary="The log level",
)
def get_log_level(request: Request) -> Reply[LogLevelView]:
    """GET /loglevel: ``{name}``."""
    return Reply({"name": request.deps.config.current().log_level})


@routes.endpoint(
    "PATCH",
    "/loglevel",
    replace(_STAFF, scope=Scope.STAFF_MODIFY_LOGLEVEL, reverify=True, audit=True),
    errors=(ErrorCode.INVALID_LOGLEVEL_ERROR,),
    summary="Set the log level of every function (within 10 s)",
)
def set_log_level(request: Request[SetLogLevelBody]) -> Reply[LogLevelView]:
    """PATCH /loglevel: ``{name}`` as stored (DEBUG, INFO, WARN, ERROR or NONE)."""
    config = service.set_log_level(request.deps, request.body.name, answer=request.answer)
    return Reply({"name": config.log_level})
