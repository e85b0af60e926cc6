"""The breaking-change check of docs/openapi.json (``make openapi-breaks``): the pinned Redocly CLI run
on small real documents in real git repositories, a main line and a branch off it, as a checkout has."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools import openapi_breaks

pytestmark = pytest.mark.waits  # Redocly's CLI in node, a process per test

ACCEPTANCE = """
[[break]]
rule = "{rule}"
pointer = "{pointer}"
contract = "{contract}"
reason = "{reason}"
"""
EMAIL = "#/components/schemas/UserView/properties/email"
# Commits by a fixed author, unsigned, whatever the machine's git configuration says.
GIT_SETTINGS = (
    *("-c", "user.name=Nimbus tests"),
    *("-c", "user.email=tests@example.com"),
    *("-c", "commit.gpgsign=false"),
)
REASON = "The contract dropped it; the wrapper never read it."
RENAME_REQUIRED = "#/paths/~1users~1me~1username/put/requestBody/content/application~1json/schema/required"


def _user_view() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "username": {"type": "string"},
            "email": {"type": "string", "format": "email"},
            "staff": {"type": "boolean"},
        },
        "required": ["id", "username", "email", "staff"],
    }


def _document() -> dict[str, Any]:
    reply = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/UserView"}}}}
    error = {"description": "error", "content": {"application/json": {"schema": {"type": "object"}}}}
    rename_body = {
        "type": "object",
        "properties": {"username": {"type": "string", "minLength": 1, "maxLength": 32}},
        "required": ["username"],
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Nimbus", "version": "0.1.0"},
        "paths": {
            "/users/me": {
                "get": {
                    "operationId": "Accounts.get_me",
                    "responses": {"200": {"description": "the user", **reply}, "401": error},
                }
            },
            "/users/me/username": {
                "put": {
                    "operationId": "Accounts.change_username",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": rename_body}},
                    },
                    "responses": {"200": {"description": "the user", **reply}, "409": error},
                }
            },
        },
        "components": {"schemas": {"UserView": _user_view()}},
    }


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *GIT_SETTINGS, *args], check=True, capture_output=True)


def _change(repo: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = repo / "docs" / "openapi.json"
    document = json.loads(path.read_text("utf-8"))
    edit(document)
    path.write_text(json.dumps(document, indent=2) + "\n", "utf-8")


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def _accept(
    repo: Path, rule: str, pointer: str, contract: str = "CONTRACT section 8", reason: str = ""
) -> None:
    reason = reason or "The contract dropped it; the wrapper never read it."
    with (repo / "docs" / "openapi-breaks.toml").open("a", encoding="utf-8") as file:
        file.write(ACCEPTANCE.format(rule=rule, pointer=pointer, contract=contract, reason=reason))


def _drop_email(document: dict[str, Any]) -> None:
    view = document["components"]["schemas"]["UserView"]
    del view["properties"]["email"]
    view["required"].remove("email")


def _restore_email(document: dict[str, Any]) -> None:
    document["components"]["schemas"]["UserView"] = _user_view()


def _require_a_code(document: dict[str, Any]) -> None:
    body = document["paths"]["/users/me/username"]["put"]["requestBody"]["content"]["application/json"]
    body["schema"]["properties"]["code"] = {"type": "string", "pattern": "^[0-9]{6}$"}
    body["schema"]["required"].append("code")


def _add_optional_and_endpoint(document: dict[str, Any]) -> None:
    document["components"]["schemas"]["UserView"]["properties"]["avatar"] = {"type": "string"}
    status = {"description": "the service", "content": {"application/json": {"schema": {"type": "object"}}}}
    document["paths"]["/status"] = {"get": {"operationId": "Admin.status", "responses": {"200": status}}}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout on main whose first commit holds the document, the contract's headings and no acceptance."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "openapi.json").write_text(json.dumps(_document(), indent=2) + "\n", "utf-8")
    (tmp_path / "docs" / "contract.md").write_text(
        "# The Nimbus API contract\n\n## 7. Successes\n\n## 8. Endpoint details\n", "utf-8"
    )
    (tmp_path / "docs" / "openapi-breaks.toml").write_text("# accepted breaks\n", "utf-8")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "the API as landed")
    return tmp_path


def _branch(repo: Path) -> None:
    _git(repo, "switch", "-q", "-c", "feature")


def _check(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = openapi_breaks.main(["--repo", str(repo)])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_removing_a_response_property_fails_and_names_the_break(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _branch(repo)
    _change(repo, _drop_email)
    _commit(repo, "UserView without email")

    status, output = _check(repo, capsys)

    assert status == 1
    assert f"BREAKS CLIENTS: property-removed at {EMAIL} (GET /users/me)" in output
    assert "FAILED" in output


def test_a_new_required_request_field_fails(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _branch(repo)
    _change(repo, _require_a_code)
    _commit(repo, "renaming needs a code")

    status, output = _check(repo, capsys)

    assert status == 1
    assert f"BREAKS CLIENTS: required-properties-added at {RENAME_REQUIRED}" in output


def test_a_new_optional_property_and_a_new_endpoint_pass(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _branch(repo)
    _change(repo, _add_optional_and_endpoint)
    _commit(repo, "an avatar and GET /status")

    status, output = _check(repo, capsys)

    assert status == 0, output
    assert "0 major, 2 minor" in output
    assert "passed" in output


def test_a_break_accepted_by_an_entry_added_with_it_passes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _branch(repo)
    _change(repo, _drop_email)
    _accept(repo, "property-removed", EMAIL)
    _accept(repo, "required-properties-removed", "#/components/schemas/UserView/required")
    _commit(repo, "UserView without email, as the contract now says")

    status, output = _check(repo, capsys)

    assert status == 0, output
    assert f"accepted: property-removed at {EMAIL}" in output


def test_an_entry_that_landed_before_does_not_accept_the_same_break_again(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(repo, _drop_email)
    _accept(repo, "property-removed", EMAIL)
    _accept(repo, "required-properties-removed", "#/components/schemas/UserView/required")
    _commit(repo, "UserView without email, accepted")
    _change(repo, _restore_email)
    _commit(repo, "email is back")
    _branch(repo)
    _change(repo, _drop_email)
    _commit(repo, "UserView without email again")

    status, output = _check(repo, capsys)

    assert status == 1
    assert f"BREAKS CLIENTS: property-removed at {EMAIL}" in output


def test_an_entry_that_matches_no_break_fails(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _branch(repo)
    _change(repo, _add_optional_and_endpoint)
    _accept(repo, "property-removed", EMAIL)
    _commit(repo, "an avatar, and an acceptance in advance")

    status, output = _check(repo, capsys)

    assert status == 1
    assert f"accepts a break this change does not make: property-removed at {EMAIL}" in output


@pytest.mark.parametrize(
    ("contract", "reason"),
    [
        ("CONTRACT section 8", " "),
        ("CONTRACT section 9", "a section this repository's contract.md does not have"),
        ("see above", "no"),
    ],
    ids=["no-reason", "unknown-section", "no-section"],
)
def test_an_entry_without_a_reason_or_a_section_of_the_contract_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str], contract: str, reason: str
) -> None:
    _branch(repo)
    _change(repo, _drop_email)
    _accept(repo, "property-removed", EMAIL, contract=contract, reason=reason)
    _commit(repo, "UserView without email")

    status, output = _check(repo, capsys)

    assert status == 2
    assert "docs/openapi-breaks.toml: break 1" in output


def test_a_branch_is_checked_for_all_its_changes_against_where_it_left_main(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _branch(repo)
    _change(repo, _drop_email)
    _commit(repo, "UserView without email")
    (repo / "notes.md").write_text("a later commit that leaves the document alone\n", "utf-8")
    _commit(repo, "notes")
    _git(repo, "switch", "-q", "main")
    _change(repo, _add_optional_and_endpoint)
    _commit(repo, "main gains GET /status after the branch left")
    _git(repo, "switch", "-q", "feature")

    status, output = _check(repo, capsys)

    assert status == 1
    assert "the merge base with main" in output
    assert f"BREAKS CLIENTS: property-removed at {EMAIL}" in output
    assert "/status" not in output  # main's later endpoint is not a removal by the branch


def test_on_main_the_newest_change_to_the_document_is_checked(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(repo, _require_a_code)
    _commit(repo, "renaming needs a code")
    (repo / "notes.md").write_text("a later commit that leaves the document alone\n", "utf-8")
    _commit(repo, "notes")

    status, output = _check(repo, capsys)

    assert status == 1
    assert "before the newest change to it" in output
    assert f"BREAKS CLIENTS: required-properties-added at {RENAME_REQUIRED}" in output


def test_on_main_an_uncommitted_change_is_checked_against_head(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(repo, _add_optional_and_endpoint)
    _commit(repo, "an avatar and GET /status")
    _change(repo, lambda document: document["paths"].pop("/status"))

    status, output = _check(repo, capsys)

    assert status == 1
    assert "before the uncommitted change" in output
    assert "BREAKS CLIENTS: path-removed at #/paths/~1status" in output


def test_the_first_document_passes_with_nothing_landed_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "openapi.json").write_text(json.dumps(_document()), "utf-8")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "the first document")

    status, output = _check(tmp_path, capsys)

    assert status == 0
    assert "no landed document to compare against" in output


def test_a_shallow_clone_without_the_landed_document_says_so_and_passes(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(repo, _drop_email)
    _commit(repo, "no email")
    shallow = tmp_path_factory.mktemp("shallow") / "checkout"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)

    status, output = _check(shallow, capsys)

    assert status == 0
    assert "a shallow clone lacks the commit before" in output
