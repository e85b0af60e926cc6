"""Inside a function's worker process: a warm, Lambda-container-like runtime in a ``spawn``ed
interpreter (module state per worker, as per container). It imports the handler once (init), then
serves invocations from its pipe one at a time: parent -> worker ``("invoke", request_id,
event_json, deadline_epoch_ms)``; worker -> parent ``("ready",)`` or ``("init_error", text)`` once,
then ``("ok", result_json)`` or ``("error", text)`` per invocation."""

from __future__ import annotations

import decimal
import importlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs to start; picklable for the spawn context."""

    function_name: str
    handler: str
    code_dir: str
    environment: dict[str, str]
    log_path: str
    memory_size: int
    timeout: int
    # A test suite's local API hashes passwords with argon2id's smallest cost (see
    # nimbus_core.sessions.passwords.TEST_PROFILE); `make serve` with the production profile.
    test_password_hashing: bool = False


@dataclass
class LambdaContext:
    """The attributes of the Lambda context object that handlers and Powertools read (in-process
    callers give the function's name alone)."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = "in-process"
    deadline_ms: int | None = None  # None: plenty of time left
    log_stream_name: str = "local"
    region: str = "us-east-1"
    account_id: str = "123456789012"
    function_version: str = "$LATEST"

    @property
    def invoked_function_arn(self) -> str:
        """The function's ARN, shaped like Lambda's."""
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        """The function's log group, named as Lambda names it."""
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout, like the real context."""
        return 10_000 if self.deadline_ms is None else max(0, self.deadline_ms - int(time.time() * 1000))


def _to_json(result: Any) -> str:
    # The Python Lambda runtime serialises Decimals (what boto3 returns for numbers) as floats.
    def default(value: Any) -> Any:
        if isinstance(value, decimal.Decimal):
            return float(value)
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.dumps(result, default=default)


def _redirect_output(log_path: str) -> None:
    # dup2 rather than reassigning sys.stdout, so output from C code and subprocesses lands too.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115


def _load_handler(config: WorkerConfig) -> Callable[[Any, Any], Any]:
    module_name, _, function_name = config.handler.rpartition(".")
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name)
    if not callable(handler):
        raise TypeError(f"{config.handler} is not callable")
    return handler  # type: ignore[no-any-return]


def worker_main(conn: Connection, config: WorkerConfig) -> None:
    """Entry point of a worker process (the target of ``multiprocessing`` spawn)."""
    # Ctrl-C in a terminal goes to the whole process group; only the parent decides when to stop.
    # The parent blocked SIGINT around start(); ignore it before unblocking so none is delivered.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _redirect_output(config.log_path)

    # A Lambda container sees only its own configuration, and runs from its code directory.
    os.environ.clear()
    os.environ.update(config.environment)
    os.chdir(config.code_dir)
    sys.path.insert(0, config.code_dir)

    started = time.monotonic()
    try:
        handler = _load_handler(config)
        if config.test_password_hashing:
            from nimbus_core.sessions import passwords

            passwords.use_profile(passwords.TEST_PROFILE)
    except BaseException:
        text = traceback.format_exc()
        print(f"INIT_ERROR {config.function_name}: {text}", file=sys.stderr, flush=True)
        conn.send(("init_error", text))
        return
    print(f"INIT_REPORT Init Duration: {(time.monotonic() - started) * 1000:.2f} ms", flush=True)
    conn.send(("ready",))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or closed the pipe: stop, like a reclaimed container
        if not isinstance(message, tuple) or message[0] != "invoke":
            return
        _, request_id, event_json, deadline_ms = message
        conn.send(_invoke(handler, config, request_id, event_json, deadline_ms))


def _invoke(
    handler: Callable[[Any, Any], Any],
    config: WorkerConfig,
    request_id: str,
    event_json: str,
    deadline_ms: int,
) -> tuple[str, str]:
    context = LambdaContext(
        config.function_name, config.memory_size, request_id, deadline_ms, f"local/[$LATEST]{os.getpid()}"
    )
    print(f"START RequestId: {request_id} Version: $LATEST", flush=True)
    started = time.monotonic()
    try:
        outcome = ("ok", _to_json(handler(json.loads(event_json), context)))
    except Exception as error:
        traceback.print_exc()
        outcome = ("error", f"{type(error).__name__}: {error}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    duration = (time.monotonic() - started) * 1000
    print(f"END RequestId: {request_id}", flush=True)
    print(
        f"REPORT RequestId: {request_id}\tDuration: {duration:.2f} ms\tMemory Size: {config.memory_size} MB",
        flush=True,
    )
    return outcome
