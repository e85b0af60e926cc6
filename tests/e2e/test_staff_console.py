"""The staff console (console/staff/) in a real browser, as tests/e2e/test_console.py drives the
account console (its tab is tests/e2e/browser_tab.py's): headless Chromium (Debian's package)
through Playwright against the real local API, each tab from its own loopback address. Staff are
made as an operator makes them: registered and enrolled with TOTP through the API, then promoted
with the operator tool. Every change made in the page is checked through the API; axe-core audits
the staff pages as tests/e2e/test_console_accessibility.py audits the account console.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyotp
import pytest
from playwright.sync_api import Browser, expect

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip
from tests.e2e.browser_tab import PASSWORD, Console, console_tab
from tests.e2e.conftest import Client, run_cli
from tests.e2e.test_console import _enrol_totp, _next_code, registered
from tests.e2e.test_console_accessibility import violations

# The fixtures `playwright`, `browser` and `console` are tests/e2e/conftest.py's: one Chromium for
# every browser test module of the session.

pytestmark = pytest.mark.e2e


def _staff(client: Client, local_api: LocalApiProcess) -> tuple[str, str, pyotp.TOTP, list[str]]:
    """A new staff user with TOTP: (name, API session, authenticator, backup codes)."""
    name, token = registered(client)
    totp, codes = _enrol_totp(client, token)
    promoted = run_cli(local_api, "staff", "promote", name)
    assert promoted.returncode == 0, promoted.stderr
    return name, token, totp, codes


def _open(console: Console, view: str = "") -> None:
    console.page.goto(f"{console.url}/staff/{view}")


def _log_in(console: Console, name: str, backup_code: str | None = None) -> None:
    """The staff login page, answered with a backup code when the account has a second factor."""
    page = console.page
    _open(console, "login")
    console.expect_view("login")
    page.get_by_label("Username or email").fill(name)
    page.locator("#login-password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    if backup_code is not None:
        console.answer_code("backup", backup_code)


def _reverify(console: Console, kind: str, code: str) -> None:
    """The page's dialog answered: the password, then the second factor; then the page drawn
    again and wired (its buttons do nothing until the view's data has loaded)."""
    console.confirm_password()
    console.answer_code(kind, code)
    expect(console.page.get_by_role("dialog")).to_be_hidden()
    expect(console.page.locator("main[data-view]:not([aria-busy])")).to_be_visible()


def _user_rows(console: Console) -> list[str]:
    return console.page.locator("#users-table tbody th").all_inner_texts()


def _api_usernames(client: Client, token: str, offset: int, limit: int) -> tuple[int, list[str]]:
    listed = client.call("GET", f"/users?offset={offset}&limit={limit}", token=token)
    assert listed.status == 200, listed.body
    return listed.body["count"], [user["username"] for user in listed.body["items"]]


@pytest.fixture
def audited(browser: Browser, local_api: LocalApiProcess) -> Iterator[Console]:
    with console_tab(browser, local_api, bypass_csp=True) as tab:
        yield tab


def test_the_users_list_shows_the_total_and_pages_through_it(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token, _, codes = _staff(client, local_api)
    for _ in range(6):  # more than one page of five, whatever ran before
        registered(client)
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")
    expect(page.locator("#status")).to_have_text("Logged in.")
    assert page.url.endswith("/console/staff/users")

    page.get_by_label("Users per page").select_option("5")
    console.expect_view("users")
    expect(page.locator("#users-table tbody tr")).to_have_count(5)
    count, first = _api_usernames(client, token, 0, 5)
    expect(page.locator("#users-count")).to_have_text(f"Showing users 1 to 5 of {count}.")
    expect(page.locator("#users-page")).to_have_text(f"Page 1 of {-(-count // 5)}")
    assert _user_rows(console) == first
    expect(page.get_by_role("button", name="Previous page")).to_be_disabled()

    page.get_by_role("button", name="Next page").click()
    expect(page.locator("#users-count")).to_have_text(f"Showing users 6 to {min(10, count)} of {count}.")
    _, second = _api_usernames(client, token, 5, 5)
    assert _user_rows(console) == second
    assert "offset=5" in page.url
    page.get_by_role("button", name="Previous page").click()
    expect(page.locator("#users-count")).to_have_text(f"Showing users 1 to 5 of {count}.")
    assert _user_rows(console) == first


def test_banning_with_a_reason_answers_the_totp_challenge_in_the_page(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, totp, codes = _staff(client, local_api)
    target, target_token = registered(client)
    target_id = client.call("GET", "/users/me", token=target_token).body["id"]
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")

    _open(console, f"users/{target_id}")
    console.expect_view("user")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"User {target}")
    expect(page.locator("#sessions-table tbody tr")).to_have_count(1)  # the registration's session
    page.get_by_label("Reason").fill("Spam from the test suite")
    page.get_by_role("button", name="Ban", exact=True).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    assert page.evaluate("document.activeElement.id") == "confirm-password"  # focus moved to the dialog
    console.confirm_password()
    expect(dialog.get_by_role("radio", name="Authenticator app")).to_be_visible()
    console.screenshot("staff-console-ban-challenge.png")
    console.answer_code("totp", _next_code(totp))

    expect(dialog).to_be_hidden()
    expect(page.locator("#status")).to_have_text(f"{target} is banned.")
    expect(page.locator("#ban-state")).to_contain_text("Spam from the test suite")
    assert page.evaluate("document.activeElement.id") == "unban"  # focus back where the action is
    user = client.call("GET", f"/users/{target_id}", token=console.session_token()).body
    assert (user["banReason"], user["bannedAt"] is not None) == ("Spam from the test suite", True)
    refused = client.call("GET", "/users/me", token=target_token)
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")
    banned_login = client.login(target)
    assert (banned_login.status, banned_login.body["code"]) == (403, "BANNED_ERROR")
    expect(page.locator("#sessions-table tbody tr")).to_have_count(0)


def test_a_wrong_code_is_explained_in_the_dialog_and_cancelling_changes_nothing(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, _, codes = _staff(client, local_api)
    _, target_token = registered(client)
    target_id = client.call("GET", "/users/me", token=target_token).body["id"]
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")
    _open(console, f"users/{target_id}")
    console.expect_view("user")

    page.get_by_role("button", name="Mark verified").click()
    console.confirm_password("not the password")
    expect(page.locator("#confirm-error")).to_contain_text("INVALID_PASSWORD_ERROR")
    console.confirm_password()
    console.answer_code("backup", "not-a-code")
    expect(page.locator("#confirm-error")).to_contain_text("INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    page.get_by_role("button", name="Cancel").click()

    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("Cancelled: nothing changed.")
    assert page.evaluate("document.activeElement.id") == "verify-mark"  # focus back on the button
    assert client.call("GET", "/users/me", token=target_token).body["verifiedAt"] is None


def test_a_kill_switch_is_turned_on_and_off_in_the_page(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token, _, codes = _staff(client, local_api)
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")
    page.get_by_role("link", name="Kill switches and log level").click()
    console.expect_view("operations")
    row = page.locator("#killswitches-table tr[data-switch=FILE_CREATE] td[data-label=State]")
    expect(row).to_have_text("Off")
    expect(page.locator("#loglevel-state")).to_have_text(
        f"The log level is {client.call('GET', '/loglevel', token=token).body['name']}."
    )

    def state() -> bool:
        listed = client.call("GET", "/killswitches", token=token).body["items"]
        return bool(next(item["state"] for item in listed if item["name"] == "FILE_CREATE"))

    try:
        page.get_by_role("button", name="Turn on FILE_CREATE").click()
        _reverify(console, "backup", codes[1])
        expect(row).to_have_text("On")
        expect(page.locator("#status")).to_contain_text("Kill switch FILE_CREATE is on")
        assert state() is True
        assert page.evaluate("document.activeElement.id") == "switch-5"

        page.get_by_role("button", name="Turn off FILE_CREATE").click()
        _reverify(console, "backup", codes[2])
        expect(row).to_have_text("Off")
        assert state() is False
    finally:
        # Off whatever happened: FILE_CREATE guards nothing the other tests use, and stays so.
        assert run_cli(local_api, "killswitch", "disable", "FILE_CREATE").returncode == 0


def test_a_user_who_is_not_staff_is_refused_with_a_clear_message(console: Console, client: Client) -> None:
    name, _ = registered(client)
    _log_in(console, name)

    console.expect_view("refused")
    expect(console.page.locator("#refused-reason")).to_have_text(
        f"You are logged in as {name}, who is not staff: the staff console is for staff accounts only."
    )
    _open(console, "operations")
    console.expect_view("refused")
    token = console.session_token()
    assert client.call("GET", "/users", token=token, ip=new_ip()).status == 403


def test_staff_without_a_second_factor_are_told_to_add_one(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _ = registered(client)
    assert run_cli(local_api, "staff", "promote", name).returncode == 0
    _log_in(console, name)

    console.expect_view("refused")
    expect(console.page.locator("#refused-reason")).to_contain_text(
        "Staff endpoints need a second factor on your account"
    )
    expect(console.page.locator("#refused-reason")).to_contain_text("ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR")


def test_the_account_consoles_session_is_the_staff_consoles_too(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, _, codes = _staff(client, local_api)
    console.log_in(name)
    console.answer_code("backup", codes[0])
    console.expect_view("account")

    _open(console, "")
    console.expect_view("users")
    expect(console.page.locator("#users-count")).to_contain_text("Showing users 1 to")


def test_users_me_is_no_users_page_so_nothing_there_acts_on_the_staff_members_own_account(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, _, codes = _staff(client, local_api)
    _log_in(console, name, codes[0])
    console.expect_view("users")

    _open(console, "users/me")

    console.expect_view("missing")
    expect(console.page.get_by_role("button", name=re.compile("Ban|Delete"))).to_have_count(0)


def test_the_staff_pages_have_no_serious_accessibility_violation(
    audited: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token, _, codes = _staff(client, local_api)
    me = client.call("GET", "/users/me", token=token).body["id"]
    found: dict[str, list[str]] = {}
    _open(audited, "login")
    audited.expect_view("login")
    found["login"] = violations(audited)
    _log_in(audited, name, codes[0])
    audited.expect_view("users")
    for view, shown in (
        ("users", "users"),
        (f"users/{me}", "user"),
        ("operations", "operations"),
        ("nowhere", "missing"),
    ):
        _open(audited, view)
        audited.expect_view(shown)
        audited.page.wait_for_load_state("networkidle")
        found[shown] = violations(audited)
    _open(audited, f"users/{me}")
    audited.expect_view("user")
    audited.page.get_by_role("button", name="Delete this user").click()
    expect(audited.page.get_by_role("dialog")).to_be_visible()
    found["dialog"] = violations(audited)

    assert found == {view: [] for view in found}


def test_a_users_sessions_verification_staff_flag_password_and_deletion_are_managed_in_the_page(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, _, codes = _staff(client, local_api)
    target, target_token = registered(client)
    second = client.login(target).body["token"]
    target_id = client.call("GET", "/users/me", token=target_token).body["id"]
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")
    _open(console, f"users/{target_id}")
    console.expect_view("user")
    expect(page.locator("#sessions-table tbody tr")).to_have_count(2)

    page.locator("#sessions-table tr[data-session-id] >> nth=0").get_by_role("button").click()
    expect(page.locator("#sessions-table tbody tr")).to_have_count(1)
    alive = [client.call("GET", "/users/me", token=t).status for t in (target_token, second)]
    assert sorted(alive) == [200, 401]

    page.get_by_role("button", name="Mark verified").click()
    _reverify(console, "backup", codes[1])
    expect(page.locator("#status")).to_have_text(f"{target}'s email address is marked verified.")
    assert client.call("GET", f"/users/{target_id}", token=console.session_token()).body["verifiedAt"]

    page.get_by_role("button", name="Make staff").click()
    _reverify(console, "backup", codes[2])
    expect(page.locator("#error")).to_contain_text("USER_REQUIRES_SECOND_FACTOR_ERROR")
    assert client.call("GET", f"/users/{target_id}", token=console.session_token()).body["staff"] is False

    page.get_by_label("New password", exact=True).fill("battery staple")
    page.get_by_label("Repeat the new password").fill("battery staple")
    page.get_by_role("button", name="Set the password").click()
    _reverify(console, "backup", codes[3])
    expect(page.locator("#status")).to_have_text(
        f"{target}'s password is set; their sessions are signed out."
    )
    assert client.login(target, "battery staple").status == 201
    assert client.login(target).body["code"] == "INVALID_PASSWORD_ERROR"

    page.get_by_role("button", name="Delete this user").click()
    _reverify(console, "backup", codes[4])
    console.expect_view("users")
    expect(page.locator("#status")).to_have_text(f"{target} is deleted.")
    gone = client.call("GET", f"/users/{target_id}", token=console.session_token())
    assert (gone.status, gone.body["code"]) == (404, "INVALID_USER_ERROR")


def test_the_log_level_is_set_in_the_page(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token, _, codes = _staff(client, local_api)
    current = client.call("GET", "/loglevel", token=token).body["name"].upper()
    page = console.page
    _log_in(console, name, codes[0])
    console.expect_view("users")
    _open(console, "operations")
    console.expect_view("operations")

    page.get_by_label("New log level").select_option(current)  # the same level: other tests keep theirs
    page.get_by_role("button", name="Set the log level").click()
    _reverify(console, "backup", codes[1])

    expect(page.locator("#status")).to_contain_text(f"The log level is {current} now")
    assert client.call("GET", "/loglevel", token=token).body["name"].upper() == current


def test_logging_in_and_reaching_a_user_with_the_keyboard_alone(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _, _, codes = _staff(client, local_api)
    page = console.page
    _open(console, "login")
    console.expect_view("login")

    console.tab_to("#login-username")
    page.keyboard.type(name)
    console.tab_to("#login-password")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog")).to_be_visible()
    assert page.evaluate("document.activeElement.id") == "confirm-code"
    console.tab_to("input[name=factor]:checked", key="Shift+Tab")
    page.keyboard.press("ArrowDown")  # the second answer, a backup code: focus goes to the code again
    assert page.evaluate("document.activeElement.id") == "confirm-code"
    expect(page.get_by_role("textbox", name="Backup code")).to_be_focused()
    page.keyboard.type(codes[0])
    page.keyboard.press("Enter")
    console.expect_view("users")
    console.tab_to("#users-table tbody a")
    page.keyboard.press("Enter")

    console.expect_view("user")
    assert page.evaluate("document.activeElement.tagName") == "H1"


def test_the_refusal_and_an_error_message_have_no_serious_accessibility_violation(
    audited: Console, client: Client
) -> None:
    name, _ = registered(client)
    _log_in(audited, name, None)
    audited.expect_view("refused")
    refused = violations(audited)
    audited.page.get_by_role("button", name="Log out and use another account").click()
    audited.expect_view("login")
    audited.page.get_by_label("Username or email").fill(name)
    audited.page.locator("#login-password").fill("not the password")
    audited.page.get_by_role("button", name="Log in").click()
    expect(audited.page.get_by_role("alert").first).to_contain_text("INVALID_PASSWORD_ERROR")

    assert (refused, violations(audited)) == ([], [])
