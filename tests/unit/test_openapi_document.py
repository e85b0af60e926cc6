"""The OpenAPI 3.1 document (docs/openapi.json) is generated from the registry, valid, and current.

The integration tests check the other direction: every error an endpoint answers is one its
document lists (tests/integration/conftest.py, ``_check_documented_error``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.http.policy import Auth
from nimbus_tools.openapi import build_document, documented_errors, registered_endpoints, render
from tests.seed_endpoints import BY_KEY

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
    assert str(policy.success) in operation["responses"]
    body = json.dumps(operation.get("requestBody", {}))
    assert ("Reverification" in body) is policy.reverify
    if policy.body is not None:
        assert f'"#/components/schemas/{policy.body}"' in body
    # Every operation can answer 500 and 503 (the GLOBAL switch); a session endpoint 401.
    assert {"500", "503"} <= set(operation["responses"])
    if policy.auth is Auth.REQUIRED:
        assert "INVALID_SESSION_ERROR" in operation["responses"]["401"]["x-nimbus-codes"]
    # Who may call it with a scoped session, and with one naming its own account: refused with 403.
    open_to_keys = policy.auth is Auth.REQUIRED and policy.scoped_sessions
    assert operation["x-nimbus-scoped-sessions"] is open_to_keys
    assert operation["x-nimbus-scoped-self"] is (open_to_keys and policy.scoped_self)
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
    assert "BANNED_ERROR" in login["403"]["x-nimbus-codes"]  # named in the route's docstring
    assert "RATELIMITED_ERROR" in login["429"]["x-nimbus-codes"]


def test_a_docstring_status_overrides_the_codes_own_and_a_misspelt_code_fails() -> None:
    found = documented_errors("200 with it; 404 INVALID_SESSION_ERROR, or BANNED_ERROR.")

    assert found == {(404, ErrorCode.INVALID_SESSION_ERROR), (403, ErrorCode.BANNED_ERROR)}
    with pytest.raises(KeyError):
        documented_errors("400 NO_SUCH_THING_ERROR")
