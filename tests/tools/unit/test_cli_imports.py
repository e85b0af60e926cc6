"""Each `nimbus` run is a new process, run dozens of times by the end-to-end tests: it imports only
what its command needs. No run imports boto3's package (its s3transfer and resource layer: the
CLI's clients are botocore's); help, input refused before any AWS call and `mail list` on the local
API import no SDK session at all; no command but `import` loads the importer or PostgreSQL's driver.

Each run is a fresh interpreter whose ``sys.modules`` is read once the command has answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nimbus_tools.template import REPO_ROOT

NEVER = ("boto3", "s3transfer")
IMPORT_COMMAND_ONLY = ("nimbus_tools.migrate", "nimbus_tools.cli.importing", "psycopg")
SDK_SESSION = ("botocore.session", "botocore.client")
# Runs main(argv) as `python -m nimbus_tools.cli.main` would, then prints the modules it loaded.
CHILD = (
    "import json, sys\n"
    "from nimbus_tools.cli.main import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "except SystemExit as exit_:\n"
    "    code = exit_.code\n"
    "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
)


def _run(*argv: str) -> tuple[int, str, frozenset[str]]:
    """The exit code and stderr of ``nimbus ARGV``, and the modules its process held at the end."""
    # One attempt: an emulator that is not there answers at once.
    env = os.environ | {"AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=60,
    )
    answer = json.loads(done.stdout.splitlines()[-1])
    return answer["code"], done.stderr, frozenset(answer["modules"])


def _loaded(packages: tuple[str, ...], modules: frozenset[str]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages))


@pytest.fixture
def serve_json(tmp_path: Path) -> Path:
    """A serve.json naming an emulator nobody listens on (this process stands for the server)."""
    path = tmp_path / "serve.json"
    state = {
        "api_url": "http://127.0.0.1:1",
        "aws_endpoint_url": "http://127.0.0.1:1",
        "region": "us-east-1",
        "stage": "dev",
        "tables": {"UsersTable": "Users"},
        "parameters": {"LogLevelParameter": "/nimbus/dev/loglevel"},
        "queues": {},
        "sender_email": "",
        "killswitch_path": "/nimbus/dev/killswitch",
        "totp_key": "",
        "pid": os.getpid(),
    }
    path.write_text(json.dumps(state), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "exit_code"),
    [
        (("--help",), 0),
        (("staff", "promote", "--help"), 0),
        (("killswitch", "enable", "NOT_A_SWITCH"), 2),
        (("loglevel", "set", "LOUD"), 2),
    ],
    ids=["help", "command-help", "bad-killswitch", "bad-level"],
)
def test_help_and_refused_input_import_no_sdk_session(argv: tuple[str, ...], exit_code: int) -> None:
    code, _, modules = _run(*argv)
    assert code == exit_code
    assert _loaded((*NEVER, *SDK_SESSION, *IMPORT_COMMAND_ONLY), modules) == []


def test_mail_list_on_the_local_api_imports_no_sdk_session(serve_json: Path) -> None:
    code, err, modules = _run("--state", str(serve_json), "mail", "list")
    assert (code, "cannot reach the AWS emulator" in err) == (1, True), err
    assert _loaded((*NEVER, *SDK_SESSION, *IMPORT_COMMAND_ONLY), modules) == []


@pytest.mark.parametrize(
    "argv",
    [("loglevel", "get"), ("killswitch", "list")],
    ids=["loglevel", "killswitch"],
)
def test_a_command_that_calls_aws_uses_botocore_without_boto3(
    serve_json: Path, argv: tuple[str, ...]
) -> None:
    code, err, modules = _run("--state", str(serve_json), *argv)
    assert (code, "Could not connect to the endpoint URL" in err) == (1, True), err
    assert _loaded((*NEVER, *IMPORT_COMMAND_ONLY), modules) == []
