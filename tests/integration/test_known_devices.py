"""Known devices through the Auth function's handler on moto (CONTRACT section 8, OWASP's device
cookies): someone who knows only a username can lock an account's logins, but a login that presents
the device token an earlier sign-in answered still gets in; its wrong answers are limited on the
device; a token of another account, a made-up one or a revoked one changes nothing."""

from __future__ import annotations

import hashlib
from typing import Any

import pyotp

from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.domain.models import KnownDevice, iso_to_epoch
from tests import totp_reference
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_recovery import _mailed_token, _recover
from tests.integration.test_recovery_lock import NEW_PASSWORD, PASSWORD, _auth_failures, _enrol_totp, _reset

OWNER_IP = "198.51.100.40"


def _lock_logins(api: Api, password: str = PASSWORD) -> None:
    """Ten wrong passwords at login from rotating addresses: the per-account login lock."""
    for n in range(10):
        assert api.login("alice", f"a guess {n}", ip=f"192.0.2.{n + 10}").status == 401
    locked = api.login("alice", password, ip="192.0.2.200")
    assert (locked.status, locked.body["code"]) == (429, "RATELIMITED_ERROR")


def _device(stack: Stack, token: str) -> KnownDevice | None:
    tokens = DynamoTokens(stack.dynamodb, stack.table("TokensTable"), stack.table("UsersTable"))
    return tokens.get_device(hashlib.sha256(token.encode()).hexdigest())


def _registered(api: Api, username: str = "alice") -> tuple[str, str]:
    """A new account: its session token and the device token its registration answered."""
    reply = api.register(username=username, ip=f"198.51.100.{len(username)}")
    assert reply.status == 201, reply.body
    return reply.body["token"], reply.body["device"]


def _answer_without(reply: Any) -> tuple[int, Any, str | None]:
    return reply.status, reply.body, reply.headers.get("Retry-After")


def test_a_locked_accounts_owner_logs_in_with_the_device_an_earlier_sign_in_answered(
    api: Api, stack: Stack
) -> None:
    session, device = _registered(api)
    _lock_logins(api)

    reply = api.login("alice", PASSWORD, ip=OWNER_IP, device=device)

    assert reply.status == 201, reply.body
    renewed = reply.body["device"]
    assert renewed != device
    # Stored hashed, bound to the account, for 180 days; the one it replaced is gone.
    stored = _device(stack, renewed)
    assert stored is not None
    assert stored.user_id == session.partition(".")[0]
    assert stored.exp == int(iso_to_epoch(stored.created_at)) + 180 * 86400
    assert renewed not in str(stack.items("TokensTable"))
    assert _device(stack, device) is None
    # The lock still holds every login without the device.
    assert api.login("alice", PASSWORD, ip="192.0.2.201").status == 429


def test_another_accounts_device_a_made_up_one_or_a_used_one_changes_nothing_in_the_answer(api: Api) -> None:
    _, bobs = _registered(api, "bob")
    _, device = _registered(api)
    assert api.login("alice", PASSWORD, ip=OWNER_IP, device=device).status == 201  # replaced: now used
    _lock_logins(api)

    without = _answer_without(api.login("alice", PASSWORD, ip="192.0.2.202"))
    assert without[0] == 429
    for presented in (bobs, "made-up-" + "x" * 35, device, "", "y" * 128):
        reply = api.login("alice", PASSWORD, ip="192.0.2.202", device=presented)
        assert _answer_without(reply)[:2] == without[:2], presented
    too_long = api.login("alice", PASSWORD, ip="192.0.2.203", device="z" * 129)
    assert (too_long.status, too_long.body["code"]) == (400, "INVALID_FIELDS_ERROR")


def test_wrong_passwords_with_a_device_count_on_it_not_on_the_account_and_five_use_it_up(
    api: Api, stack: Stack
) -> None:
    session, device = _registered(api)

    for n in range(5):
        reply = api.login("alice", f"a guess {n}", ip=f"192.0.2.{n + 40}", device=device)
        assert (reply.status, reply.body["code"]) == (401, "INVALID_PASSWORD_ERROR")

    assert _auth_failures(stack, session) == 0
    stored = _device(stack, device)
    assert stored is not None
    assert stored.failures == 5
    # Used up: the device no longer lifts the lock, so a locked account refuses it.
    _lock_logins(api)
    assert api.login("alice", PASSWORD, ip=OWNER_IP, device=device).status == 429
    # A wrong password with it counts on the account again (it was not before).
    assert api.login("alice", "a guess", ip="192.0.2.60", device=device).status == 429


def test_signing_out_everywhere_and_a_password_reset_revoke_every_device(api: Api, stack: Stack) -> None:
    session, device = _registered(api)
    assert api.call("DELETE", "/users/me/sessions/all", token=session).status == 200
    _lock_logins(api)
    assert api.login("alice", PASSWORD, ip=OWNER_IP, device=device).status == 429

    # The reset signs in and answers a new device, which the next lock does not hold.
    _recover(api, "alice")
    reset = _reset(api, _mailed_token(stack, "alice@example.com"))
    assert reset.status == 200, reset.body
    _lock_logins(api, NEW_PASSWORD)
    assert api.login("alice", NEW_PASSWORD, ip=OWNER_IP, device=reset.body["device"]).status == 201


def test_a_device_past_its_180_days_is_ignored(api: Api, frozen: Clock) -> None:
    _, device = _registered(api)
    _lock_logins(api)
    frozen.now += 180 * 86400 + 1
    _lock_logins(api)  # the first lock's window is long over
    assert api.login("alice", PASSWORD, ip=OWNER_IP, device=device).status == 429


def test_a_device_takes_a_locked_owner_through_the_second_factor_and_its_wrong_codes_count_on_it(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    session, device = _registered(api)
    secret, _ = _enrol_totp(api, session, frozen)
    _lock_logins(api)

    challenged = api.login("alice", PASSWORD, ip=OWNER_IP, device=device)
    assert (challenged.status, challenged.body["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    token = challenged.body["token"]
    wrong = {"token": token, "type": "totp", "code": totp_reference.wrong_code(secret, frozen.now)}
    assert api.call("POST", "/login", {"2fa": wrong, "device": device}, ip=OWNER_IP).status == 401
    failures = _auth_failures(stack, session)
    stored = _device(stack, device)
    assert stored is not None
    assert stored.failures == 1
    frozen.now += 30  # the enrolment used the current code
    right = {"token": token, "type": "totp", "code": pyotp.TOTP(secret).at(frozen.now)}

    reply = api.call("POST", "/login", {"2fa": right, "device": device}, ip=OWNER_IP)

    assert reply.status == 201, reply.body
    assert reply.body["device"] != device
    assert _auth_failures(stack, session) == failures  # the lock stays for everyone else
    # Without the device the same answer meets the lock.
    again = api.login("alice", PASSWORD, ip="192.0.2.204")
    assert again.status == 429
