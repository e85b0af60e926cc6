"""Contract fuzzing: schemathesis, driven by docs/openapi.json, against the local API.

Every operation of the document gets generated requests (valid and invalid bodies, queries and
path parameters) with a real session of a fresh user, and every answer must be no server error and
must match the document: a status it lists, JSON, and a body of the declared schema (the success
model, or the Error schema). The document itself is generated from the registry
(tests/unit/test_openapi_document.py), so this holds the code to what it says of itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip, new_name
from tests.e2e.conftest import Client

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
SCHEMA = schemathesis.openapi.from_path(str(DOCUMENT))
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
EXAMPLES = 5  # per operation: 62 operations, about 310 requests in all


@pytest.fixture
def session_token(client: Client) -> str:
    """A fresh user's session for one operation's examples (an example may revoke it)."""
    registered = client.register(new_name("fuzz"), ip=new_ip())
    assert registered.status == 201, registered.body
    token: str = registered.body["token"]
    return token


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # nothing written to .hypothesis/: every run starts from the document
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_get_no_server_error_and_answers_the_document_allows(
    case: schemathesis.Case[Any], local_api: LocalApiProcess, session_token: str
) -> None:
    headers = {"Authorization": session_token}
    if case.headers and "Authorization" in case.headers:
        headers = {}  # the generated case brings its own (possibly malformed) token
    case.call_and_validate(base_url=local_api.api_url, headers=headers, checks=CHECKS)
