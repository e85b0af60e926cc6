"""End-to-end: the real local API (`nimbus-local serve`) over HTTP, started once per test session.

Tests stay independent by using their own usernames and their own source addresses: every
loopback address 127.x.y.z reaches the server, and the server takes the source IP from the socket,
so a test can be "another client" simply by binding another address.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pyotp
import pytest

from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from tests.api_client import ApiClient, Reply, new_name, run_nimbus
from tests.invariants import stack_violations, users_table_violations

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

    from tests.e2e.browser_tab import Console

pytestmark = pytest.mark.e2e

# The browser tests always take their screenshots; `make screenshots` keeps them for the README
# (docs/screenshots/), any other run writes them under .local/ so a test run leaves no changed files.
ROOT = Path(__file__).resolve().parents[2]
# How long the suite's local API lets a function keep SSM's kill switches and log level: the rule
# (a change is seen within the cache age, CONTRACT section 11) is the same at any age, and the
# deployed 10 s would be waited out by every test that flips a switch.
CACHE_AGE = 2
SCREENSHOTS = Path(os.environ.get("NIMBUS_SCREENSHOTS") or ROOT / ".local" / "screenshots")


class Client(ApiClient):
    """The client the soak shares (tests/api_client.py: requests from a chosen source address,
    register, login, TOTP), pointed at a local API."""

    def __init__(self, api: LocalApiProcess) -> None:
        super().__init__(api.api_url)
        self.api = api


@pytest.fixture(scope="session")
def local_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiProcess]:
    """The local API with the real template, on free ports, hashing passwords with argon2id's test
    profile: the suite registers and signs in by the hundred (workers use the production profile
    unless asked: tests/tools/integration/test_local_functions.py), and keeping SSM's configuration
    for ``CACHE_AGE`` seconds."""
    state_dir = tmp_path_factory.mktemp("nimbus-local")
    api = start_local_api(
        state_dir=state_dir, timeout=90, test_password_hashing=True, config_cache_seconds=CACHE_AGE
    )
    yield api
    assert api.stop() == 0, "the local API did not stop cleanly on Ctrl-C"


@pytest.fixture(scope="session")
def client(local_api: LocalApiProcess) -> Client:
    return Client(local_api)


@pytest.fixture(scope="session")
def aws(local_api: LocalApiProcess) -> Any:
    """A boto3 session pointed at the local API's emulator (to look inside, as an operator would)."""
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


@pytest.fixture(scope="session")
def dynamodb(aws: Any, local_api: LocalApiProcess) -> Any:
    return aws.client("dynamodb", endpoint_url=local_api.aws_endpoint_url)


def run_cli(local_api: LocalApiProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the operator tool against the running local API, as a person would."""
    return run_nimbus(Path(local_api.state_dir) / "serve.json", *args)


def recovery_requests_handled(dynamodb: Any, table: str = "OutboxTable", timeout: float = 15.0) -> None:
    """Wait until the recovery function has handled every recovery request queued so far: none is
    left in the outbox, so each one's mail (or its absence) is there. ``POST /users/recover``
    answers before the lookup and the mail, which the local API's stream poller runs soon after."""
    deadline = time.monotonic() + timeout
    while True:
        pages = dynamodb.get_paginator("scan").paginate(
            TableName=table,
            ConsistentRead=True,
            FilterExpression="#k = :k",
            ExpressionAttributeNames={"#k": "kind"},
            ExpressionAttributeValues={":k": {"S": "recover-request"}},
            Select="COUNT",
        )
        waiting = sum(page["Count"] for page in pages)
        if not waiting:
            return
        assert time.monotonic() < deadline, f"{waiting} recovery request(s) still not handled"
        time.sleep(0.1)


def parallel(count: int, call: Callable[[int], Reply]) -> list[Reply]:
    """``call(0)`` .. ``call(count - 1)`` at once, each on its own thread: the replies, in order."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(call, range(count)))


def with_totp(client: Client) -> tuple[str, str, pyotp.TOTP, list[str]]:
    """A new user with a TOTP factor: (name, session, authenticator, backup codes); the code of the
    current step is used up by the confirmation."""
    name = new_name()
    session = client.register(name).body["token"]
    authenticator, codes = client.enrol_totp(session)
    return name, session, authenticator.totp, codes


@pytest.fixture
def users_table_whole(dynamodb: Any) -> Iterator[None]:
    """After the test, the users table is whole (tests/invariants.py): for the race suites."""
    yield
    assert users_table_violations(dynamodb) == []


@pytest.fixture
def stack_whole(dynamodb: Any, local_api: LocalApiProcess) -> Iterator[None]:
    """After the test, every table of the stack is whole (tests/invariants.py: the users table, and
    sessions, tokens and outbox against it): for the race suites. The local API's stack is shared
    by the session's tests, so this judges what every test before left too."""
    yield
    assert stack_violations(dynamodb, local_api.state["tables"]) == []


# ---------------------------------------------------------------- the browser tests' Chromium


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    """Playwright's driver, once for the session (a second one in the same process cannot start)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """One headless Chromium for the session: Debian's chromium-headless-shell, which `make test`
    installs (the headless-only build Playwright runs headless tests in)."""
    chromium = shutil.which("chromium-headless-shell")
    if chromium is None:
        pytest.fail("chromium-headless-shell is missing: `make test` (or `make os-packages`) installs it")
    # No GPU emulation: headless pages are drawn in software either way, and its process costs CPU.
    launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
    yield launched
    launched.close()


@pytest.fixture
def console(browser: Browser, local_api: LocalApiProcess) -> Iterator[Console]:
    """A fresh console tab per test (see :func:`tests.e2e.browser_tab.console_tab`)."""
    from tests.e2e.browser_tab import console_tab  # it imports this module's helpers

    with console_tab(browser, local_api) as tab:
        yield tab
