"""Passkeys in the account console (CONTRACT section 16), in headless Chromium against the real local
API: a passkey added in the security view, signing in with it alone ("Sign in with a passkey", no
username typed), reverifying with it instead of the password, a security key that stays a second
factor, and the username field's passkey autofill (conditional mediation).

The authenticator is Chromium's virtual one (the DevTools protocol's WebAuthn domain), set up as a
platform passkey provider is: internal transport, resident keys, user verification that succeeds,
and presence confirmed without a person. Each outcome the page shows is checked through the API and
against the authenticator's own credential list.
"""

from __future__ import annotations

import base64
import os
import re
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from playwright.sync_api import CDPSession, Request, expect

from tests.e2e.browser_tab import Console
from tests.e2e.conftest import Client
from tests.e2e.test_console import registered

pytestmark = pytest.mark.e2e

# A platform authenticator holding passkeys (Windows Hello, iCloud Keychain, Google Password Manager).
PASSKEY_PROVIDER = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}

# Wraps navigator.credentials.get to note each call's mediation, whether its signal was later
# aborted and how it settled, then calls the browser's own: what the page asks for, unchanged.
RECORD_GET = """
(() => {
  const real = navigator.credentials.get.bind(navigator.credentials);
  window.__gets = [];
  navigator.credentials.get = (options) => {
    const seen = { mediation: options.mediation || null, aborted: false, settled: null };
    if (options.signal) options.signal.addEventListener("abort", () => { seen.aborted = true; });
    window.__gets.push(seen);
    const pending = real(options);
    pending.then(() => { seen.settled = "resolved"; }, (error) => { seen.settled = error.name; });
    return pending;
  };
})();
"""

# The page's conditional requests so far (RECORD_GET's notes).
CONDITIONAL = "window.__gets.filter((g) => g.mediation === 'conditional')"


class Authenticator:
    """Chromium's virtual authenticator on a console tab (gone with the tab), and RECORD_GET on the
    tab's pages from the next one opened."""

    def __init__(self, console: Console) -> None:
        self.page = console.page
        self.page.add_init_script(RECORD_GET)
        self.cdp: CDPSession = self.page.context.new_cdp_session(self.page)
        self.cdp.send("WebAuthn.enable")
        added = self.cdp.send("WebAuthn.addVirtualAuthenticator", {"options": PASSKEY_PROVIDER})
        self.id = added["authenticatorId"]

    def credentials(self) -> list[dict[str, Any]]:
        """The credentials it holds, as DevTools lists them (isResidentCredential, signCount...)."""
        listed = self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.id})
        return list(listed["credentials"])

    def take_out(self) -> list[dict[str, Any]]:
        """Every credential removed (private keys included in what is returned), to put back later."""
        held = self.credentials()
        self.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": self.id})
        return held

    def put_back(self, credentials: list[dict[str, Any]]) -> None:
        for credential in credentials:
            self.cdp.send("WebAuthn.addCredential", {"authenticatorId": self.id, "credential": credential})

    def plant(self) -> None:
        """A passkey for this site that no account has (a fresh P-256 key, as a platform makes one)."""
        key = ec.generate_private_key(ec.SECP256R1())
        pkcs8 = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
        credential = {
            "credentialId": base64.b64encode(os.urandom(32)).decode(),
            "isResidentCredential": True,
            "rpId": "localhost",
            "privateKey": base64.b64encode(pkcs8).decode(),
            "userHandle": base64.b64encode(b"nobody").decode(),
            "signCount": 0,
        }
        self.cdp.send("WebAuthn.addCredential", {"authenticatorId": self.id, "credential": credential})

    def presence(self, automatic: bool) -> None:
        """Whether the authenticator answers at once (True) or waits for a touch that never comes."""
        self.cdp.send(
            "WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": self.id, "enabled": automatic}
        )


def until(console: Console, script: str, arg: Any = None) -> None:
    """Wait until ``script`` (a function of ``arg``) is true on the page. Playwright's own
    wait_for_function evaluates its predicate with eval, which the console's CSP forbids."""
    deadline = time.monotonic() + 15
    while not console.page.evaluate(script, arg):
        assert time.monotonic() < deadline, f"never true: {script}"
        console.page.wait_for_timeout(50)


def add_key(console: Console, name: str, *, button: str = "Add a passkey") -> None:
    """On the security view of a signed-in tab whose account has no second factor yet: ``button``
    pressed with ``name`` typed, the password given in the dialog, and the key added."""
    page = console.page
    console.open("security")
    console.expect_view("security")
    page.get_by_role("region", name="Passkeys and security keys").get_by_label("Name").fill(name)
    page.get_by_role("button", name=button).click()
    console.confirm_password()
    kind = "Passkey" if button == "Add a passkey" else "Security key"
    expect(page.locator("#status")).to_contain_text(f'{kind} "{name}" added.')


def signed_in_with_a_passkey(client: Client, console: Console) -> tuple[str, str, Authenticator]:
    """A new account, signed in on the tab with its password, with a passkey "Laptop" added in the
    console through the tab's virtual authenticator: (username, first session token, authenticator)."""
    name, token = registered(client)
    authenticator = Authenticator(console)
    console.log_in(name)
    console.expect_view("account")
    add_key(console, "Laptop")
    return name, token, authenticator


def log_out_with_the_keys_away(console: Console, authenticator: Authenticator) -> None:
    """Log out while the authenticator holds nothing, then give its keys back.

    The virtual authenticator answers the login page's conditional request at once with the first
    passkey it holds (no autofill list is shown headless), as if the person had picked it: with the
    keys away that request ends with nothing, so what the test does next is what signs in.
    """
    page = console.page
    held = authenticator.take_out()
    before = page.evaluate(f"{CONDITIONAL}.length")
    page.get_by_role("button", name="Log out").click()
    console.expect_view("login")
    settled = f"(n) => {{ const c = {CONDITIONAL}; return c.length > n && c.at(-1).settled !== null; }}"
    until(console, settled, before)
    authenticator.put_back(held)


def passkey_sign_in(request: Request) -> bool:
    """The second step of POST /login/passkey (the one that carries the authenticator's answer)."""
    return request.url.endswith("/login/passkey") and bool((request.post_data_json or {}).get("response"))


# ------------------------------------------------------------------------------------------ tests


def test_a_passkey_added_in_the_console_signs_in_alone_with_no_username_typed(
    console: Console, client: Client
) -> None:
    name, token, authenticator = signed_in_with_a_passkey(client, console)
    page = console.page
    expect(page.locator("#status")).to_have_text(
        'Passkey "Laptop" added. You can sign in with it alone. Save your backup codes.'
    )
    expect(page.locator("#factors-list")).to_contain_text("Laptop Passkey, added")
    factors = client.call("GET", "/users/me/2fa", token=token).body["items"]
    assert [(f["type"], f["name"], f["passkey"]) for f in factors] == [("webauthn", "Laptop", True)]
    (stored,) = authenticator.credentials()
    assert stored["isResidentCredential"] is True  # discoverable: the authenticator offers it unasked
    console.screenshot("console-passkey-added.png", full_page=True)
    log_out_with_the_keys_away(console, authenticator)

    expect(page.get_by_label("Username or email")).to_have_value("")
    with page.expect_request(passkey_sign_in) as sent:
        page.get_by_role("button", name="Sign in with a passkey").click()

    console.expect_view("account")
    expect(page.locator("#status")).to_have_text("Signed in with your passkey.")
    # No username, no password: the passkey names its account.
    assert set(sent.value.post_data_json or {}) == {"token", "response", "rememberMe"}
    me = client.call("GET", "/users/me", token=console.session_token())
    assert (me.status, me.body["username"]) == (200, name)
    (used,) = authenticator.credentials()
    assert used["signCount"] > stored["signCount"]  # the authenticator really signed the sign-in


def test_the_passkey_picked_from_the_username_fields_autofill_signs_in(
    console: Console, client: Client
) -> None:
    name, _, authenticator = signed_in_with_a_passkey(client, console)
    page = console.page
    (stored,) = authenticator.credentials()

    # Nothing is clicked or typed on the login page: its conditional request gets the passkey.
    with page.expect_request(passkey_sign_in):
        page.get_by_role("button", name="Log out").click()

    console.expect_view("account")
    expect(page.locator("#status")).to_have_text("Signed in with your passkey.")
    assert page.evaluate(f"{CONDITIONAL}.at(-1).settled") == "resolved"
    assert client.call("GET", "/users/me", token=console.session_token()).body["username"] == name
    assert authenticator.credentials()[0]["signCount"] > stored["signCount"]


def test_a_change_is_reverified_with_the_passkey_and_no_password_and_the_passkey_answers_a_login_challenge(
    console: Console, client: Client
) -> None:
    name, token, authenticator = signed_in_with_a_passkey(client, console)
    page = console.page
    console.open("settings")
    console.expect_view("settings")
    address = f"{name}.new@example.com"
    page.get_by_label("New email address").fill(address)
    page.get_by_role("button", name="Change email").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_label("Password")).to_be_visible()  # the password's way stays open
    console.screenshot("console-reverify-passkey.png")
    with page.expect_request(lambda r: r.url.endswith("/users/me/email") and r.method == "PUT") as sent:
        dialog.get_by_role("button", name="Use a passkey").click()

    expect(page.locator("#status")).to_contain_text(f"Your email address is now {address}.")
    expect(dialog).to_be_hidden()
    body = sent.value.post_data_json or {}
    assert "password" not in body
    assert (body["email"], body["2fa"]["type"], sorted(body["2fa"])) == (
        address,
        "webauthn",
        ["response", "token", "type"],
    )
    assert client.call("GET", "/users/me", token=token).body["email"] == address

    # A passkey is a second factor as well: it answers the password login's challenge.
    log_out_with_the_keys_away(console, authenticator)
    console.log_in(name, open_page=False)
    dialog.get_by_role("radio", name="Passkey or security key").check()
    dialog.get_by_role("button", name="Use passkey").click()
    console.expect_view("account")
    expect(page.locator("#status")).to_have_text("Logged in.")


def test_a_removed_passkey_no_longer_signs_in_and_the_page_says_so(console: Console, client: Client) -> None:
    _, token, authenticator = signed_in_with_a_passkey(client, console)
    page = console.page
    page.get_by_role("button", name="I have saved them").click()
    page.get_by_role("button", name="Remove Laptop").click()
    page.get_by_role("dialog").get_by_role("button", name="Use a passkey").click()  # removed by itself
    expect(page.locator("#status")).to_have_text('Second factor "Laptop" removed.')
    assert client.call("GET", "/users/me/2fa", token=token).body["count"] == 0
    assert len(authenticator.credentials()) == 1  # the device keeps it: the API no longer knows it
    log_out_with_the_keys_away(console, authenticator)

    page.get_by_role("button", name="Sign in with a passkey").click()

    expect(page.locator("#error")).to_have_text(
        "That passkey was not accepted: it may have been removed from its account, or the request took "
        "too long. Try again, or log in with your password. (INVALID_SECOND_FACTOR_RESPONSE_ERROR)"
    )
    console.expect_view("login")
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.get_by_role("button", name="Sign in with a passkey")).to_be_enabled()


def test_a_security_key_stays_a_second_factor_and_is_not_offered_for_reverification(
    console: Console, client: Client
) -> None:
    name, token = registered(client)
    authenticator = Authenticator(console)
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    add_key(console, "Desk key", button="Add a security key")
    expect(page.locator("#factors-list")).to_contain_text("Desk key Security key, added")
    factors = client.call("GET", "/users/me/2fa", token=token).body["items"]
    assert [(f["name"], f["passkey"]) for f in factors] == [("Desk key", False)]

    page.get_by_role("button", name="I have saved them").click()
    page.get_by_role("button", name="Generate new backup codes").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_label("Password")).to_be_visible()
    expect(dialog.get_by_role("button", name="Use a passkey")).to_be_hidden()
    dialog.get_by_role("button", name="Cancel").click()
    log_out_with_the_keys_away(console, authenticator)

    # Asked not to be discoverable, the key is not in the passkey list: a passkey sign-in finds
    # nothing to offer, and no session opens.
    assert authenticator.credentials()[0]["isResidentCredential"] is False
    page.get_by_role("button", name="Sign in with a passkey").click()
    expect(page.locator("#error")).to_contain_text("The passkey request was cancelled or timed out.")
    console.expect_view("login")
    assert page.evaluate("sessionStorage.length") == 0


def test_the_login_page_stops_its_autofill_request_on_leaving_and_before_the_button_asks(
    console: Console, client: Client
) -> None:
    page = console.page
    authenticator = Authenticator(console)
    authenticator.plant()
    authenticator.presence(automatic=False)  # the conditional request waits, as it does for a person
    with page.expect_response(lambda r: r.url.endswith("/login/passkey") and r.status == 200) as challenged:
        console.open("login")
    console.expect_view("login")

    expect(page.get_by_label("Username or email")).to_have_attribute("autocomplete", "username webauthn")
    options = challenged.value.json()
    assert set(options) == {"token", "exp", "challenge"}
    asked = options["challenge"]
    assert (asked["allowCredentials"], asked["userVerification"]) == ([], "required")
    until(console, "() => window.__gets.length === 1")
    assert page.evaluate("window.__gets") == [{"mediation": "conditional", "aborted": False, "settled": None}]

    page.get_by_role("link", name="Create one").click()
    console.expect_view("register")
    until(console, "() => window.__gets[0].settled === 'AbortError'")
    assert page.evaluate("window.__gets[0].aborted") is True

    page.get_by_role("link", name="Log in").click()
    console.expect_view("login")
    until(console, "() => window.__gets.length === 2")
    page.get_by_role("button", name="Sign in with a passkey").click()
    until(console, "() => window.__gets.length === 3")
    gets = page.evaluate("window.__gets")
    assert [(g["mediation"], g["aborted"]) for g in gets[1:]] == [("conditional", True), (None, False)]
    expect(page.locator("#error")).to_be_empty()


def test_past_ten_refused_passkeys_from_its_address_the_page_says_when_to_try_again(
    console: Console, client: Client
) -> None:
    for _ in range(10):  # refused answers from the tab's own address, as a script guessing would send
        challenge = client.call("POST", "/login/passkey", {}, ip=console.ip).body
        refused = client.call(
            "POST", "/login/passkey", {"token": challenge["token"], "response": {"id": "x"}}, ip=console.ip
        )
        assert refused.status == 401, refused.body
    page = console.page
    authenticator = Authenticator(console)
    console.open("login")
    console.expect_view("login")
    until(console, f"() => {CONDITIONAL}.length === 1 && {CONDITIONAL}[0].settled !== null")
    authenticator.plant()

    page.get_by_role("button", name="Sign in with a passkey").click()

    expect(page.locator("#error")).to_have_text(
        re.compile(r"Too many tries for now: try again in (\d+ minutes|a minute)\. \(RATELIMITED_ERROR\)")
    )
    console.expect_view("login")


def test_a_session_ended_elsewhere_sends_a_reverified_change_to_the_login_page_without_a_dialog(
    console: Console, client: Client
) -> None:
    name, _ = registered(client)
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    console.open("settings")
    console.expect_view("settings")
    assert client.call("DELETE", "/users/me/sessions/me", token=console.session_token()).status == 200

    page.get_by_label("New email address").fill(f"{name}.new@example.com")
    page.get_by_role("button", name="Change email").click()

    console.expect_view("login")
    expect(page.locator("#error")).to_have_text("Your session has ended: please log in again.")
    expect(page.get_by_role("dialog")).to_be_hidden()
    assert page.url == f"{console.url}/login?next=settings"  # logging in again comes back here
