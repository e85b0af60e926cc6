"""Start ``nimbus-local serve`` in a subprocess for tests and scripts, ready once it printed its
"Nimbus local API on ..." line (no test sleeps); leaving ``with start_local_api(...) as api:``
sends SIGINT and waits for a clean exit."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from nimbus_tools.local.state import ServeState, read_state, state_path
from nimbus_tools.local.static import console_url

READY_PREFIX = "Nimbus local API on "
REQUEST_LINE = re.compile(
    r"^\d\d:\d\d:\d\d (?P<method>\S+) (?P<path>\S+) (?P<status>\d{3}) (?P<ms>\d+)ms (?P<function>\S+)"
)


class LocalApiProcess:
    """A running ``nimbus-local serve`` subprocess and its output."""

    def __init__(self, process: subprocess.Popen[str], state_dir: Path) -> None:
        self.process, self.state_dir = process, state_dir
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._pump, args=(stream, lines), daemon=True)
            for stream, lines in ((process.stdout, self.stdout), (process.stderr, self.stderr))
        ]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream: IO[str] | None, lines: list[str]) -> None:
        for line in stream or ():
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        # The pipe closed: the process is exiting. Wait for its exit code before telling the
        # waiters, or a predicate on the process (``ready``: "or exited") sees it still running
        # and nothing wakes them again until their timeout.
        # One that closed its output and runs on is left to the predicate.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until ``predicate()`` holds; re-checked whenever output arrives."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def ready(self) -> bool:
        """Whether the server printed its ready line (or exited)."""
        return any(line.startswith(READY_PREFIX) for line in self.stdout) or self.process.poll() is not None

    @functools.cached_property
    def state(self) -> ServeState:
        """The contents of serve.json (read once)."""
        state = read_state(state_path(self.state_dir))
        if state is None:
            raise RuntimeError(f"no serve.json in {self.state_dir}")
        return state

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.state["api_url"]

    @property
    def console_url(self) -> str:
        """``http://localhost:PORT/console``: the account console, where verification links point."""
        return console_url(int(self.api_url.rsplit(":", 1)[1]))

    @property
    def aws_endpoint_url(self) -> str:
        """The emulator URL (faults, mail, and AWS SDK calls)."""
        return self.state["aws_endpoint_url"]

    def request_lines(self) -> list[re.Match[str]]:
        """The parsed per-request log lines printed so far."""
        with self._changed:
            return [m for m in (REQUEST_LINE.match(line) for line in self.stdout) if m]

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20.0) -> int:
        """Send ``sig`` (Ctrl-C by default) and wait for the exit code; kills it if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        for reader in self._readers:
            reader.join(timeout=5)
        return int(self.process.returncode)

    def __enter__(self) -> LocalApiProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_api(
    *,
    state_dir: Path,
    template: Path | None = None,
    port: int = 0,
    moto_port: int = 0,
    params: Mapping[str, str] | None = None,
    workers: int | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    test_password_hashing: bool = False,
    config_cache_seconds: int | None = None,
) -> LocalApiProcess:
    """Start the local API (free ports by default) and wait (at most ``timeout`` s) until it serves
    requests; RuntimeError if it does not, unless ``check`` is False (then the caller looks at
    :meth:`LocalApiProcess.ready` and the process). ``test_password_hashing``: argon2id's test
    profile in every function, for a test suite that registers and signs in by the hundred.
    ``config_cache_seconds``: how long the functions keep SSM's kill switches and log level (None:
    their own default, as deployed)."""
    command = [sys.executable, "-m", "nimbus_tools.local.main", "serve", "--state-dir", str(state_dir)]
    command += ["--port", str(port), "--moto-port", str(moto_port)]
    command += ["--template", str(template)] if template is not None else []
    command += ["--workers", str(workers)] if workers is not None else []
    command += ["--test-password-hashing"] if test_password_hashing else []
    if config_cache_seconds is not None:
        command += ["--config-cache-seconds", str(config_cache_seconds)]
    for key, value in (params or {}).items():
        command += ["--param", f"{key}={value}"]
    environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    # The command is this interpreter and our own module; nothing comes from untrusted input.
    process = subprocess.Popen(  # noqa: S603
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    api = LocalApiProcess(process, state_dir)
    api.wait_for(api.ready, timeout)
    if check and (not api.ready() or api.process.poll() is not None):
        api.stop(signal.SIGKILL, timeout=5)
        output = "\n".join(api.stdout + api.stderr)
        raise RuntimeError(f"the local API did not start within {timeout:.0f}s:\n{output}")
    return api
