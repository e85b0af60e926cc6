"""The account console (console/) in a real browser: headless Chromium (Debian's package) driven by
Playwright against the real local API, WebAuthn through Chromium's virtual authenticator.

Each test gets a fresh browser context whose traffic leaves from its own loopback address (through
a SOCKS relay, tests/e2e/socks_relay.py), so the API's per-IP rate limits treat it as its own
client, as the other end-to-end tests are. The page is opened at http://localhost:<port>/console/,
the local WebAuthn origin. Every outcome the console shows is checked against the API as well.
Screenshots for the README are taken at a fixed viewport (`make screenshots` keeps them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pyotp
import pytest
from playwright.sync_api import Browser, expect

from nimbus_tools.local.launcher import LocalApiProcess
from tests import totp_reference
from tests.api_client import new_ip, new_name
from tests.e2e.browser_tab import PASSWORD, Console, console_tab
from tests.e2e.conftest import Client, run_cli

pytestmark = pytest.mark.e2e

NEW_PASSWORD = "battery staple"
LINK = re.compile(r"http://localhost:\d+/console/verify\?token=[A-Za-z0-9_.-]+")
RECOVERY_LINK = re.compile(r"http://localhost:\d+/console/recover\?token=[A-Za-z0-9_.-]+")
# What the forgot page says after every request, whether or not the name is an account's.
RECOVERY_SENT = "If an account matches, we have sent a link to its email address. It is valid for 30 minutes."


def registered(client: Client) -> tuple[str, str]:
    """A new user registered through the API: (username, session token)."""
    name = new_name("c")
    reply = client.register(name)
    assert reply.status == 201, reply.body
    return name, str(reply.body["token"])


def _links_from_mail_list(
    local_api: LocalApiProcess, address: str, count: int, link: re.Pattern[str] = LINK
) -> list[str]:
    """The links (verification links unless ``link`` says otherwise) mailed to ``address``, oldest
    first, once there are ``count``: polled through the operator tool as a person would (the mail
    function sends within a second or two)."""
    deadline = time.monotonic() + 15
    while True:
        listed = run_cli(local_api, "mail", "list", "--to", address)
        assert listed.returncode == 0, listed.stderr
        found = link.findall(listed.stdout)
        if len(found) >= count:
            return list(found)
        assert time.monotonic() < deadline, f"not {count} links {link.pattern} for {address}: {listed.stdout}"
        time.sleep(0.25)


def _enrol_totp(client: Client, token: str) -> tuple[pyotp.TOTP, list[str]]:
    """TOTP enrolled through the API: the generator and the first backup codes."""
    authenticator, codes = client.enrol_totp(token, PASSWORD)
    return authenticator.totp, codes


def _next_code(totp: pyotp.TOTP) -> str:
    """The code of the next time step: the API takes one step of drift and each step only once, so
    this is accepted after the current step's code was used."""
    return str(totp.at(time.time() + 30))


def _api_login(client: Client, username: str, answer: dict[str, Any]) -> tuple[int, Any]:
    """A login through the API answered with ``answer`` (type and code): status and body."""
    first = client.login(username)
    assert first.body["code"] == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", first.body
    second = client.call("POST", "/login", {"2fa": {"token": first.body["token"], **answer}}, ip=new_ip())
    return second.status, second.body


def _ask_for_recovery(console: Console, name: str) -> None:
    """The forgot page, from the login page's link, asked for ``name``; its neutral answer shown."""
    page = console.page
    console.open("login")
    page.get_by_role("link", name="Forgot password?").click()
    console.expect_view("forgot")
    page.get_by_label("Username or email").fill(name)
    page.get_by_role("button", name="Send the link").click()
    expect(page.locator("#status")).to_have_text(RECOVERY_SENT)


def _choose_new_password(console: Console, link: str, password: str = NEW_PASSWORD) -> None:
    """The mailed link opened, the new password typed twice and sent."""
    page = console.page
    page.goto(link)
    console.expect_view("recover")
    assert page.url == f"{console.url}/recover"  # the token is dropped from the address bar
    page.get_by_label("New password", exact=True).fill(password)
    page.get_by_label("Repeat the new password").fill(password)
    page.get_by_role("button", name="Reset password").click()


def _login_status(client: Client, username: str, password: str) -> tuple[int, str | None]:
    """A password login through the API: its status and code (None for a session)."""
    reply = client.login(username, password)
    return reply.status, reply.body.get("code")


# ------------------------------------------------------------------------------------------ tests


def test_registering_then_opening_the_mailed_link_verifies_the_address_and_a_resend_replaces_it(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    taken = new_name()
    assert client.register(taken).status == 201
    assert client.register(taken).status == 409  # a cancelled transaction must not stall the mail stream
    name = new_name("c")
    console.open("register")
    page = console.page
    page.get_by_label("Username").fill(name)
    page.get_by_label("Email").fill(f"{name}@example.com")
    page.locator("#register-password").fill(PASSWORD)
    page.get_by_label("Repeat the password").fill(PASSWORD)
    console.screenshot("console-register.png")
    page.get_by_role("button", name="Create account").click()
    console.expect_view("account")
    expect(page.locator("#verification-state")).to_contain_text("Not verified yet")
    token = console.session_token()
    assert client.call("GET", "/users/me", token=token).body["verifiedAt"] is None

    address = f"{name}@example.com"
    (first,) = _links_from_mail_list(local_api, address, 1)
    page.get_by_role("button", name="Send the verification email again").click()
    expect(page.locator("#status")).to_have_text(f"Verification email sent to {address}.")
    replaced, link = _links_from_mail_list(local_api, address, 2)
    assert replaced == first

    page.goto(first)  # the resent link replaced it
    expect(page.locator("#verify-outcome")).to_have_text(
        "Verification failed: Invalid Verification Token (INVALID_VERIFICATION_TOKEN_ERROR)"
    )
    page.goto(link)

    expect(page.locator("#verify-outcome")).to_have_text("Your email address is verified.")
    assert page.url == f"{console.url}/verify"  # the token is dropped from the address bar
    assert client.call("GET", "/users/me", token=token).body["verifiedAt"] is not None
    page.get_by_role("link", name="Go to your account").click()
    expect(page.locator("#verification-state")).to_contain_text("Verified on")
    expect(page.get_by_role("button", name="Send the verification email again")).to_be_hidden()
    console.screenshot("console-account.png")

    page.goto(link)  # single use
    expect(page.locator("#verify-outcome")).to_have_text(
        "Verification failed: Invalid Verification Token (INVALID_VERIFICATION_TOKEN_ERROR)"
    )


def test_the_console_is_static_html_that_never_echoes_the_verification_token(client: Client) -> None:
    reply = client.call("GET", "/console/verify?token=%3Cscript%3Ealert(1)%3C/script%3E")
    headers = {k.lower(): v for k, v in reply.headers.items()}
    assert reply.status == 200
    assert headers["content-type"].startswith("text/html")
    assert headers["cache-control"] == "no-store"
    assert headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "alert(1)" not in reply.body
    assert reply.body == (Path(__file__).resolve().parents[2] / "console" / "index.html").read_text()


def test_a_wrong_password_shows_the_api_error_and_nothing_is_stored(console: Console, client: Client) -> None:
    name, _ = registered(client)
    console.log_in(name, "not the password")
    expect(console.page.get_by_role("alert").first).to_have_text("Invalid Password (INVALID_PASSWORD_ERROR)")
    console.expect_view("login")
    assert console.page.evaluate("sessionStorage.length") == 0
    console.screenshot("console-login.png")


def test_a_login_with_totp_enrolled_is_challenged_and_the_code_gets_in(
    console: Console, client: Client
) -> None:
    name, token = registered(client)
    page = console.page
    console.log_in(name)
    console.expect_view("account")

    console.open("security")
    console.expect_view("security")
    with page.expect_response(lambda r: r.url.endswith("/users/me/2fa/totp") and r.status == 200) as started:
        page.get_by_role("button", name="Set up an authenticator app").click()
        console.confirm_password()
    setup = started.value.json()
    qr = page.get_by_role("img", name="QR code of the authenticator app secret")
    expect(qr).to_be_visible()
    assert str(qr.get_attribute("src")).startswith("data:image/gif;base64,")
    expect(page.locator("#totp-secret")).to_have_text(setup["secret"])
    assert setup["uri"].startswith("otpauth://totp/")
    console.screenshot("console-2fa.png", full_page=True)
    totp = pyotp.TOTP(setup["secret"])
    page.get_by_label("Code from the app").fill(totp.now())
    page.get_by_role("button", name="Confirm").click()

    expect(page.locator("#factors-list")).to_contain_text("Authenticator app")
    codes = page.locator("#backup-list code").all_inner_texts()
    assert len(codes) == 10
    factors = client.call("GET", "/users/me/2fa", token=token).body
    assert [f["type"] for f in factors["items"]] == ["totp"]

    logged_in = console.session_token()
    page.get_by_role("button", name="Log out").click()
    console.expect_view("login")
    expect(page.locator("#status")).to_have_text("Logged out.")
    assert client.call("GET", "/users/me", token=logged_in).status == 401  # revoked, not only forgotten
    assert page.evaluate("sessionStorage.length") == 0
    console.log_in(name)
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name="Second factor")).to_be_visible()
    expect(dialog.get_by_role("radio")).to_have_count(2)  # totp, and backup while codes remain
    dialog.locator("#confirm-code").fill(totp_reference.wrong_code(totp.secret, time.time(), steps=2))
    dialog.get_by_role("button", name="Continue").click()
    expect(dialog.get_by_role("alert")).to_contain_text("INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    console.screenshot("console-login-challenge.png")
    console.answer_code("totp", _next_code(totp))
    console.expect_view("account")
    assert client.call("GET", "/users/me", token=console.session_token()).status == 200

    # Removing the factor asks again: the password, then a second factor (a backup code here).
    console.open("security")
    page.get_by_role("button", name="Remove Authenticator app").click()
    console.confirm_password()
    console.answer_code("backup", codes[0])
    expect(console.page.locator("#status")).to_contain_text("removed")
    expect(page.locator("#factors-list")).to_contain_text("None yet")
    assert client.call("GET", "/users/me/2fa", token=token).body["count"] == 0


def test_a_security_key_enrolled_through_the_virtual_authenticator_answers_the_login_challenge(
    console: Console, client: Client
) -> None:
    name, token = registered(client)
    page = console.page
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    # A USB security key that keeps no credential of its own: the login page's passkey autofill
    # finds nothing on it (tests/e2e/test_console_passkeys.py covers passkeys).
    authenticator = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "usb",
                "hasResidentKey": False,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )["authenticatorId"]
    console.log_in(name)
    console.expect_view("account")
    console.open("security")
    console.expect_view("security")
    page.get_by_role("region", name="Passkeys and security keys").get_by_label("Name").fill("Desk key")
    page.get_by_role("button", name="Add a security key").click()
    console.confirm_password()

    expect(page.locator("#status")).to_contain_text('Security key "Desk key" added.')
    expect(page.locator("#backup-list code")).to_have_count(10)
    factors = client.call("GET", "/users/me/2fa", token=token).body
    listed = [(f["type"], f["name"], f["passkey"]) for f in factors["items"]]
    assert listed == [("webauthn", "Desk key", False)]
    credentials = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert len(credentials) == 1

    page.get_by_role("button", name="Log out").click()
    console.log_in(name)
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("radio", name="Passkey or security key").check()
    dialog.get_by_role("button", name="Use passkey").click()

    console.expect_view("account")
    assert client.call("GET", "/users/me", token=console.session_token()).status == 200
    used = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert used[0]["signCount"] > credentials[0]["signCount"]  # the key really signed the login


def test_a_revoked_session_is_gone_from_the_list_and_its_token_is_refused(
    console: Console, client: Client
) -> None:
    name, first = registered(client)
    other = client.call(
        "POST",
        "/login",
        {"username": name, "password": PASSWORD},
        headers={"X-Session-Name": "Other laptop"},
        ip=new_ip(),
    )
    assert other.status == 201, other.body
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    console.open("sessions")
    console.expect_view("sessions")
    rows = page.locator("#sessions-table tbody tr")
    expect(rows).to_have_count(3)
    expect(page.get_by_text("This session")).to_have_count(1)
    console.screenshot("console-sessions.png")

    page.get_by_role("button", name="Revoke Other laptop").click()

    expect(page.locator("#status")).to_have_text('Session "Other laptop" revoked.')
    expect(rows).to_have_count(2)
    expect(page.get_by_role("cell", name="Other laptop")).to_have_count(0)
    refused = client.call("GET", "/users/me", token=str(other.body["token"]))
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")
    assert client.call("GET", "/users/me", token=first).status == 200

    page.get_by_role("button", name="Revoke all other sessions").click()
    expect(page.locator("#status")).to_have_text("1 other sessions revoked.")
    expect(rows).to_have_count(1)
    assert client.call("GET", "/users/me", token=first).status == 401
    mine = client.call("GET", "/users/me/sessions", token=console.session_token())
    assert mine.body["count"] == 1

    # Revoked from elsewhere, the console's own session ends at its next request.
    assert client.call("DELETE", "/users/me/sessions/me", token=console.session_token()).status == 200
    page.get_by_role("link", name="Account").click()
    console.expect_view("login")
    expect(page.locator("#error")).to_have_text("Your session has ended: please log in again.")
    assert page.evaluate("sessionStorage.length") == 0


def test_a_scoped_session_token_is_shown_once_and_works_for_its_scope_only(
    console: Console, client: Client
) -> None:
    name, _ = registered(client)
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    console.open("keys")
    console.expect_view("keys")
    expect(page.get_by_role("checkbox", name="STAFF_READ_ACCOUNTS")).to_have_count(0)  # not staff
    page.get_by_label("Name").fill("Reader")
    page.get_by_role("checkbox", name="ACCOUNT_READ").check()
    page.get_by_role("button", name="Create API key").click()
    console.confirm_password()

    shown = page.get_by_label("API key token")
    expect(shown).to_be_visible()
    scoped = shown.input_value()
    assert scoped
    console.screenshot("console-keys.png", full_page=True)
    stored = page.evaluate("JSON.stringify([sessionStorage, localStorage, location.href])")
    assert scoped not in stored  # kept only in the field on screen
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == scoped
    page.get_by_role("button", name="I have copied it").click()
    expect(shown).to_be_hidden()
    assert shown.input_value() == ""

    me = client.call("GET", "/users/me", token=scoped)
    assert (me.status, me.body["username"]) == (200, name)
    outside = client.call("GET", "/users/me/sessions", token=scoped)
    assert (outside.status, outside.body["code"]) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")

    console.open("sessions")
    reader = page.locator("#sessions-table tbody tr", has_text="Reader")
    expect(reader).to_contain_text("API key: ACCOUNT_READ")
    console.open("keys")
    expect(page.get_by_label("API key token")).to_be_hidden()  # shown once, never again


def test_backup_codes_regenerate_and_the_old_ones_stop_working(console: Console, client: Client) -> None:
    name, token = registered(client)
    totp, old = _enrol_totp(client, token)
    page = console.page
    console.log_in(name)
    console.answer_code("backup", old[0])  # a backup code answers the login challenge
    console.expect_view("account")

    console.open("security")
    console.expect_view("security")
    page.get_by_role("button", name="Generate new backup codes").click()
    console.confirm_password()
    console.answer_code("totp", _next_code(totp))
    expect(page.locator("#status")).to_have_text("New backup codes made: the old ones no longer work.")
    new = page.locator("#backup-list code").all_inner_texts()
    assert len(new) == 10
    assert not set(new) & set(old)
    console.screenshot("console-backup-codes.png", full_page=True)
    page.get_by_role("button", name="I have saved them").click()
    expect(page.locator("#backup-codes")).to_be_hidden()

    status, body = _api_login(client, name, {"type": "backup", "code": old[1]})
    assert (status, body["code"]) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    status, body = _api_login(client, name, {"type": "backup", "code": new[0]})
    assert status == 201, body


def test_the_console_fits_a_phone_screen(console: Console, client: Client) -> None:
    name, _ = registered(client)
    page = console.page
    page.set_viewport_size({"width": 390, "height": 844})
    console.log_in(name)
    console.expect_view("account")
    console.open("sessions")
    console.expect_view("sessions")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at phone width"
    console.screenshot("console-phone.png")


def test_a_forgotten_password_is_reset_through_the_mailed_link_signing_in_and_ending_every_other_session(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, old_session = registered(client)
    address = f"{name}@example.com"
    page = console.page
    _ask_for_recovery(console, address)  # an address names the account as the username does
    (link,) = _links_from_mail_list(local_api, address, 1, RECOVERY_LINK)

    page.goto(link)
    console.expect_view("recover")
    assert page.url == f"{console.url}/recover"
    kept = page.evaluate("JSON.stringify([sessionStorage, localStorage, location.href])")
    assert link.partition("token=")[2] not in kept  # only in the page's script, until it is used
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Repeat the new password").fill("battery stapler")
    page.get_by_role("button", name="Reset password").click()
    expect(page.locator("#error")).to_have_text("The two passwords differ: type the same one twice.")
    assert client.call("GET", "/users/me", token=old_session).status == 200  # nothing was sent
    page.get_by_label("Repeat the new password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Reset password").click()

    # The reset signs the owner in with the session its answer carries (CONTRACT section 14).
    console.expect_view("account")
    expect(page.locator("#status")).to_have_text(
        "Your password was reset and you are signed in. Every other session was signed out."
    )
    assert client.call("GET", "/users/me", token=console.session_token()).body["username"] == name
    refused = client.call("GET", "/users/me", token=old_session)
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")
    assert _login_status(client, name, PASSWORD) == (401, "INVALID_PASSWORD_ERROR")
    assert _login_status(client, name, NEW_PASSWORD) == (201, None)


def test_a_reset_of_an_account_with_totp_asks_for_the_code_and_a_wrong_one_keeps_the_link(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, old_session = registered(client)
    totp, _ = _enrol_totp(client, old_session)
    page = console.page
    _ask_for_recovery(console, name)
    (link,) = _links_from_mail_list(local_api, f"{name}@example.com", 1, RECOVERY_LINK)
    _choose_new_password(console, link)

    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name="Second factor")).to_be_visible()
    expect(dialog.get_by_role("radio")).to_have_count(2)  # totp, and backup codes
    console.screenshot("console-recover-challenge.png")
    wrong = totp_reference.wrong_code(totp.secret, time.time(), steps=2)
    console.answer_code("totp", wrong)
    expect(dialog.get_by_role("alert")).to_contain_text("INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    # Nothing changed yet: the old password still gets as far as the second factor.
    assert _login_status(client, name, PASSWORD) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    assert client.call("GET", "/users/me", token=old_session).status == 200

    console.answer_code("totp", _next_code(totp))  # the same link, still good after a wrong answer
    console.expect_view("account")
    expect(page.locator("#status")).to_contain_text("Your password was reset and you are signed in.")
    expect(dialog).to_be_hidden()
    assert client.call("GET", "/users/me", token=console.session_token()).body["username"] == name
    assert client.call("GET", "/users/me", token=old_session).status == 401
    assert _login_status(client, name, PASSWORD) == (401, "INVALID_PASSWORD_ERROR")
    assert _login_status(client, name, NEW_PASSWORD) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")


def test_the_forgot_page_says_the_same_for_an_unknown_name_and_a_real_one_and_explains_the_limit(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _ = registered(client)
    page = console.page
    console.open("forgot")
    console.expect_view("forgot")
    seen = []
    for asked in (new_name("nobody"), name):
        page.get_by_label("Username or email").fill(asked)
        with page.expect_response(lambda r: r.url.endswith("/users/recover")) as answered:
            page.get_by_role("button", name="Send the link").click()
        expect(page.locator("#status")).to_have_text(RECOVERY_SENT)
        expect(page.locator("#error")).to_be_empty()
        reply = answered.value
        seen.append((reply.status, reply.json(), page.locator("body").inner_text()))
    console.screenshot("console-forgot.png")
    assert seen[0] == seen[1]
    assert seen[0][:2] == (
        201,
        {"code": "SEND_RECOVERY_EMAIL_SUCCESS", "message": "Recovery Email Successfully Sent"},
    )
    _links_from_mail_list(local_api, f"{name}@example.com", 1, RECOVERY_LINK)  # only the real one has mail

    # The limit is the network's, whatever the name: past it, the page says so and when to come back.
    for _ in range(3):
        page.get_by_label("Username or email").fill(new_name("nobody"))
        page.get_by_role("button", name="Send the link").click()
        expect(page.locator("#status")).to_have_text(RECOVERY_SENT)
    page.get_by_role("button", name="Send the link").click()
    expect(page.locator("#error")).to_have_text(
        re.compile(r"Too many recovery requests from your network: try again in \d+ minutes\.")
    )
    expect(page.locator("#status")).to_be_empty()


def test_a_used_or_missing_recovery_link_says_it_cannot_work_and_leads_to_a_new_one(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    name, _ = registered(client)
    assert client.call("POST", "/users/recover", {"username": name}, ip=new_ip()).status == 201
    (link,) = _links_from_mail_list(local_api, f"{name}@example.com", 1, RECOVERY_LINK)
    body = {
        "token": link.partition("token=")[2],
        "newPassword": NEW_PASSWORD,
        "confirmNewPassword": NEW_PASSWORD,
    }
    assert client.call("PUT", "/users/recover", body, ip=new_ip()).status == 200
    page = console.page

    _choose_new_password(console, link, "a third password")
    outcome = page.locator("#recover-outcome")
    expect(outcome).to_contain_text("This recovery link is invalid or expired.")
    expect(page.locator("#recover-form")).to_be_hidden()
    assert _login_status(client, name, NEW_PASSWORD) == (201, None)  # the used link changed nothing
    outcome.get_by_role("link", name="Ask for a new link").click()
    console.expect_view("forgot")

    console.open("recover")  # no token at all: nothing to send
    console.expect_view("recover")
    expect(outcome).to_contain_text("This page needs the link from the recovery email")
    expect(page.locator("#recover-form")).to_be_hidden()


def _lock_logins(client: Client, name: str) -> None:
    """What someone who knows only the username can do: eleven wrong passwords from addresses that
    each stay under their own limit lock the account's logins (CONTRACT section 8)."""
    for n in range(10):
        assert client.login(name, f"a guess {n}").status == 401
    assert client.login(name).status == 429


def test_a_browser_that_signed_in_before_signs_in_again_through_a_login_lock_and_a_new_one_does_not(
    console: Console, client: Client, browser: Browser, local_api: LocalApiProcess
) -> None:
    name, _ = registered(client)
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    page.get_by_role("button", name="Log out").click()
    console.expect_view("login")
    _lock_logins(client, name)

    console.log_in(name, open_page=False)

    console.expect_view("account")
    assert client.call("GET", "/users/me", token=console.session_token()).status == 200
    with console_tab(browser, local_api) as elsewhere:  # no device kept: the lock holds
        elsewhere.log_in(name)
        expect(elsewhere.page.get_by_role("alert").first).to_contain_text("RATELIMITED_ERROR")
        assert elsewhere.page.evaluate("sessionStorage.length") == 0
