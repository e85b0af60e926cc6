"""The account console checked for accessibility in headless Chromium: axe-core (npm, pinned by
package-lock.json) run in every view, signed out and signed in, with a dialog open and an error
shown, and no serious or critical violation allowed; and the main flows done with the keyboard
alone.

axe is injected by the test (the console's Content-Security-Policy allows only its own scripts, so
these tabs bypass it; the other browser tests keep it enforced).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from nimbus_tools.local.launcher import LocalApiProcess
from nimbus_tools.template import REPO_ROOT
from tests.e2e.browser_tab import PASSWORD, Console, console_tab
from tests.e2e.conftest import Client
from tests.e2e.test_console import registered
from tests.e2e.test_console_passkeys import (
    Authenticator,
    log_out_with_the_keys_away,
    signed_in_with_a_passkey,
)

pytestmark = pytest.mark.e2e

AXE = Path(REPO_ROOT) / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = {"serious", "critical"}
SIGNED_OUT = ["login", "forgot", "register", "verify", "recover", "no-such-page"]
SIGNED_IN = ["", "sessions", "activity", "keys", "security", "settings"]


@pytest.fixture
def audited(browser: Browser, local_api: LocalApiProcess) -> Iterator[Console]:
    with console_tab(browser, local_api, bypass_csp=True) as tab:
        yield tab


def violations(console: Console) -> list[str]:
    """axe's serious and critical findings on the page as it is now, one line per element."""
    page = console.page
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    results: dict[str, Any] = page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {node['target']}"
        for v in results["violations"]
        if v.get("impact") in BLOCKING
        for node in v["nodes"]
    ]


def _view_ready(console: Console, view: str) -> None:
    expect(console.page.locator("main[data-view]:not([aria-busy])")).to_be_visible()
    if view:
        console.page.wait_for_load_state("networkidle")


@pytest.mark.parametrize("view", SIGNED_OUT)
def test_every_signed_out_view_has_no_serious_accessibility_violation(audited: Console, view: str) -> None:
    audited.open(view)
    _view_ready(audited, view)

    assert violations(audited) == []


def test_every_signed_in_view_has_no_serious_accessibility_violation(
    audited: Console, client: Client
) -> None:
    name, _ = registered(client)
    audited.log_in(name)
    audited.expect_view("account")
    found: dict[str, list[str]] = {}

    for view in SIGNED_IN:
        audited.open(view)
        _view_ready(audited, view)
        found[view or "account"] = violations(audited)

    assert found == {view or "account": [] for view in SIGNED_IN}


def test_the_reverification_dialog_and_an_error_message_have_no_serious_violation(
    audited: Console, client: Client
) -> None:
    name, _ = registered(client)
    audited.open("login")
    audited.log_in(name, "not the password")
    expect(audited.page.get_by_role("alert")).to_contain_text("INVALID_PASSWORD_ERROR")
    with_error = violations(audited)
    audited.log_in(name)
    audited.expect_view("account")
    audited.open("keys")
    _view_ready(audited, "keys")
    audited.page.locator("#key-name").fill("backup script")
    audited.page.get_by_role("checkbox", name="ACCOUNT_READ").check()
    audited.page.get_by_role("button", name="Create API key").click()
    expect(audited.page.get_by_role("dialog")).to_be_visible()

    assert (with_error, violations(audited)) == ([], [])


def test_the_session_rename_form_and_a_settings_error_have_no_serious_violation(
    audited: Console, client: Client
) -> None:
    name, _ = registered(client)
    audited.log_in(name)
    audited.expect_view("account")
    audited.open("sessions")
    _view_ready(audited, "sessions")
    audited.page.get_by_role("button", name="Rename").first.click()
    expect(audited.page.get_by_role("button", name="Save")).to_be_visible()
    renaming = violations(audited)
    audited.open("settings")
    _view_ready(audited, "settings")
    audited.page.get_by_label("New password", exact=True).fill("short")
    audited.page.get_by_role("button", name="Change password").click()
    expect(audited.page.locator("#error")).to_contain_text("8 to 64 characters")

    assert (renaming, violations(audited)) == ([], [])


def test_logging_in_and_reaching_the_sessions_with_the_keyboard_alone(
    console: Console, client: Client
) -> None:
    name, _ = registered(client)
    page = console.page
    console.open("login")
    console.expect_view("login")

    console.tab_to("#login-username")
    page.keyboard.type(name)
    console.tab_to("#login-password")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    console.expect_view("account")
    console.tab_to("a[href$='/sessions']")
    page.keyboard.press("Enter")

    console.expect_view("sessions")
    focused = page.evaluate("document.activeElement && document.activeElement.outerHTML")
    assert focused is not None


def test_the_login_page_with_its_passkey_button_and_a_passkey_error_has_no_serious_violation(
    audited: Console,
) -> None:
    Authenticator(audited)  # holding no passkey: the browser's request ends at once, refused
    audited.open("login")
    _view_ready(audited, "login")
    button = audited.page.get_by_role("button", name="Sign in with a passkey")
    expect(button).to_be_visible()
    before = violations(audited)
    button.click()
    expect(audited.page.locator("#error")).to_contain_text("(WEBAUTHN_NotAllowedError)")

    assert (before, violations(audited)) == ([], [])


def test_the_security_view_listing_a_passkey_and_the_dialog_offering_it_have_no_serious_violation(
    audited: Console, client: Client
) -> None:
    signed_in_with_a_passkey(client, audited)
    page = audited.page
    expect(page.locator("#factors-list")).to_contain_text("Passkey")
    listed = violations(audited)
    page.get_by_role("button", name="Remove Laptop").click()
    expect(page.get_by_role("dialog").get_by_role("button", name="Use a passkey")).to_be_visible()

    assert (listed, violations(audited)) == ([], [])


def test_signing_in_with_a_passkey_by_the_keyboard_alone(console: Console, client: Client) -> None:
    name, _, authenticator = signed_in_with_a_passkey(client, console)
    log_out_with_the_keys_away(console, authenticator)
    page = console.page

    console.tab_to("#login-username")
    console.tab_to("#passkey-login")  # after the password, the checkbox and "Log in"
    page.keyboard.press("Enter")

    console.expect_view("account")
    assert client.call("GET", "/users/me", token=console.session_token()).body["username"] == name


def test_the_audit_names_a_serious_violation_when_a_page_has_one(audited: Console) -> None:
    audited.open("login")
    _view_ready(audited, "login")
    audited.page.evaluate("document.querySelector('main').insertAdjacentHTML('beforeend', '<input id=bare>')")

    assert any(line.startswith("label (critical)") for line in violations(audited))
