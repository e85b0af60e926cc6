"""The verification link that `nimbus mail list` prints works when opened in a real browser."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from nimbus_tools.local.launcher import LocalApiProcess
from tests.e2e.conftest import Client, new_name, run_cli

LINK = re.compile(r"http://127\.0\.0\.1:\d+/verify\?token=[A-Za-z0-9_.-]+")


def _link_from_mail_list(local_api: LocalApiProcess, address: str) -> str:
    """Poll the operator tool as a person would (the mail function sends within a second or two)."""
    deadline = time.monotonic() + 15
    while True:
        listed = run_cli(local_api, "mail", "list", "--to", address)
        assert listed.returncode == 0, listed.stderr
        found = LINK.search(listed.stdout)
        if found:
            return found.group(0)
        assert time.monotonic() < deadline, f"no verification link for {address}: {listed.stdout}"
        time.sleep(0.25)


def _open_in_chromium(url: str, profile: Path) -> str:
    """The page's DOM after its script ran, from headless Chromium (installed by `make test`)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is missing: `make test` installs Debian's chromium package"
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        # Virtual time lets the page's fetch to PUT /users/verify finish before the DOM is dumped.
        "--virtual-time-budget=10000",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_emailed_link_verifies_the_address_when_opened_in_a_browser(
    client: Client, local_api: LocalApiProcess, tmp_path: Path
) -> None:
    taken = new_name()
    assert client.register(taken).status == 201
    assert client.register(taken).status == 409  # a cancelled transaction must not stall the mail stream
    name = new_name()
    registered = client.register(name)
    assert registered.status == 201, registered.body
    link = _link_from_mail_list(local_api, f"{name}@example.com")

    dom = _open_in_chromium(link, tmp_path / "chromium")

    assert "Your email address is verified" in dom, dom
    me = client.call("GET", "/users/me", token=registered.body["token"])
    assert me.body["verifiedAt"] is not None
    again = _open_in_chromium(link, tmp_path / "chromium-again")  # single use
    assert "Verification failed: Invalid Verification Token" in again, again


def test_the_verify_page_is_static_html_that_never_echoes_the_token(client: Client) -> None:
    reply = client.call("GET", "/verify?token=%3Cscript%3Ealert(1)%3C/script%3E")
    headers = {k.lower(): v for k, v in reply.headers.items()}
    assert reply.status == 200
    assert headers["content-type"].startswith("text/html")
    assert headers["cache-control"] == "no-store"
    assert headers["referrer-policy"] == "no-referrer"
    assert "alert(1)" not in reply.body
