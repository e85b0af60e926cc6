"""``<state-dir>/serve.json``: how other tools find the running local API and its emulator; and
``<state-dir>/serve.lock``, which makes that server the only one using the state directory."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

DEFAULT_STATE_DIR = Path(".local")
STATE_FILE_NAME = "serve.json"
LOCK_FILE_NAME = "serve.lock"


class ServeState(TypedDict):
    """The contents of serve.json."""

    api_url: str
    aws_endpoint_url: str
    region: str
    stage: str
    tables: dict[str, str]
    parameters: dict[str, str]
    queues: NotRequired[dict[str, str]]  # logical id -> queue URL
    sender_email: NotRequired[str]
    killswitch_path: NotRequired[str]  # the kill switches' parameters are <path>/<NAME>
    totp_key: NotRequired[str]  # the KMS key (ARN) the functions seal TOTP secrets under
    pid: int


def state_path(state_dir: Path | str = DEFAULT_STATE_DIR) -> Path:
    """The serve.json path inside ``state_dir``."""
    return Path(state_dir) / STATE_FILE_NAME


def write_state(path: Path, state: ServeState) -> None:
    """Write serve.json atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def remove_state(path: Path, pid: int | None = None) -> None:
    """Delete serve.json, but only if it is ours (``pid``), so a second server's file survives."""
    try:
        if pid is not None and json.loads(path.read_text(encoding="utf-8")).get("pid") != pid:
            return
        path.unlink()
    except (OSError, ValueError):
        pass


def process_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (a serve.json left by a killed server is stale)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(path: Path) -> ServeState | None:
    """The running local API's state, or None if serve.json is absent, unreadable or stale."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    required = ServeState.__required_keys__
    if not isinstance(raw, dict) or any(key not in raw for key in required):
        return None
    if not isinstance(raw["pid"], int) or not process_alive(raw["pid"]):
        return None
    return cast(ServeState, raw)


class StateDirInUseError(RuntimeError):
    """Another local API holds the state directory: a second one would overwrite its serve.json,
    and the operator tool would then act on the wrong server."""


class ServeLock:
    """An exclusive ``flock`` on ``<state-dir>/serve.lock``, held for the server's lifetime and
    released by the operating system however the process ends (a pid file alone could name a dead or
    reused pid); the file holds the holder's pid, for the message of a server refused."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, state_dir: Path) -> ServeLock:
        """Take the lock of ``state_dir``, or raise :class:`StateDirInUseError` naming the holder."""
        state_dir.mkdir(parents=True, exist_ok=True)
        path = state_dir / LOCK_FILE_NAME
        # Not truncated on open: the holder's pid must stay readable by whoever is refused.
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise _in_use(state_dir) from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        return cls(descriptor)

    def release(self) -> None:
        """Let another server use the state directory (idempotent). The file stays: deleting it
        would let a newcomer lock a new file while a waiting one locks the old, both "alone"."""
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the only descriptor releases the flock
            self._descriptor = None


def _in_use(state_dir: Path) -> StateDirInUseError:
    try:
        written = (state_dir / LOCK_FILE_NAME).read_text(encoding="utf-8").strip()
        pid: int | None = int(written) if written.isascii() and written.isdigit() else None
    except OSError:
        pid = None
    state = read_state(state_path(state_dir))  # written once the holder serves
    if state is not None and pid in (None, state["pid"]):
        running = f"pid {state['pid']}, {state['api_url']}"
    else:
        running = (
            f"pid {pid}, still starting" if pid is not None else "its pid not written yet, still starting"
        )
    return StateDirInUseError(
        f"another local API is already running from {state_dir} ({running}). Stop it first "
        "(Ctrl-C where it runs), or give this one its own --state-dir (the operator tool then "
        "needs --state <that dir>/serve.json)."
    )
