"""``<state-dir>/serve.json``: how other tools find the running local API and its emulator."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict

DEFAULT_STATE_DIR = Path(".local")
STATE_FILE_NAME = "serve.json"


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
    state: ServeState = raw  # type: ignore[assignment]
    return state
