"""Recovery and the login lock through the Auth function's handler on moto (CONTRACT sections 8 and
14): someone who knows only a username locks logins, and the owner still gets back in through the
mailed link and their second factor, signed in at once, the lock cleared."""

from __future__ import annotations

from typing import Any

import pyotp
import pytest

from nimbus_core.adapters.users import DynamoUsers
from tests import totp_reference
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_recovery import _mailed_token, _recover

PASSWORD = "correct horse"
NEW_PASSWORD = "a brand new password"


def _lock_logins(api: Api, username: str = "alice") -> None:
    """Ten wrong passwords at login from rotating addresses: the per-account login lock."""
    for n in range(10):
        assert api.login(username, f"a guess {n}", ip=f"192.0.2.{n + 10}").status == 401
    locked = api.login(username, PASSWORD, ip="192.0.2.200")
    assert (locked.status, locked.body["code"]) == (429, "RATELIMITED_ERROR")


def _enrol_totp(api: Api, session: str, frozen: Clock) -> tuple[str, list[str]]:
    """A TOTP factor enrolled through the API: its seed and the first backup codes."""
    setup = api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=session).body
    confirm = {"token": setup["token"], "name": "Phone", "code": pyotp.TOTP(setup["secret"]).at(frozen.now)}
    confirmed = api.call("POST", "/users/me/2fa/totp/confirm", confirm, token=session)
    assert confirmed.status == 201, confirmed.body
    return setup["secret"], confirmed.body["codes"]


def _reset(api: Api, token: str, answer: Any = None, ip: str = "198.51.100.30") -> Any:
    body = {"token": token, "newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD}
    if answer is not None:
        body["2fa"] = answer
    return api.call("PUT", "/users/recover", body, ip=ip, headers={"X-Session-Name": "Recovered laptop"})


def _auth_failures(stack: Stack, session: str) -> int:
    user = DynamoUsers(stack.dynamodb, stack.table("UsersTable")).get(session.partition(".")[0])
    assert user is not None
    return user.auth_failures


@pytest.mark.parametrize("kind", ["totp", "backup"])
def test_a_locked_owner_recovers_with_a_second_factor_and_is_signed_in(
    api: Api, stack: Stack, frozen: Clock, kind: str
) -> None:
    old_session = api.register("alice").body["token"]
    secret, codes = _enrol_totp(api, old_session, frozen)
    _lock_logins(api)
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")

    challenged = _reset(api, token)  # the lock refuses no part of a recovery
    frozen.now += 30
    code = pyotp.TOTP(secret).at(frozen.now) if kind == "totp" else codes[0]
    reply = _reset(api, token, {"token": challenged.body.get("token"), "type": kind, "code": code})

    assert (challenged.status, challenged.body["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    assert reply.status == 200, reply.body
    assert set(reply.body) == {"code", "message", "token", "exp", "device"}
    assert (reply.body["code"], reply.body["message"]) == (
        "RESET_PASSWORD_SUCCESS",
        "Password Successfully Reset",
    )
    assert reply.body["exp"] == int(frozen.now) + 24 * 3600  # a normal session, 24 hours
    me = api.call("GET", "/users/me/sessions/me", token=reply.body["token"])
    assert me.status == 200, me.body
    assert (me.body["name"], me.body["permissionFlags"]) == ("Recovered laptop", None)
    assert api.call("GET", "/users/me", token=old_session).status == 401  # every other session revoked
    assert _auth_failures(stack, reply.body["token"]) == 0  # the lock cleared
    login = api.login("alice", NEW_PASSWORD, ip="192.0.2.201")  # open again at once: challenged
    assert (login.status, login.body["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")


def test_a_locked_owner_without_a_factor_recovers_and_logs_in_at_once(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    api.register("alice")
    _lock_logins(api)
    assert _recover(api, "alice").status == 201

    reply = _reset(api, _mailed_token(stack, "alice@example.com"))

    assert reply.status == 200, reply.body
    assert api.call("GET", "/users/me", token=reply.body["token"]).body["username"] == "alice"
    assert api.login("alice", NEW_PASSWORD, ip="192.0.2.201").status == 201


def test_wrong_answers_at_recovery_never_meet_nor_feed_the_login_lock_and_void_the_token(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    session = api.register("alice").body["token"]
    secret, _ = _enrol_totp(api, session, frozen)
    assert _recover(api, "alice").status == 201
    token = _mailed_token(stack, "alice@example.com")
    wrong = totp_reference.wrong_code(secret, frozen.now)
    statuses = []
    for n in range(2):  # two challenges' worth, each answer from its own address
        challenge = _reset(api, token, ip=f"198.51.100.{40 + n}").body["token"]
        answer = {"token": challenge, "type": "totp", "code": wrong}
        statuses += [_reset(api, token, answer, ip=f"198.51.100.{50 + 5 * n + i}").status for i in range(5)]

    void = _reset(api, token, ip="198.51.100.70")

    assert statuses == [401] * 10  # never 429: the login lock does not hold recovery
    assert _auth_failures(stack, session) == 0  # nor is it fed
    assert (void.status, void.body["code"]) == (400, "INVALID_RECOVERY_TOKEN_ERROR")
