"""`nimbus-local serve` as a developer runs it: a subprocess on free ports, over real HTTP.

Uses the fixture stack in tests/fixtures/local_api (not the real handlers), so these tests prove
the local runtime itself: routing, events, warm workers, logging, faults, mail and shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools.local.control import clear_faults, clear_mail, inject_fault, list_faults, read_mail
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api

pytestmark = [pytest.mark.e2e, pytest.mark.long]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "local_api" / "template.yaml"


def http(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    """One request; returns (status, headers, JSON body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            status, raw, response_headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, raw, response_headers = error.code, error.read(), dict(error.headers)
    return status, response_headers, json.loads(raw) if raw else None


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiProcess]:
    state_dir = tmp_path_factory.mktemp("local-api")
    # A developer's AWS_PROFILE (here one that does not exist) must not matter to the local API.
    env = {"AWS_PROFILE": "nimbus-no-such-profile"}
    # A test suite's shorter configuration cache (serve --config-cache-seconds), given to every function.
    with start_local_api(
        state_dir=state_dir, template=FIXTURE, workers=4, env=env, config_cache_seconds=3
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def _clean_emulator(api: LocalApiProcess) -> Iterator[None]:
    clear_faults(api.aws_endpoint_url)
    clear_mail(api.aws_endpoint_url)
    yield
    clear_faults(api.aws_endpoint_url)


def _lines_for(api: LocalApiProcess, path: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in api.request_lines() if m["path"] == path]


def test_serve_json_describes_the_running_stack(api: LocalApiProcess) -> None:
    state = api.state
    assert state["api_url"].startswith("http://127.0.0.1:")
    assert state["aws_endpoint_url"].startswith("http://127.0.0.1:")
    assert (state["region"], state["stage"]) == ("us-east-1", "fixture")
    assert state["tables"]["ItemsTable"] == "ItemsTable"
    assert state["parameters"]["KillSwitchGlobal"] == "/fixture/fixture/killswitches/GLOBAL"
    assert state["killswitch_path"] == "/fixture/fixture/killswitches"  # what the functions read
    assert state["pid"] == api.process.pid
    assert any(
        line.startswith(f"Nimbus local API on {state['api_url']} (AWS emulator on ") for line in api.stdout
    )


def test_concurrent_requests_run_in_parallel_workers_with_one_log_line_each(api: LocalApiProcess) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: http("GET", f"{api.api_url}/slow?ms=400"), range(8)))
    assert [status for status, _, _ in results] == [200] * 8
    pids = {body["pid"] for _, _, body in results}
    assert 2 <= len(pids) <= 4  # overlapping requests got separate workers, never more than --workers
    assert api.wait_for(lambda: len(_lines_for(api, "/slow")) == 8, timeout=10)
    lines = _lines_for(api, "/slow")
    assert all(
        (line["method"], line["status"], line["function"]) == ("GET", "200", "EchoFunction") for line in lines
    )


def test_a_warm_worker_serves_the_next_request(api: LocalApiProcess) -> None:
    _, _, first = http("GET", f"{api.api_url}/echo/me")
    _, _, second = http("GET", f"{api.api_url}/echo/me")
    if first["pid"] == second["pid"]:
        assert second["invocations"] > first["invocations"]
    assert {first["pid"], second["pid"]} <= _echo_worker_pids(api)


def test_a_worker_holds_its_function_not_the_local_api_around_it(api: LocalApiProcess) -> None:
    """A worker is spawned, and a spawned process imports its parent's main module again (here
    nimbus_tools.local.main): that must not bring the local API's servers and emulator into every
    function's cold start, as Lambda runs a function without them."""
    _, _, body = http("GET", f"{api.api_url}/echo/me")
    worker_runtime = {"nimbus_tools", "nimbus_tools.local", "nimbus_tools.local.worker"}
    assert sorted(set(body["local_api_modules"]) - worker_runtime) == []


def _echo_worker_pids(api: LocalApiProcess) -> set[int]:
    # Every EchoFunction worker answers some request when asked enough times in parallel.
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: http("GET", f"{api.api_url}/slow?ms=200"), range(4)))
    return {body["pid"] for _, _, body in results} | {
        body["pid"] for _, _, body in (http("GET", f"{api.api_url}/echo/me") for _ in range(2))
    }


def test_event_source_ip_is_the_socket_peer_even_with_x_forwarded_for(api: LocalApiProcess) -> None:
    status, headers, body = http(
        "GET",
        f"{api.api_url}/echo/al%20ice?x=1&x=2",
        headers={"X-Forwarded-For": "6.6.6.6", "Cookie": "a=1; b=2"},
    )
    assert status == 200
    event = body["event"]
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"
    assert event["headers"]["x-forwarded-for"] == "6.6.6.6, 127.0.0.1"
    assert event["routeKey"] == "GET /echo/{name}"
    assert event["pathParameters"] == {"name": "al ice"}
    assert event["queryStringParameters"] == {"x": "1,2"}
    assert event["cookies"] == ["a=1", "b=2"]
    assert (
        headers["apigw-requestid"]
        == event["requestContext"]["requestId"]
        == body["context"]["aws_request_id"]
    )


def test_functions_get_the_template_environment_pointed_at_the_emulator(api: LocalApiProcess) -> None:
    _, _, body = http("GET", f"{api.api_url}/echo/me")
    env = body["env"]
    assert env["GREETING"] == "hello from fixture"
    assert env["ITEMS_TABLE"] == "ItemsTable"
    assert env["AWS_ENDPOINT_URL"] == api.aws_endpoint_url
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == "EchoFunction"
    assert env["VERIFICATION_URL"] == f"{api.console_url}/verify?token={{token}}"
    assert env["POWERTOOLS_DEV"] is None


def test_serve_gives_every_function_the_configuration_cache_age_asked_for(api: LocalApiProcess) -> None:
    _, _, body = http("GET", f"{api.api_url}/echo/me")
    assert body["env"]["CONFIG_CACHE_SECONDS"] == "3"


def test_serve_leaves_the_configuration_cache_age_to_the_functions_unless_asked() -> None:
    from nimbus_tools.local.main import build_parser

    assert build_parser().parse_args(["serve"]).config_cache_seconds is None
    assert build_parser().parse_args(["serve", "--config-cache-seconds", "0"]).config_cache_seconds == 0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--config-cache-seconds", "11"])


def test_literal_routes_trailing_slashes_and_default_route(api: LocalApiProcess) -> None:
    assert http("GET", f"{api.api_url}/echo/me/")[2]["event"]["routeKey"] == "GET /echo/me"
    assert http("PUT", f"{api.api_url}/files/a/b.txt")[2]["event"]["pathParameters"] == {"proxy": "a/b.txt"}
    status, _, body = http("DELETE", f"{api.api_url}/echo/me")
    assert (status, body["routeKey"]) == (404, "$default")


def test_response_cookies_become_set_cookie_headers_and_cors_is_applied(api: LocalApiProcess) -> None:
    origin = {"Origin": "https://app.fixture.example"}
    request = urllib.request.Request(f"{api.api_url}/echo/me", headers=origin)  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.headers.get_all("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]
        assert response.headers["Access-Control-Allow-Origin"] == "https://app.fixture.example"
    preflight = {"Origin": "https://app.fixture.example", "Access-Control-Request-Method": "POST"}
    status, headers, _ = http("OPTIONS", f"{api.api_url}/items", headers=preflight)
    assert status == 204
    assert headers["access-control-allow-methods"] == "GET,POST"


def test_injected_dynamodb_fault_reaches_the_function_as_an_aws_error(api: LocalApiProcess) -> None:
    inject_fault(api.aws_endpoint_url, "dynamodb", "PutItem", status=400, code="ValidationException", times=1)
    status, _, body = http("POST", f"{api.api_url}/items", {"pk": "f1"})
    assert (status, body) == (503, {"error": "ValidationException"})
    assert http("POST", f"{api.api_url}/items", {"pk": "f1"})[0] == 201
    assert list_faults(api.aws_endpoint_url) == []


def test_a_retryable_fault_used_once_is_absorbed_by_the_sdk_retry(api: LocalApiProcess) -> None:
    inject_fault(api.aws_endpoint_url, "dynamodb", "PutItem", status=500, code="InternalServerError", times=1)
    assert http("POST", f"{api.api_url}/items", {"pk": "f2"})[0] == 201
    assert list_faults(api.aws_endpoint_url) == []


def test_ssm_fault_matches_every_ssm_operation_until_cleared(api: LocalApiProcess) -> None:
    inject_fault(api.aws_endpoint_url, "ssm", "*", status=400, code="AccessDeniedException")
    assert http("GET", f"{api.api_url}/settings")[2] == {"error": "AccessDeniedException"}
    clear_faults(api.aws_endpoint_url)
    assert http("GET", f"{api.api_url}/settings")[2] == {"settings": {"mode": "test"}}


def test_mail_sent_through_ses_is_captured_with_its_text_body(api: LocalApiProcess) -> None:
    status, _, body = http("POST", f"{api.api_url}/mail", {"to": "bob@example.com"})
    assert status == 202
    mail = read_mail(api.aws_endpoint_url)
    assert len(mail) == 1
    assert mail[0]["id"] == body["messageId"]
    assert mail[0]["from"] == "sender@fixture.example"
    assert mail[0]["to"] == ["bob@example.com"]
    assert mail[0]["subject"] == "Verify your email"
    assert mail[0]["text"] == f"Open {api.console_url}/verify?token=tok123"


def test_mail_refused_by_an_injected_ses_fault_is_not_captured(api: LocalApiProcess) -> None:
    inject_fault(api.aws_endpoint_url, "ses", "SendEmail", status=400, code="MessageRejected", times=1)
    assert http("POST", f"{api.api_url}/mail", {"to": "bob@example.com"})[2] == {"error": "MessageRejected"}
    assert read_mail(api.aws_endpoint_url) == []


def test_function_failures_answer_502_and_are_logged(api: LocalApiProcess) -> None:
    for how in ("raise", "exit", "malformed", "timeout"):
        status, _, body = http("POST", f"{api.api_url}/fail/{how}")
        assert (status, body) == (502, {"message": "Internal Server Error"}), how
    assert http("POST", f"{api.api_url}/fail/bare")[2] == {"bare": True}  # a fresh worker took over
    assert http("POST", f"{api.api_url}/fail/string")[2] == "just a string"
    assert api.wait_for(
        lambda: len([ln for ln in api.request_lines() if ln["path"].startswith("/fail/")]) == 6, 10
    )
    console = "\n".join(api.stdout)
    assert "POST /fail/raise 502" in console
    assert "RuntimeError: boom" in console
    log = (api.state_dir / "logs" / "FailFunction.log").read_text()
    assert "Traceback" in log
    assert "failing with raise" in log
    assert "Task timed out" in log
    assert "failing with raise" not in console  # function output stays out of the console
    assert not any("Traceback" in line for line in api.stderr)


def test_ctrl_c_stops_server_workers_and_emulator_and_removes_serve_json(tmp_path: Path) -> None:
    api = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1)
    try:
        _, _, body = http("GET", f"{api.api_url}/echo/me")
        worker = body["pid"]
        state_file = tmp_path / "serve.json"
        assert state_file.exists()
    finally:
        code = api.stop(signal.SIGINT, timeout=20)
    assert code == 0
    assert not state_file.exists()
    assert "Stopping..." in api.stdout, api.stdout
    assert not any("Traceback" in line for line in api.stderr), api.stderr
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def test_a_second_server_on_the_same_state_dir_is_refused_naming_the_running_one(tmp_path: Path) -> None:
    first = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1)
    try:
        described = json.loads((tmp_path / "serve.json").read_text())
        second = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1, check=False)
        code = second.stop()  # already exited when refused; a server that started stops here

        assert code == 1, second.stdout
        refusal = "\n".join(second.stderr)
        assert f"pid {first.process.pid}" in refusal
        assert first.api_url in refusal
        assert not any(line.startswith("Nimbus local API on") for line in second.stdout)
        # The running server's serve.json is untouched, so the operator tool still finds it.
        assert json.loads((tmp_path / "serve.json").read_text()) == described
        assert http("GET", f"{first.api_url}/echo/me")[0] == 200
    finally:
        first.stop()

    third = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1)  # the first stopped
    third.stop()


def test_a_crashed_server_does_not_block_the_next(tmp_path: Path) -> None:
    crashed = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1)
    crashed.stop(signal.SIGKILL)  # no clean-up ran: serve.json and the lock file are left behind

    after = start_local_api(state_dir=tmp_path, template=FIXTURE, workers=1)
    try:
        assert json.loads((tmp_path / "serve.json").read_text())["pid"] == after.process.pid
    finally:
        after.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_startup_banner_names_the_account_console(api: LocalApiProcess) -> None:
    assert f"Account console: {api.console_url}/" in "\n".join(api.stdout)
