"""Warm worker pools: each function runs in up to N isolated processes, like Lambda containers,
spawned on demand (the first requests pay the cold start), reused while healthy, replaced after a
crash or a timeout; a request waits for a free worker when all N are busy."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any, Protocol

from nimbus_tools.local.worker import WorkerConfig, worker_main
from nimbus_tools.template import LOCAL_REGION, FunctionSpec

# Lambda's own limit on the init phase is 10 s; a loaded laptop importing boto3 and Powertools
# can be slower, so locally allow more before calling it a failure.
INIT_TIMEOUT_SECONDS = 30.0

# Variables a process needs to run at all; everything else comes from the function's configuration,
# so the parent's AWS credentials or profile can never leak into a function talking to the emulator.
_PASS_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "SYSTEMROOT")


@dataclass(frozen=True)
class Invocation:
    """The outcome of one invocation: the JSON result, or an error description."""

    ok: bool
    result_json: str | None = None
    error: str | None = None


class Invoker(Protocol):
    """Runs a function (by logical id) on an event: :class:`FunctionPools`, or a test's stand-in."""

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        """Invoke ``function`` with ``event``."""
        ...


def worker_environment(
    spec: FunctionSpec, aws_endpoint_url: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a function's workers: its template environment plus local AWS settings."""
    base = os.environ if base is None else base
    environment = {key: base[key] for key in _PASS_THROUGH if key in base}
    # No X-Ray daemon runs locally; a function's own setting still wins.
    environment |= {"POWERTOOLS_TRACE_DISABLED": "true", **spec.environment}
    environment |= {
        "AWS_ENDPOINT_URL": aws_endpoint_url,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_REGION": LOCAL_REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_LAMBDA_FUNCTION_NAME": spec.logical_id,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_size),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.logical_id}",
    }
    for name in ("POWERTOOLS_DEV", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        environment.pop(name, None)
    return environment


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, process: SpawnProcess, conn: Connection) -> None:
        self.process, self.conn = process, conn

    def kill(self) -> None:
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)


class FunctionPool:
    """Up to ``size`` warm workers of one function."""

    def __init__(self, config: WorkerConfig, size: int) -> None:
        self.config, self.size = config, size
        self._context = multiprocessing.get_context("spawn")  # one context, shared by every pool
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._starting = 0
        self._closed = False

    def invoke(self, event: Mapping[str, Any], request_id: str) -> Invocation:
        """Run the handler on ``event`` in a free worker and wait for its result (bounded by Timeout)."""
        try:
            worker = self._checkout()
        except _InitFailedError as failure:
            return Invocation(ok=False, error=str(failure))
        healthy = False
        try:
            invocation, healthy = self._run(worker, event, request_id)
            return invocation
        finally:
            self._checkin(worker, healthy)

    def close(self) -> None:
        """Stop every worker; busy ones are stopped when their invocation returns or now, if stuck."""
        with self._cond:
            self._closed = True
            idle = list(self._idle)
            busy = [w for w in self._all if w not in idle]
            self._idle.clear()
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
        # A busy worker's pipe belongs to the thread waiting on it: killing the process makes that
        # thread see EOF and clean up, where closing the pipe under it could fail in odd ways.
        for worker in busy:
            if worker.process.is_alive():
                worker.process.kill()

    def _checkout(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise _InitFailedError("the local API is shutting down")
                if self._idle:
                    return self._idle.pop()
                if len(self._all) + self._starting < self.size:
                    self._starting += 1
                    break
                self._cond.wait()
        try:
            worker = self._spawn()
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()
        with self._cond:
            self._all.add(worker)
        return worker

    def _checkin(self, worker: _Worker, healthy: bool) -> None:
        with self._cond:
            if healthy and not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._all.discard(worker)
            self._cond.notify()
        worker.kill()

    def _spawn(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe()
        process = self._context.Process(
            target=worker_main, args=(child_conn, self.config), name=f"{self.config.function_name}-worker"
        )
        # Block Ctrl-C while forking: the worker inherits the mask and ignores SIGINT before
        # unblocking it, so a Ctrl-C during its start cannot print a traceback to the console.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        child_conn.close()
        worker = _Worker(process, parent_conn)
        try:
            ready = parent_conn.poll(INIT_TIMEOUT_SECONDS)
            message = parent_conn.recv() if ready else ("init_error", "init timed out")
        except (EOFError, OSError):
            message = ("init_error", f"worker exited during init (exit code {process.exitcode})")
        if message[0] != "ready":
            worker.kill()
            raise _InitFailedError(f"init failed: {str(message[1]).strip().splitlines()[-1]}")
        return worker

    def _run(self, worker: _Worker, event: Mapping[str, Any], request_id: str) -> tuple[Invocation, bool]:
        timeout = self.config.timeout
        deadline_ms = int(time.time() * 1000) + timeout * 1000
        try:
            worker.conn.send(("invoke", request_id, json.dumps(event), deadline_ms))
            if not worker.conn.poll(timeout):
                self._log(f"{_now()} {request_id} Task timed out after {timeout:.2f} seconds")
                return Invocation(ok=False, error=f"Task timed out after {timeout} seconds"), False
            status, payload = worker.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            worker.process.join(timeout=1)
            code = worker.process.exitcode
            self._log(f"{_now()} {request_id} Runtime exited (exit code {code})")
            return Invocation(ok=False, error=f"Runtime exited (exit code {code})"), False
        if status == "ok":
            return Invocation(ok=True, result_json=payload), True
        return Invocation(ok=False, error=str(payload)), True

    def _log(self, line: str) -> None:
        # Platform messages (timeouts, crashes) go to the function's log, where Lambda puts them.
        with open(self.config.log_path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


class _InitFailedError(Exception):
    """A worker could not start (import error, crash or timeout during init)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


class FunctionPools:
    """The pools of every function of the template, by logical id."""

    def __init__(
        self,
        specs: list[FunctionSpec],
        *,
        template_dir: Path,
        aws_endpoint_url: str,
        log_dir: Path,
        workers: int = 4,
        test_password_hashing: bool = False,
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.pools: dict[str, FunctionPool] = {}
        for spec in specs:
            config = WorkerConfig(
                function_name=spec.logical_id,
                handler=spec.handler,
                code_dir=str((template_dir / spec.code_uri).resolve()),
                environment=worker_environment(spec, aws_endpoint_url),
                log_path=str(log_dir / f"{spec.logical_id}.log"),
                memory_size=spec.memory_size,
                timeout=spec.timeout,
                test_password_hashing=test_password_hashing,
            )
            self.pools[spec.logical_id] = FunctionPool(config, workers)

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        """Invoke ``function`` (a logical id) with ``event``."""
        return self.pools[function].invoke(event, request_id)

    def close(self) -> None:
        """Stop every worker of every function."""
        for pool in self.pools.values():
            pool.close()
