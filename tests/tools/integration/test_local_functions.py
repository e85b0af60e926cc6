"""Warm worker processes, like Lambda containers: reuse, isolation, crash and timeout recovery."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools.local.functions import FunctionPool, worker_environment
from nimbus_tools.local.worker import WorkerConfig
from nimbus_tools.template import FunctionSpec

pytestmark = pytest.mark.waits  # function workers spawned, crashed and timed out

CODE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "local_api" / "code"


def _config(
    tmp_path: Path, handler: str, timeout: int = 5, *, test_password_hashing: bool = False
) -> WorkerConfig:
    spec = FunctionSpec(
        logical_id="EchoFunction",
        handler=handler,
        code_uri=str(CODE_DIR),
        environment={"GREETING": "hi"},
        routes=(),
        memory_size=256,
        timeout=timeout,
    )
    return WorkerConfig(
        function_name=spec.logical_id,
        handler=spec.handler,
        code_dir=str(CODE_DIR),
        environment=worker_environment(spec, "http://127.0.0.1:9", base={"PATH": os.environ["PATH"]}),
        log_path=str(tmp_path / "EchoFunction.log"),
        memory_size=spec.memory_size,
        timeout=spec.timeout,
        test_password_hashing=test_password_hashing,
    )


def _event(path: str, **extra: Any) -> dict[str, Any]:
    return {"rawPath": path, "routeKey": f"POST {path}", "pathParameters": {}, **extra}


@pytest.fixture
def echo_pool(tmp_path: Path) -> Iterator[FunctionPool]:
    pool = FunctionPool(_config(tmp_path, "fixture_local_api.handler.echo"), size=2)
    yield pool
    pool.close()


@pytest.fixture
def fail_pool(tmp_path: Path) -> Iterator[FunctionPool]:
    pool = FunctionPool(_config(tmp_path, "fixture_local_api.handler.fail", timeout=1), size=1)
    yield pool
    pool.close()


def _body(pool: FunctionPool, event: dict[str, Any]) -> dict[str, Any]:
    invocation = pool.invoke(event, "req-1")
    assert invocation.ok, invocation.error
    assert invocation.result_json is not None
    body: dict[str, Any] = json.loads(json.loads(invocation.result_json)["body"])
    return body


def test_a_warm_worker_is_reused_and_keeps_its_module_state(echo_pool: FunctionPool) -> None:
    first = _body(echo_pool, _event("/echo/me"))
    second = _body(echo_pool, _event("/echo/me"))
    assert first["pid"] == second["pid"] != os.getpid()
    assert (first["invocations"], second["invocations"]) == (1, 2)


def test_the_worker_sees_only_the_function_environment_and_a_lambda_context(
    echo_pool: FunctionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NIMBUS_PARENT_ONLY", "leak")
    body = _body(echo_pool, _event("/echo/me"))
    assert "NIMBUS_PARENT_ONLY" not in body["environ_keys"]
    assert body["env"]["GREETING"] == "hi"
    assert body["env"]["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert body["env"]["AWS_LAMBDA_FUNCTION_NAME"] == "EchoFunction"
    assert body["env"]["POWERTOOLS_DEV"] is None
    context = body["context"]
    assert context["function_name"] == "EchoFunction"
    assert context["memory_limit_in_mb"] == 256
    assert context["aws_request_id"] == "req-1"
    assert 0 < context["remaining_ms"] <= 5000


@pytest.mark.parametrize(
    ("test_password_hashing", "parameters"), [(False, "m=19456,t=2,p=1"), (True, "m=8,t=1,p=1")]
)
def test_workers_hash_with_the_production_argon2_profile_unless_a_test_suite_asks_for_the_cheap_one(
    tmp_path: Path, test_password_hashing: bool, parameters: str
) -> None:
    handler = "fixture_local_api.handler.password_hash"
    pool = FunctionPool(_config(tmp_path, handler, test_password_hashing=test_password_hashing), size=1)
    try:
        stored = _body(pool, _event("/hash"))["hash"]
    finally:
        pool.close()
    assert stored.startswith(f"$argon2id$v=19${parameters}$")


def test_an_exception_fails_the_invocation_but_keeps_the_worker(
    fail_pool: FunctionPool, tmp_path: Path
) -> None:
    failed = fail_pool.invoke(_event("/fail/raise", pathParameters={"how": "raise"}), "r1")
    assert not failed.ok
    assert failed.error == "RuntimeError: boom"
    assert fail_pool.invoke(_event("/fail/bare", pathParameters={"how": "bare"}), "r2").ok
    log = (tmp_path / "EchoFunction.log").read_text()
    assert "RuntimeError: boom" in log
    assert "Traceback" in log


def test_a_crashed_worker_is_replaced(fail_pool: FunctionPool) -> None:
    crashed = fail_pool.invoke(_event("/fail/exit", pathParameters={"how": "exit"}), "r1")
    assert not crashed.ok
    assert "exit code 3" in (crashed.error or "")
    assert fail_pool.invoke(_event("/fail/bare", pathParameters={"how": "bare"}), "r2").ok


def test_a_worker_past_its_timeout_is_stopped_and_replaced(fail_pool: FunctionPool) -> None:
    timed_out = fail_pool.invoke(_event("/fail/timeout", pathParameters={"how": "timeout"}), "r1")
    assert not timed_out.ok
    assert "timed out" in (timed_out.error or "")
    assert fail_pool.invoke(_event("/fail/bare", pathParameters={"how": "bare"}), "r2").ok


def test_a_handler_that_cannot_be_imported_fails_every_invocation_cleanly(tmp_path: Path) -> None:
    pool = FunctionPool(_config(tmp_path, "fixture_local_api.missing_module.handler"), size=1)
    try:
        failed = pool.invoke(_event("/"), "r1")
        assert not failed.ok
        assert "init failed" in (failed.error or "")
        assert "ModuleNotFoundError" in (tmp_path / "EchoFunction.log").read_text()
    finally:
        pool.close()
