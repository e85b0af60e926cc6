"""The OpenAPI 3.1 document (docs/openapi.json) is generated from the registry, valid, and current.

The integration tests check the other direction: every error an endpoint answers is one its
document lists (tests/integration/conftest.py, ``_check_documented_error``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openapi_spec_validator import validate

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Auth, ErrorAt, Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply
from nimbus_tools.openapi import Registered, build_document, registered_endpoints, render
from tests.seed_endpoints import BY_KEY

if TYPE_CHECKING:
    from nimbus_core.http.views import UserView

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGISTERED = registered_endpoints()
DOCUMENT = build_document(REGISTERED)


def _operation(method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = DOCUMENT["paths"][path][method.lower()]
    return operation


def test_the_committed_document_is_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render(DOCUMENT), (
        "docs/openapi.json is stale: run `make openapi` and commit it"
    )


def test_the_shared_layer_ships_the_committed_document_the_api_serves() -> None:
    # A symbolic link, so there is one document: `sam build` copies it into the layer as the file.
    shipped = Path(__file__).resolve().parents[2] / "shared" / "nimbus_core" / "openapi.json"
    assert shipped.is_symlink()
    assert shipped.resolve() == COMMITTED.resolve()

    from admin_api.service import openapi_document

    assert json.loads(openapi_document()) == json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_the_document_is_valid_openapi_3_1() -> None:
    assert DOCUMENT["openapi"] == "3.1.0"
    validate(DOCUMENT)


def test_every_registered_endpoint_is_an_operation_and_nothing_else_is() -> None:
    operations = {(method.upper(), path) for path, item in DOCUMENT["paths"].items() for method in item}
    assert operations == {(r.endpoint.method, r.openapi_path) for r in REGISTERED}
    assert len(operations) == len(BY_KEY)


@pytest.mark.parametrize("registered", REGISTERED, ids=lambda r: f"{r.endpoint.method} {r.endpoint.path}")
def test_each_operation_carries_its_policy(registered: Any) -> None:
    policy = registered.endpoint.policy
    operation = _operation(registered.endpoint.method, registered.openapi_path)

    assert operation["x-nimbus-staff"] is policy.staff
    assert operation["x-nimbus-scope"] == (policy.scope.name if policy.scope else None)
    assert operation["x-nimbus-reverify"] is policy.reverify
    assert operation["x-nimbus-killswitches"] == [s.name for s in policy.killswitches]
    assert ("x-nimbus-rate-limit" in operation) is (policy.rate_limit is not None)
    assert (operation["security"] == [{"session": []}]) is (policy.auth is Auth.REQUIRED)
    endpoint = registered.endpoint
    assert str(endpoint.status) in operation["responses"]
    assert operation["summary"] == endpoint.summary
    body = json.dumps(operation.get("requestBody", {}))
    assert ("Reverification" in body) is policy.reverify
    if endpoint.model_name("body") is not None:
        assert f'"#/components/schemas/{endpoint.model_name("body")}"' in body
    success = json.dumps(operation["responses"][str(endpoint.status)])
    assert f'"#/components/schemas/{endpoint.model_name("response")}"' in success
    # Every operation can answer 500 and 503 (the GLOBAL switch); a session endpoint 401.
    assert {"500", "503"} <= set(operation["responses"])
    if policy.auth is Auth.REQUIRED:
        assert "INVALID_SESSION_ERROR" in operation["responses"]["401"]["x-nimbus-codes"]
    # Who may call it with a scoped session, and with one naming its own account: refused with 403.
    open_to_keys = policy.auth is Auth.REQUIRED and policy.scoped_sessions
    assert operation["x-nimbus-scoped-sessions"] is open_to_keys
    assert operation["x-nimbus-scoped-self"] is (open_to_keys and policy.scoped_self)
    assert operation["x-nimbus-scoped-staff"] is (open_to_keys and policy.scoped_staff)
    if policy.auth is Auth.REQUIRED and not (policy.scoped_sessions and policy.scoped_self):
        assert "INSUFFICIENT_PERMISSIONS_ERROR" in operation["responses"]["403"]["x-nimbus-codes"]


@pytest.mark.parametrize("change", ["password", "email"])
def test_the_document_closes_password_and_address_changes_to_a_keys_own_account(change: str) -> None:
    own = _operation("PUT", f"/users/me/{change}")
    staff_path = _operation("PUT", f"/users/{{id}}/{change}")

    assert (own["x-nimbus-scoped-sessions"], own["x-nimbus-scope"]) == (False, None)
    assert (staff_path["x-nimbus-scoped-sessions"], staff_path["x-nimbus-scoped-self"]) == (True, False)
    for operation in (own, staff_path):
        assert "INSUFFICIENT_PERMISSIONS_ERROR" in operation["responses"]["403"]["x-nimbus-codes"]


def test_the_errors_a_route_documents_are_listed_under_their_status() -> None:
    ban = _operation("PUT", "/users/{id}/ban")["responses"]
    login = _operation("POST", "/login")["responses"]

    assert "INVALID_USER_ERROR" in ban["404"]["x-nimbus-codes"]  # the target user (the guard's)
    assert "ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR" in ban["401"]["x-nimbus-codes"]
    assert "BANNED_ERROR" in login["403"]["x-nimbus-codes"]  # declared by the route (errors=)
    assert "RATELIMITED_ERROR" in login["429"]["x-nimbus-codes"]


def _unknown_session(request: Request) -> Reply[UserView]:
    """GET /a/:sid. Errors: 409 USER_EXISTS_ERROR (prose: never read for the document)."""
    raise AssertionError("never called")


def test_a_declared_status_overrides_the_codes_own_and_docstring_prose_lists_nothing() -> None:
    group = EndpointRouter()
    errors = (ErrorAt(404, ErrorCode.INVALID_SESSION_ERROR), ErrorCode.BANNED_ERROR)
    group.endpoint("GET", "/a/<sid>", Policy(), status=201, errors=errors, summary="S")(_unknown_session)
    document = build_document([Registered("TestFunction", e) for e in group.endpoints])
    operation = document["paths"]["/a/{sid}"]["get"]

    assert operation["summary"] == "S"
    assert "UserView" in json.dumps(operation["responses"]["201"])
    assert "200" not in operation["responses"]
    assert operation["responses"]["404"]["x-nimbus-codes"] == [
        "INVALID_ENDPOINT_ERROR",
        "INVALID_SESSION_ERROR",
    ]
    assert operation["responses"]["403"]["x-nimbus-codes"] == ["BANNED_ERROR"]
    assert "409" not in operation["responses"]
