"""A browser tab on the account console, as one client with its own source address: what the
browser tests share (their fixtures, `playwright`, `browser` and `console`, are in conftest.py, so one
Chromium serves every test module of the session)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from playwright.sync_api import Browser, Page, ViewportSize, expect

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.socks_relay import socks_relay

PASSWORD = "correct horse"
VIEWPORT: ViewportSize = {"width": 1024, "height": 720}
# A function's first request starts its worker (imports, argon2): allow for it on a busy machine.
expect.set_options(timeout=20_000)


@dataclass
class Console:
    """A browser tab on the console, as one client with its own source address."""

    page: Page
    url: str  # http://localhost:<port>/console
    ip: str

    def open(self, view: str = "") -> None:
        self.page.goto(f"{self.url}/{view}")

    def expect_view(self, view: str) -> None:
        expect(self.page.locator(f"main[data-view={view}]:not([aria-busy])")).to_be_visible()

    def session_token(self) -> str:
        stored = self.page.evaluate("sessionStorage.getItem('nimbus.session')")
        assert isinstance(stored, str), "no session token in sessionStorage"
        return stored

    def log_in(self, username: str, password: str = PASSWORD, *, open_page: bool = True) -> None:
        """Log in with the password; ``open_page=False`` types into the login view already shown
        (opening it again starts a new passkey autofill request, which a virtual authenticator
        holding a passkey answers at once)."""
        if open_page:
            self.open("login")
        self.page.get_by_label("Username or email").fill(username)
        self.page.locator("#login-password").fill(password)
        self.page.get_by_role("button", name="Log in").click()

    def confirm_password(self, password: str = PASSWORD) -> None:
        dialog = self.page.get_by_role("dialog")
        expect(dialog).to_be_visible()
        dialog.get_by_label("Password").fill(password)
        dialog.get_by_role("button", name="Continue").click()

    def answer_code(self, kind: str, code: str) -> None:
        """Answer the second-factor step of the dialog with a TOTP or backup code."""
        dialog = self.page.get_by_role("dialog")
        label = {"totp": "Authenticator app", "backup": "Backup code"}[kind]
        dialog.get_by_role("radio", name=label).check()
        dialog.locator("#confirm-code").fill(code)
        dialog.get_by_role("button", name="Continue").click()

    def status(self) -> str:
        return self.page.locator("#status").inner_text()

    def tab_to(self, selector: str, *, limit: int = 40, key: str = "Tab") -> None:
        """Press ``key`` (Tab, Shift+Tab) until the focused element matches ``selector``, as a
        keyboard-only user moves; fails if it never does within ``limit`` presses."""
        for _ in range(limit):
            self.page.keyboard.press(key)
            if self.page.evaluate(
                "(s) => document.activeElement && document.activeElement.matches(s)", selector
            ):
                return
        raise AssertionError(f"{key} never reached {selector}")

    def screenshot(self, name: str, *, full_page: bool = False) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=SCREENSHOTS / name, full_page=full_page, animations="disabled")


@contextmanager
def console_tab(
    browser: Browser, local_api: LocalApiProcess, *, bypass_csp: bool = False
) -> Iterator[Console]:
    """A fresh context (no storage, no credentials) reaching the API from its own IP; the page's
    script errors fail the test. ``bypass_csp``: for tests that inject a script of their own (axe)."""
    ip = new_ip()
    with socks_relay(ip) as proxy:
        context = browser.new_context(
            proxy={"server": proxy},
            viewport=VIEWPORT,
            locale="en-GB",
            timezone_id="UTC",
            bypass_csp=bypass_csp,
        )
        context.set_default_timeout(15_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            yield Console(page, local_api.console_url, ip)
        finally:
            context.close()
        assert errors == [], f"the console's script failed: {errors}"
