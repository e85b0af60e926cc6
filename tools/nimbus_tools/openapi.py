"""The OpenAPI 3.1 document, generated from the endpoint registry (docs/architecture.md).

Per operation: parameters from the pydantic models the route's signature names, each success's
schema from its view (the ``TypedDict`` its payload is typed with, read by pydantic's
``TypeAdapter``), the errors the guard answers plus those the route declares, the ``Authorization``
scheme, and ``x-nimbus-*`` extensions for what OpenAPI has no field for (scope, staff, kill
switches, reverification, rate limit, scoped sessions). ``python -m nimbus_tools.openapi`` prints it.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter

from nimbus_core import __version__
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.http.guard import guard_errors
from nimbus_core.http.policy import Auth, Endpoint, Policy
from nimbus_tools.template import function_specs, load_template

OPENAPI_VERSION = "3.1.0"
_PARAM = re.compile(r"<(\w+)>")
_REF = "#/components/schemas/"
_TEMPLATE = _REF + "{model}"


@dataclass(frozen=True)
class Registered:
    """One endpoint and the function (logical id in template.yaml) that serves it."""

    function: str
    endpoint: Endpoint

    @property
    def operation_id(self) -> str:
        """The route function's name, prefixed by its group (``Staff.ban``): names repeat across groups."""
        return f"{self.group}.{self.endpoint.name}"

    @property
    def group(self) -> str:
        """The function's name without "Function" (``StaffFunction`` -> ``Staff``): the operation's tag."""
        return self.function.removesuffix("Function")

    @property
    def openapi_path(self) -> str:
        """``/users/<id>/ban`` -> ``/users/{id}/ban``."""
        return _PARAM.sub(r"{\1}", self.endpoint.path)


def registered_endpoints() -> list[Registered]:
    """Every endpoint of every HTTP function, in template order."""
    return [
        Registered(spec.logical_id, endpoint)
        for spec in function_specs(load_template())
        if spec.routes  # stream-fed functions have no endpoints
        for endpoint in importlib.import_module(spec.handler_module).app.endpoints
    ]


# ------------------------------------------------------------------------------------------ errors


def endpoint_errors(endpoint: Endpoint) -> dict[int, list[str]]:
    """Every error status the endpoint can answer, with its codes (sorted): the guard's steps', as
    they declare them (:func:`nimbus_core.http.guard.guard_errors`), and the route's own."""
    by_status: dict[int, set[str]] = {}
    for status, code in guard_errors(endpoint) | endpoint.route_errors():
        by_status.setdefault(status, set()).add(code.name)
    return {status: sorted(codes) for status, codes in sorted(by_status.items())}


# ------------------------------------------------------------------------------------------ schemas


def _ref(schemas: dict[str, Any], model: type[BaseModel]) -> dict[str, str]:
    """A reference to the request model ``model``, whose schema (and those it names) joins
    components/schemas."""
    return _joined(
        schemas, model.__name__, model.model_json_schema(mode="validation", ref_template=_TEMPLATE)
    )


def _view_ref(schemas: dict[str, Any], view: type) -> dict[str, str]:
    """A reference to the view ``view`` (a ``TypedDict``: its docstring is the description, and a
    closed one's ``additionalProperties`` is false), whose schema (and those of the views it names)
    joins components/schemas."""
    schema = TypeAdapter(view).json_schema(mode="serialization", ref_template=_TEMPLATE)
    return _joined(schemas, view.__name__, schema)


def _joined(schemas: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, str]:
    for other, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(other, definition)
    schemas.setdefault(name, schema)
    return {"$ref": _REF + name}


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Every error: a stable code and its fixed message, plus fields for some codes.",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "enum": [code.name for code in ErrorCode]},
            "message": {"type": "string"},
            "fields": {
                "type": "array",
                "items": {"type": "string"},
                "description": "MISSING_FIELDS_ERROR, INVALID_FIELDS_ERROR: the fields at fault.",
            },
            "feature": {
                "type": "integer",
                "description": "SERVICE_UNAVAILABLE_ERROR: the number of the kill switch that is on.",
            },
            "token": {
                "type": "string",
                "description": "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR: the challenge.",
            },
            "exp": {"type": "integer", "description": "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR: its expiry."},
            "types": {"type": "array", "items": {"type": "string", "enum": ["totp", "webauthn", "backup"]}},
            "challenge": {"type": "object", "description": "WebAuthn request options, with a key enrolled."},
        },
    }


def _reverification_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": (
            "Identity reverification (CONTRACT section 9): a normal session sends its password; an "
            "account with a second factor is then challenged (401 SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR)"
            " and repeats the request with `2fa`."
        ),
        "properties": {
            "password": {"type": "string"},
            "2fa": {
                "type": "object",
                "required": ["token", "type"],
                "properties": {
                    "token": {"type": "string"},
                    "type": {"type": "string", "enum": ["totp", "webauthn", "backup"]},
                    "code": {"type": "string"},
                    "response": {"type": "object"},
                },
            },
        },
    }


# ------------------------------------------------------------------------------------------ operations


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    path_model = endpoint.model("path")
    path_schemas = path_model.model_json_schema(by_alias=True).get("properties", {}) if path_model else {}
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": path_schemas.get(name, {"type": "string"})}
        for name in _PARAM.findall(endpoint.path)
    ]
    query_model = endpoint.model("query")
    if query_model is not None:
        schema = query_model.model_json_schema(by_alias=True, mode="validation")
        required = set(schema.get("required", []))
        parameters += [
            {"name": name, "in": "query", "required": name in required, "schema": field}
            for name, field in schema.get("properties", {}).items()
        ]
    if endpoint.policy.names_session:
        parameters.append(
            {
                "name": "X-Session-Name",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "The new session's name (else it is named after the User-Agent).",
            }
        )
    return parameters


def _extensions(policy: Policy) -> dict[str, Any]:
    open_to_keys = policy.auth is Auth.REQUIRED and policy.scoped_sessions
    extensions: dict[str, Any] = {
        "x-nimbus-staff": policy.staff,
        "x-nimbus-scope": policy.scope.name if policy.scope is not None else None,
        "x-nimbus-scoped-sessions": open_to_keys,
        # False: a scoped session naming its own account here is 403 (CONTRACT section 8).
        "x-nimbus-scoped-self": open_to_keys and policy.scoped_self,
        # False: a scoped session naming a staff account here is 403 (CONTRACT section 8).
        "x-nimbus-scoped-staff": open_to_keys and policy.scoped_staff,
        "x-nimbus-killswitches": [KillSwitch(s).name for s in policy.killswitches],
        "x-nimbus-reverify": policy.reverify,
    }
    if policy.rate_limit is not None:
        limit = policy.rate_limit
        extensions["x-nimbus-rate-limit"] = {
            "name": limit.name,
            "limit": limit.limit,
            "windowSeconds": limit.window,
            "per": limit.per.name.lower(),
        }
    return extensions


def _success(schemas: dict[str, Any], view: type | None) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "Success"}
    if view is not None:  # None for a route that builds its own Response
        success["content"] = {"application/json": {"schema": _view_ref(schemas, view)}}
    return success


def _operation(registered: Registered, schemas: dict[str, Any]) -> dict[str, Any]:
    endpoint, policy = registered.endpoint, registered.endpoint.policy
    operation: dict[str, Any] = {
        "operationId": registered.operation_id,
        "summary": endpoint.summary,
        "description": endpoint.doc,
        "tags": [registered.group],
    }
    if parameters := _parameters(endpoint):
        operation["parameters"] = parameters
    body_model = endpoint.model("body")
    body: dict[str, Any] | None = _ref(schemas, body_model) if body_model else None
    if policy.reverify:
        reverification = {"$ref": _REF + "Reverification"}
        body = {"allOf": [body, reverification]} if body is not None else reverification
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    responses: dict[str, Any] = {
        str(status): _success(schemas, view) for status, view in endpoint.successes().items()
    }
    for status, codes in endpoint_errors(endpoint).items():
        responses[str(status)] = {
            "description": ", ".join(codes),
            "content": {"application/json": {"schema": {"$ref": _REF + "Error"}}},
            "x-nimbus-codes": codes,
        }
    operation["responses"] = responses
    if policy.auth is Auth.REQUIRED:
        operation["security"] = [{"session": []}]
    else:  # a token is optional: staff pass kill switches; a live session is refused by register/login
        operation["security"] = [{}, {"session": []}]
    return operation | _extensions(policy)


def build_document(endpoints: Iterable[Registered] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``endpoints`` (default: every registered endpoint)."""
    schemas = {"Error": _error_schema(), "Reverification": _reverification_schema()}
    paths: dict[str, dict[str, Any]] = {}
    for registered in endpoints if endpoints is not None else registered_endpoints():
        paths.setdefault(registered.openapi_path, {})[registered.endpoint.method.lower()] = _operation(
            registered, schemas
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Nimbus",
            "version": __version__,
            "description": (
                "Accounts and sessions for file-hosting platforms. Generated from the endpoint "
                "registry; the flows are described in docs/flows.md."
            ),
        },
        "servers": [{"url": "/", "description": "this API"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                "session": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "The token from POST /login or /register (`Bearer <token>` too).",
                }
            },
        },
    }


def render(document: dict[str, Any]) -> str:
    """The document as committed: sorted keys kept in insertion order, 2-space indent, newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the document (``make openapi`` writes it to docs/openapi.json)."""
    print(render(build_document()), end="")


if __name__ == "__main__":
    main()
