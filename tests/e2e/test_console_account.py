"""The account console's self-service changes in a real browser: renaming a session, changing the
username, email address, password and domain, and deleting the account, each done through the page
(through the reverification dialog and its second-factor step where the API reverifies) and each
outcome checked through the API. The browser, the per-test tab and the helpers are
tests/e2e/test_console.py's.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip, new_name
from tests.e2e.browser_tab import PASSWORD, Console
from tests.e2e.conftest import Client, run_cli
from tests.e2e.test_console import (
    NEW_PASSWORD,
    _enrol_totp,
    _links_from_mail_list,
    _login_status,
    _next_code,
    registered,
)

pytestmark = pytest.mark.e2e


def _settings(console: Console, name: str) -> None:
    """Logged in as ``name`` (an account without a second factor), on the settings view."""
    console.log_in(name)
    console.expect_view("account")
    console.page.get_by_role("navigation").get_by_role("link", name="Settings").click()
    console.expect_view("settings")


def _me(client: Client, token: str) -> dict[str, object]:
    reply = client.call("GET", "/users/me", token=token)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def _offer_domain(local_api: LocalApiProcess, *, subdomains: bool) -> str:
    """A new domain offered through the operator tool, as an operator would."""
    domain = f"{new_name('d').replace('_', '-')}.example"
    added = run_cli(local_api, "domain", "add", domain, *(["--subdomains"] if subdomains else []))
    assert added.returncode == 0, added.stderr
    return domain


# ------------------------------------------------------------------------------------------ tests


def test_a_session_is_renamed_in_place_and_the_api_has_the_new_name(console: Console, client: Client) -> None:
    name, first = registered(client)
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    console.open("sessions")
    console.expect_view("sessions")
    first_id = client.call("GET", "/users/me/sessions/me", token=first).body["id"]

    rows = page.locator("#sessions-table tbody tr")
    expect(rows).to_have_count(2)
    row = page.locator(f"#sessions-table tbody tr[data-session-id='{first_id}']")
    old = row.locator("th").inner_text()
    row.get_by_role("button", name=f"Rename {old}").click()
    field = page.get_by_label(f"New name for {old}")
    expect(field).to_be_focused()
    field.press("Escape")  # Escape puts the name back, and the focus on the button
    expect(row.locator("th")).to_have_text(old)
    expect(row.get_by_role("button", name=f"Rename {old}")).to_be_focused()

    row.get_by_role("button", name=f"Rename {old}").click()
    field.fill("  Work laptop  ")
    page.get_by_role("button", name="Save").click()

    expect(page.locator("#status")).to_have_text(f'Session "{old}" renamed to "Work laptop".')
    expect(row.locator("th")).to_have_text("Work laptop")
    expect(row.get_by_role("button", name="Rename Work laptop")).to_be_focused()
    assert client.call("GET", "/users/me/sessions/me", token=first).body["name"] == "Work laptop"

    # This tab's own session is renamed the same way; a name too long is refused in words.
    mine = page.locator("#sessions-table tbody tr", has_text="This session")
    mine.get_by_role("button", name=re.compile("^Rename ")).click()
    mine.get_by_role("textbox").evaluate("(field) => field.removeAttribute('maxlength')")
    mine.get_by_role("textbox").fill("x" * 65)
    mine.get_by_role("button", name="Save").click()
    expect(page.locator("#error")).to_have_text(
        "A session name has 1 to 64 characters. (INVALID_FIELDS_ERROR)"
    )
    mine.get_by_role("textbox").fill("This browser")
    mine.get_by_role("button", name="Save").click()
    expect(mine.locator("th")).to_have_text("This browser")
    own = client.call("GET", "/users/me/sessions/me", token=console.session_token()).body
    assert own["name"] == "This browser"


def test_a_taken_username_is_explained_and_a_free_one_is_taken(console: Console, client: Client) -> None:
    name, token = registered(client)
    taken, _ = registered(client)
    page = console.page
    _settings(console, name)
    field = page.get_by_label("New username")
    expect(field).to_have_value(name)

    field.fill(taken.upper())  # usernames are unique whatever their case
    page.get_by_role("button", name="Change username").click()
    console.confirm_password()
    expect(page.locator("#error")).to_have_text(
        "That username belongs to another account: choose another one. (USER_EXISTS_ERROR)"
    )
    expect(field).to_be_focused()
    assert _me(client, token)["username"] == name

    field.fill("no spaces allowed")
    page.get_by_role("button", name="Change username").click()
    console.confirm_password()
    expect(page.locator("#error")).to_have_text(
        "A username has 1 to 64 characters: letters, digits, _ . and - only. (INVALID_USERNAME_ERROR)"
    )

    renamed = new_name("r")
    field.fill(renamed)
    page.get_by_role("button", name="Change username").click()
    console.confirm_password("not the password")  # a wrong password is said in the dialog, and retried
    expect(page.get_by_role("dialog").get_by_role("alert")).to_contain_text("INVALID_PASSWORD_ERROR")
    console.confirm_password()
    expect(page.locator("#status")).to_have_text(f'Your username is now "{renamed}".')
    expect(page.locator("#error")).to_be_empty()
    assert _me(client, token)["username"] == renamed


def test_a_change_with_totp_enrolled_goes_through_the_code_step(console: Console, client: Client) -> None:
    name, token = registered(client)
    totp, codes = _enrol_totp(client, token)
    page = console.page
    console.log_in(name)
    console.answer_code("backup", codes[0])  # the login takes a backup code, the change the next TOTP step
    console.expect_view("account")
    console.open("settings")
    console.expect_view("settings")

    renamed = new_name("t")
    page.get_by_label("New username").fill(renamed)
    page.get_by_role("button", name="Change username").click()
    console.confirm_password()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("radio", name="Authenticator app")).to_be_checked()
    expect(dialog.locator("#confirm-code")).to_be_focused()
    assert _me(client, token)["username"] == name  # nothing changed before the code
    console.answer_code("totp", _next_code(totp))

    expect(page.locator("#status")).to_have_text(f'Your username is now "{renamed}".')
    expect(dialog).to_be_hidden()
    assert _me(client, token)["username"] == renamed


def test_the_email_changes_and_the_new_address_is_unverified_and_mailed(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token = registered(client)
    page = console.page
    _settings(console, name)
    field = page.get_by_label("New email address")
    expect(field).to_have_value(f"{name}@example.com")

    field.fill("not an address")
    page.get_by_role("button", name="Change email").click()
    console.confirm_password()
    expect(page.locator("#error")).to_have_text("That is not a valid email address. (INVALID_EMAIL_ERROR)")

    address = f"{name}.new@example.com"
    field.fill(address)
    page.get_by_role("button", name="Change email").click()
    console.confirm_password()
    expect(page.locator("#status")).to_have_text(
        f"Your email address is now {address}. "
        "We sent a verification link to it: open it to verify the address."
    )
    me = _me(client, token)
    assert (me["email"], me["verifiedAt"]) == (address, None)
    _links_from_mail_list(local_api, address, 1)  # the verification link went to the new address
    page.get_by_role("navigation").get_by_role("link", name="Account").click()
    expect(page.locator("#verification-state")).to_have_text(
        f"Not verified yet: open the link we sent to {address}."
    )


def test_a_password_change_keeps_this_session_and_ends_another(console: Console, client: Client) -> None:
    name, other = registered(client)
    page = console.page
    _settings(console, name)
    mine = console.session_token()

    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Repeat the new password").fill("battery stapler")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#error")).to_have_text("The two new passwords differ: type the same one twice.")
    expect(page.get_by_label("Repeat the new password")).to_be_focused()
    expect(page.get_by_role("dialog")).to_be_hidden()  # refused before anything is asked or sent

    page.get_by_label("Repeat the new password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    console.confirm_password()
    expect(page.locator("#status")).to_have_text(
        "Your password is changed. This session stays logged in; every other session was signed out."
    )
    expect(page.get_by_label("New password", exact=True)).to_have_value("")

    assert client.call("GET", "/users/me", token=mine).status == 200
    refused = client.call("GET", "/users/me", token=other)
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")
    assert _login_status(client, name, PASSWORD) == (401, "INVALID_PASSWORD_ERROR")
    assert _login_status(client, name, NEW_PASSWORD) == (201, None)
    console.open("sessions")
    expect(page.locator("#sessions-table tbody tr")).to_have_count(2)  # this one, and the login above


def test_the_domain_and_subdomain_change_and_the_domain_errors_are_explained(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, token = registered(client)
    default = str(_me(client, token)["domain"])
    plain = _offer_domain(local_api, subdomains=False)
    page = console.page
    _settings(console, name)
    choice = page.get_by_role("combobox", name="Domain")
    subdomain = page.get_by_label("Subdomain (optional)")
    expect(choice).to_have_value(default)
    expect(page.locator("#domain-current")).to_have_text(default)

    subdomain.fill("My Site")
    page.get_by_role("button", name="Change domain").click()
    expect(page.locator("#status")).to_have_text(f"Your address is now my-site.{default}.")
    expect(subdomain).to_have_value("my-site")  # as the API normalised it
    me = _me(client, token)
    assert (me["domain"], me["subdomain"]) == (default, "my-site")
    console.screenshot("console-settings.png", full_page=True)

    subdomain.fill("x" * 70)
    page.get_by_role("button", name="Change domain").click()
    expect(page.locator("#error")).to_contain_text("The subdomain is too long")
    expect(page.locator("#error")).to_contain_text("(SUBDOMAIN_TOO_LONG_ERROR)")

    choice.select_option(plain)
    expect(subdomain).to_be_disabled()  # this domain takes none
    expect(page.locator("#domain-subdomain-hint")).to_have_text("This domain takes no subdomain.")
    page.get_by_role("button", name="Change domain").click()
    expect(page.locator("#status")).to_have_text(f"Your address is now {plain}.")
    me = _me(client, token)
    assert (me["domain"], me["subdomain"]) == (plain, None)

    # A domain withdrawn while the page shows it: the API's answer is said in words.
    withdrawn = _offer_domain(local_api, subdomains=True)
    console.open("settings")
    console.expect_view("settings")
    choice.select_option(withdrawn)
    removed = run_cli(local_api, "domain", "remove", withdrawn)
    assert removed.returncode == 0, removed.stderr
    page.get_by_role("button", name="Change domain").click()
    expect(page.locator("#error")).to_have_text(
        "That domain is no longer offered: choose one from the list. (INVALID_DOMAIN_ERROR)"
    )
    assert _me(client, token)["domain"] == plain


def test_the_daily_limit_on_username_changes_says_when_to_come_back(console: Console, client: Client) -> None:
    _, token = registered(client)
    for _ in range(3):  # the day's three changes, through the API
        body = {"username": new_name("l"), "password": PASSWORD}
        assert client.call("PUT", "/users/me/username", body, token=token, ip=new_ip()).status == 200
    page = console.page
    console.log_in(str(_me(client, token)["username"]))
    console.expect_view("account")
    console.open("settings")
    console.expect_view("settings")

    page.get_by_label("New username").fill(new_name("l"))
    page.get_by_role("button", name="Change username").click()
    console.confirm_password()
    expect(page.locator("#error")).to_have_text(
        re.compile(r"Too many tries for now: try again in \d+ hours\. \(RATELIMITED_ERROR\)")
    )


def test_deleting_the_account_ends_at_the_login_page_and_the_token_is_refused(
    console: Console, client: Client
) -> None:
    name, other = registered(client)
    page = console.page
    _settings(console, name)
    token = console.session_token()

    page.get_by_role("button", name="Delete my account").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete your account for good")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.locator("#status")).to_have_text("Cancelled: your account is kept.")
    expect(page.get_by_role("button", name="Delete my account")).to_be_focused()
    assert client.call("GET", "/users/me", token=token).status == 200

    page.get_by_role("button", name="Delete my account").click()
    console.confirm_password()

    console.expect_view("login")
    expect(page.locator("#status")).to_have_text("Your account was deleted, and you are logged out.")
    assert page.evaluate("sessionStorage.length") == 0
    for dead in (token, other):
        refused = client.call("GET", "/users/me", token=dead)
        assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")
    assert _login_status(client, name, PASSWORD) == (404, "INVALID_USER_ERROR")
