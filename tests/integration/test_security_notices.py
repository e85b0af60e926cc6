"""Security notices (CONTRACT section 14) through the handlers on moto: every change the contract
lists mails its user in the change's own transaction, saying what, when and by whom (IP address and
device for the user's own changes), with user values escaped in the HTML and no link; a change that
fails or changes nothing tells nobody."""

from __future__ import annotations

import html
import re
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters.items import from_item
from tests.integration.conftest import NOW, Api, Clock, Faults, Stack
from tests.integration.test_staff_accounts import Staff, staff  # noqa: F401 (the fixture)

PASSWORD = "correct horse"
NEW_PASSWORD = "battery staple"
IP = "203.0.113.77"
DEVICE = 'Laptop <b>"Ada"</b>'
URL = re.compile(r"https?://|www\.", re.IGNORECASE)


class Owner:
    """A user whose first session is named ``DEVICE``, making reverified changes from ``IP``."""

    def __init__(self, api: Api, frozen: Clock, name: str = "alice") -> None:
        self.api, self.frozen, self.name = api, frozen, name
        reply = api.call(
            "POST",
            "/register",
            {"username": name, "email": f"{name}@example.com", "password": PASSWORD},
            headers={"x-session-name": DEVICE},
        )
        assert reply.status == 201, reply.body
        self.token = str(reply.body["token"])
        self.id = self.token.split(".", maxsplit=1)[0]
        self.totp: pyotp.TOTP | None = None
        self.password = PASSWORD

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.api.call(method, path, body, token=self.token, ip=IP)

    def reverified(self, method: str, path: str, **body: Any) -> Any:
        """The request with the password, then (with a factor) the TOTP answer to its challenge."""
        first = self.call(method, path, {**body, "password": self.password})
        if first.status != 401 or first.body.get("code") != "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR":
            return first
        assert self.totp is not None
        self.frozen.now += 30  # a code (time step) is accepted once
        answer = {"token": first.body["token"], "type": "totp", "code": self.totp.at(self.frozen.now)}
        return self.call(method, path, {**body, "2fa": answer})

    def enrol_totp(self, name: str = "Phone") -> dict[str, Any]:
        setup = self.reverified("POST", "/users/me/2fa/totp")
        assert setup.status == 200, setup.body
        self.totp = pyotp.TOTP(setup.body["secret"])
        confirm = {"token": setup.body["token"], "name": name, "code": self.totp.at(self.frozen.now)}
        enrolled = self.call("POST", "/users/me/2fa/totp/confirm", confirm)
        assert enrolled.status == 201, enrolled.body
        return dict(enrolled.body)


@pytest.fixture
def owner(api: Api, frozen: Clock) -> Owner:
    return Owner(api, frozen)


def notices(stack: Stack, kind: str | None = None) -> list[dict[str, Any]]:
    """The notices in the outbox (of ``kind``), oldest first."""
    queued = sorted((from_item(i) for i in stack.messages()), key=lambda m: m["id"])
    return [m for m in queued if m["kind"].startswith("notice-") and kind in (None, m["kind"])]


def only_notice(stack: Stack, kind: str) -> dict[str, Any]:
    found = notices(stack, f"notice-{kind}")
    assert len(found) == 1, [m["kind"] for m in notices(stack)]
    return found[0]


def assert_told_by_the_user(message: dict[str, Any]) -> None:
    """From which IP and device, in the text as typed and in the HTML escaped; no link anywhere."""
    assert f'By: you, from IP address {IP}, device "{DEVICE}".' in message["text"]
    assert html.escape(DEVICE) in message["html"]
    assert "<b>" not in message["html"]
    assert not URL.search(message["text"])
    assert not URL.search(message["html"])


def test_a_password_change_tells_the_user_when_and_from_which_ip_and_device(
    api: Api, stack: Stack, frozen: Clock, owner: Owner
) -> None:
    frozen.now = NOW + 60
    changed = owner.reverified(
        "PUT", "/users/me/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )

    assert changed.status == 200, changed.body
    message = only_notice(stack, "password-changed")
    assert (message["to"], message["subject"]) == ("alice@example.com", "Your password was changed")
    assert "When: 2027-01-15T08:01:00.250Z" in message["text"]
    assert "reset your password" in message["text"]
    assert_told_by_the_user(message)
    [sent] = [m for m in stack.emails if m["subject"] == "Your password was changed"]
    assert sent["to"] == ["alice@example.com"]


def test_an_address_change_tells_the_old_address_naming_the_new_one_masked(
    api: Api, stack: Stack, owner: Owner
) -> None:
    changed = owner.reverified("PUT", "/users/me/email", email="ada.lovelace@new.example")

    assert changed.status == 200, changed.body
    message = only_notice(stack, "email-changed")
    assert message["to"] == "alice@example.com"
    assert "New address: a***@new.example" in message["text"]
    assert "ada.lovelace" not in message["text"] + message["html"]
    assert_told_by_the_user(message)


def test_factors_added_and_removed_and_backup_codes_made_anew_are_each_told(
    api: Api, stack: Stack, owner: Owner
) -> None:
    owner.enrol_totp(name="<script>x</script>")
    added = only_notice(stack, "factor-added")
    assert 'Authenticator app "<script>x</script>"' in added["text"]
    assert "&lt;script&gt;x&lt;/script&gt;" in added["html"]
    assert "<script>" not in added["html"]
    assert_told_by_the_user(added)

    assert owner.reverified("POST", "/users/me/2fa/backup").status == 201
    assert_told_by_the_user(only_notice(stack, "backup-codes"))

    removed = owner.reverified("DELETE", "/users/me/2fa/all")
    assert (removed.status, removed.body["count"]) == (200, 1)
    message = only_notice(stack, "factor-removed")
    assert 'Authenticator app "<script>x</script>"' in message["text"]
    assert "backup codes" in message["text"]  # they went with the last factor
    assert_told_by_the_user(message)


def test_a_scoped_session_is_told_with_its_name_and_scopes(api: Api, stack: Stack, owner: Owner) -> None:
    created = owner.reverified(
        "POST", "/users/me/sessions", name="uploader <i>", permissionFlags=4 | 2, longLived=True
    )

    assert created.status == 201, created.body
    message = only_notice(stack, "api-key-created")
    assert 'Name: "uploader <i>"' in message["text"]
    assert "Scopes: UPLOAD_FILE, ACCOUNT_READ" in message["text"]
    assert f"Expires: {created.body['exp']}" not in message["text"]  # a readable time, not Unix seconds
    assert "Expires: 2037-01-12T08:00:00.000Z" in message["text"]
    assert "&lt;i&gt;" in message["html"]
    assert created.body["token"] not in message["text"] + message["html"]  # never the key itself
    assert_told_by_the_user(message)


def test_staff_changes_are_told_as_made_by_staff(api: Api, stack: Stack, staff: Staff, owner: Owner) -> None:  # noqa: F811
    owner.enrol_totp()
    before = len(notices(stack))

    assert staff.reverified("PUT", f"/users/{owner.id}/staff").status == 200
    assert staff.reverified("PUT", f"/users/{owner.id}/staff").status == 200  # no change, no notice
    assert staff.reverified("DELETE", f"/users/{owner.id}/staff").status == 200
    reply = staff.reverified(
        "PUT", f"/users/{owner.id}/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )
    assert reply.status == 200, reply.body
    assert staff.reverified("DELETE", f"/users/{owner.id}/2fa/all").status == 200

    told = notices(stack)[before:]
    assert [m["kind"] for m in told] == [
        "notice-staff-granted",
        "notice-staff-removed",
        "notice-password-changed",
        "notice-factor-removed",
    ]
    assert all(m["to"] == "alice@example.com" for m in told)
    assert all("By: a member of our staff." in m["text"] for m in told)
    assert all(IP not in m["text"] for m in told)


def test_a_change_that_fails_tells_nobody_and_one_that_lands_after_a_fault_tells_once(
    api: Api, stack: Stack, faults: Faults, owner: Owner
) -> None:
    wrong = owner.call(
        "PUT",
        "/users/me/password",
        {"password": "wrong password", "newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD},
    )
    assert wrong.status == 401
    faults.fail("dynamodb", "TransactWriteItems", "InternalServerError", 500, times=1)
    failed = owner.reverified(
        "PUT", "/users/me/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )
    assert failed.status == 500
    assert notices(stack) == []
    assert api.login("alice", PASSWORD, ip="198.51.100.90").status == 201  # nothing changed

    faults.clear()
    retried = owner.reverified(
        "PUT", "/users/me/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )
    assert retried.status == 200, retried.body
    assert [m["kind"] for m in notices(stack)] == ["notice-password-changed"]
