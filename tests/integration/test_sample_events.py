"""The sample events in events/ (for `sam local invoke`) stay valid for the handlers they target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools.local.inprocess import LambdaContextStub
from tests.integration.conftest import Api, Stack

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _invoke(api: Api, name: str, **header_overrides: str) -> tuple[int, Any]:
    event = json.loads((EVENTS / f"{name}.json").read_text())
    event["headers"].update(header_overrides)
    match = api.router.match(event["requestContext"]["http"]["method"], event["rawPath"])
    assert match is not None
    assert match.route_key == event["routeKey"], "the sample's routeKey must be the template's"
    result = api.handler(match.function)(event, LambdaContextStub(match.function))
    return result["statusCode"], json.loads(result["body"])


@pytest.mark.usefixtures("stack")
def test_sample_events_drive_register_login_and_me_in_sequence(api: Api) -> None:
    status, registered = _invoke(api, "register")
    assert status == 201, registered
    status, logged_in = _invoke(api, "login")
    assert status == 201, logged_in
    status, me = _invoke(api, "users_me", authorization=logged_in["token"])
    assert (status, me["username"]) == (200, "sample_user")


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("root", 200, None),
        ("not_found", 404, "INVALID_ENDPOINT_ERROR"),
        ("users_me", 401, "INVALID_SESSION_ERROR"),
    ],
)
def test_standalone_sample_events_answer_as_documented(
    api: Api, stack: Stack, name: str, status: int, code: str | None
) -> None:
    got_status, body = _invoke(api, name)
    assert got_status == status
    assert body.get("code") == code
