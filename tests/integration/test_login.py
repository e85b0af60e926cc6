"""POST /login: usernames and emails in any case, sessions, failures, limits, bans and rehashing."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from argon2 import PasswordHasher

from nimbus_core.adapters.items import from_item
from nimbus_core.sessions import passwords
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import NOW, Api, Clock, Stack

NOW_ISO = "2027-01-15T08:00:00.250Z"
DAY = 86400
LOGIN_WINDOW = 5 * 60
ACCOUNT_WINDOW = 15 * 60
ARGON2_CURRENT = "$argon2id$v=19$m=19456,t=2,p=1$"
PASSWORD = "correct horse"
REGISTER_IP = "198.51.100.1"
LOGIN_IP = "203.0.113.5"
PYTEST_DEVICE = "pytest 9 on an unknown OS"

INVALID_USER = {"code": "INVALID_USER_ERROR", "message": "Invalid User"}
INVALID_PASSWORD = {"code": "INVALID_PASSWORD_ERROR", "message": "Invalid Password"}
INVALID_SESSION = {"code": "INVALID_SESSION_ERROR", "message": "Invalid Session"}
BANNED = {"code": "BANNED_ERROR", "message": "Banned"}
RATELIMITED = {"code": "RATELIMITED_ERROR", "message": "You Have Been Ratelimited. Please Try Again Later."}


@pytest.fixture
def alice(api: Api) -> str:
    """A registered user "Alice" <Alice@example.com>; returns the user id."""
    reply = api.register(username="Alice", email="Alice@example.com", password=PASSWORD, ip=REGISTER_IP)
    assert reply.status == 201, reply.body
    user_id: str = reply.body["token"].split(".")[0]
    return user_id


def sessions(stack: Stack) -> dict[str, dict[str, Any]]:
    """Every session item by session id."""
    return {s["sessionId"]: s for s in map(from_item, stack.items("SessionsTable"))}


def user_item(stack: Stack, user_id: str) -> dict[str, Any]:
    item = stack.dynamodb.get_item(TableName=stack.table("UsersTable"), Key={"pk": {"S": f"USER#{user_id}"}})
    return from_item(item["Item"])


def set_user_attribute(stack: Stack, user_id: str, name: str, value: dict[str, Any]) -> None:
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{user_id}"}},
        UpdateExpression="SET #n = :v",
        ExpressionAttributeNames={"#n": name},
        ExpressionAttributeValues={":v": value},
    )


def header(reply: Reply, name: str) -> str | None:
    return next((v for k, v in reply.headers.items() if k.lower() == name.lower()), None)


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


# ---------------------------------------------------------------- success


def test_login_by_username_in_any_case_opens_a_24_hour_session(
    api: Api, stack: Stack, frozen: Clock, alice: str, subtests: pytest.Subtests
) -> None:
    for index, username in enumerate(["Alice", "alice", "ALICE", "aLiCe", "  alice  "]):
        with subtests.test(username=username):
            reply = api.login(username, PASSWORD, ip=f"203.0.113.{index}")

            assert reply.status == 201, reply.body
            assert set(reply.body) == {"token", "exp", "device"}
            assert reply.body["exp"] == int(NOW) + DAY
            user_id, session_id, secret = reply.body["token"].split(".")
            assert user_id == alice
            assert sessions(stack)[session_id] == {
                "userId": alice,
                "sessionId": session_id,
                "secretHash": sha256(secret),
                "userAgent": "pytest/9.2",  # named after it when shown (PYTEST_DEVICE)
                "exp": int(NOW) + DAY,
                "expiresAt": int(NOW) + DAY,
                "usedAt": NOW_ISO,
                "createdAt": NOW_ISO,
                "updatedAt": NOW_ISO,
                "generation": 0,
            }


def test_login_by_email_in_any_case(api: Api, alice: str, subtests: pytest.Subtests) -> None:
    for index, email in enumerate(
        [
            "Alice@example.com",
            "alice@example.com",
            "ALICE@EXAMPLE.COM",
            "alice@Example.Com",
            " alice@example.com ",
        ]
    ):
        with subtests.test(email=email):
            reply = api.login(email, PASSWORD, ip=f"203.0.113.{index}")

            assert reply.status == 201, reply.body
            assert reply.body["token"].split(".")[0] == alice


def test_login_token_reads_the_account_on_get_users_me(api: Api, alice: str) -> None:
    reply = api.login("alice")

    me = api.call("GET", "/users/me", token=reply.body["token"])

    assert me.status == 200, me.body
    assert (me.body["id"], me.body["username"]) == (alice, "Alice")


def test_login_opens_a_new_session_each_time(api: Api, stack: Stack, alice: str) -> None:
    first = api.login("alice")
    second = api.login("alice")

    assert first.status == second.status == 201
    assert first.body["token"] != second.body["token"]
    assert len(sessions(stack)) == 3  # register's, and one per login


@pytest.mark.usefixtures("frozen", "alice")
@pytest.mark.parametrize(("remember_me", "lifetime"), [(True, 30 * DAY), (False, DAY), (None, DAY)])
def test_login_session_lasts_30_days_with_remember_me_else_24_hours(
    api: Api, stack: Stack, remember_me: bool | None, lifetime: int
) -> None:
    reply = api.login("alice", rememberMe=remember_me)

    assert reply.status == 201, reply.body
    assert reply.body["exp"] == int(NOW) + lifetime
    session = sessions(stack)[reply.body["token"].split(".")[1]]
    assert session["exp"] == session["expiresAt"] == int(NOW) + lifetime


def test_login_names_the_session_after_x_session_name(api: Api, stack: Stack, alice: str) -> None:
    reply = api.call(
        "POST",
        "/login",
        {"username": "alice", "password": PASSWORD},
        headers={"X-Session-Name": " My phone "},
    )

    assert reply.status == 201, reply.body
    assert sessions(stack)[reply.body["token"].split(".")[1]]["name"] == "My phone"


def test_login_refuses_an_x_session_name_over_64_characters(api: Api, stack: Stack, alice: str) -> None:
    before = sessions(stack)

    reply = api.call(
        "POST", "/login", {"username": "alice", "password": PASSWORD}, headers={"X-Session-Name": "n" * 65}
    )

    assert reply.status == 400, reply.body
    assert reply.body == {
        "code": "INVALID_FIELDS_ERROR",
        "message": "Invalid Fields",
        "fields": ["X-Session-Name"],
    }
    assert sessions(stack) == before


def test_login_while_logged_in_is_refused_and_an_invalid_token_is_ignored(
    api: Api, stack: Stack, alice: str
) -> None:
    token = api.login("alice", ip="203.0.113.1").body["token"]
    before = sessions(stack)

    for scheme in ("", "Bearer "):
        refused = api.call(
            "POST",
            "/login",
            {"username": "alice", "password": PASSWORD},
            token=scheme + token,
            ip="203.0.113.2",
        )
        assert refused.status == 401, refused.body
        assert refused.body == INVALID_SESSION
    assert sessions(stack) == before

    user_id, session_id, secret = token.split(".")
    for index, invalid in enumerate(["garbage", f"{user_id}.{session_id}.{'x' * len(secret)}"]):
        reply = api.call(
            "POST",
            "/login",
            {"username": "alice", "password": PASSWORD},
            token=invalid,
            ip=f"203.0.113.{10 + index}",
        )
        assert reply.status == 201, reply.body


# ---------------------------------------------------------------- failures


def test_login_with_an_unknown_user_answers_404(api: Api, alice: str, subtests: pytest.Subtests) -> None:
    for index, username in enumerate(
        ["bob", "bob@example.com", "alice@example.org", "not@an@email", "", "a" * 400, "Alice\x00"]
    ):
        with subtests.test(username=username):
            reply = api.login(username, PASSWORD, ip=f"203.0.113.{index}")

            assert reply.status == 404, reply.body
            assert reply.body == INVALID_USER


def test_login_with_a_wrong_password_answers_401(api: Api, stack: Stack, alice: str) -> None:
    before = sessions(stack)

    reply = api.login("alice", "wrong horse")

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_PASSWORD
    assert sessions(stack) == before


def test_login_never_trims_passwords(api: Api, alice: str, subtests: pytest.Subtests) -> None:
    for index, password in enumerate([" correct horse", "correct horse ", "correct  horse", "Correct horse"]):
        with subtests.test(password=password):
            reply = api.login("alice", password, ip=f"203.0.113.{index}")

            assert reply.status == 401, reply.body
            assert reply.body == INVALID_PASSWORD


@pytest.mark.parametrize(
    ("sent", "fields"),
    [
        ({}, ["username", "password"]),
        ({"username": "alice"}, ["password"]),
        ({"username": None, "password": PASSWORD}, ["username"]),
        ({"username": "alice", "password": 12345678}, ["password"]),
        ({"username": "alice", "password": PASSWORD, "rememberMe": "yes"}, ["rememberMe"]),
    ],
)
def test_login_names_missing_or_wrongly_typed_fields(
    api: Api, alice: str, sent: dict[str, Any], fields: list[str]
) -> None:
    reply = api.call("POST", "/login", sent)

    assert reply.status == 400, reply.body
    assert reply.body == {"code": "MISSING_FIELDS_ERROR", "message": "Missing Fields", "fields": fields}


def test_login_refuses_a_body_that_is_not_a_json_object(api: Api, alice: str) -> None:
    for raw in ("not json", "[]", '"alice"', b"\xff"):
        reply = api.call("POST", "/login", raw=raw)
        assert reply.status == 400, (raw, reply.body)
        assert reply.body == {"code": "INVALID_BODY_ERROR", "message": "Invalid Body"}


# ---------------------------------------------------------------- per-IP limit


def test_unknown_users_are_not_counted_by_the_login_limit(api: Api, alice: str) -> None:
    for username in ["nobody", "ghost", "nobody@example.com", "x", "y"]:
        reply = api.login(username, PASSWORD, ip=LOGIN_IP)
        assert reply.status == 404, reply.body
        assert header(reply, "RateLimit-Remaining") == "4"

    reply = api.login("alice", PASSWORD, ip=LOGIN_IP)

    assert reply.status == 201, reply.body
    assert header(reply, "RateLimit-Remaining") == "3"


def test_wrong_passwords_are_counted_4_per_5_minutes_per_ip_then_429(
    api: Api, stack: Stack, frozen: Clock, alice: str
) -> None:
    for remaining in (3, 2, 1, 0):
        reply = api.login("alice", "wrong horse", ip=LOGIN_IP)
        assert reply.status == 401, reply.body
        assert header(reply, "RateLimit-Limit") == "4"
        assert header(reply, "RateLimit-Remaining") == str(remaining)
        assert header(reply, "RateLimit-Reset") == str(LOGIN_WINDOW)
    before = sessions(stack)

    frozen.now = NOW + 30
    limited = api.login("alice", PASSWORD, ip=LOGIN_IP)

    assert limited.status == 429, limited.body
    assert limited.body == RATELIMITED
    assert header(limited, "RateLimit-Limit") == "4"
    assert header(limited, "RateLimit-Remaining") == "0"
    assert header(limited, "RateLimit-Reset") == str(LOGIN_WINDOW - 30)
    assert header(limited, "Retry-After") == str(LOGIN_WINDOW - 30)
    assert sessions(stack) == before
    assert api.login("alice", PASSWORD, ip="203.0.113.99").status == 201


def test_successful_logins_count_against_the_login_limit(api: Api, alice: str) -> None:
    for _ in range(4):
        assert api.login("alice", PASSWORD, ip=LOGIN_IP).status == 201

    reply = api.login("alice", PASSWORD, ip=LOGIN_IP)

    assert reply.status == 429, reply.body
    assert reply.body == RATELIMITED


def test_the_login_window_reopens_when_retry_after_has_passed(api: Api, frozen: Clock, alice: str) -> None:
    for _ in range(4):
        assert api.login("alice", "wrong horse", ip=LOGIN_IP).status == 401
    limited = api.login("alice", PASSWORD, ip=LOGIN_IP)
    assert limited.status == 429
    retry_after = header(limited, "Retry-After")
    assert retry_after is not None

    frozen.now += int(retry_after)
    reply = api.login("alice", PASSWORD, ip=LOGIN_IP)

    assert reply.status == 201, reply.body


# ---------------------------------------------------------------- per-account limit


def test_ten_wrong_passwords_from_ten_ips_lock_the_account_for_any_ip(
    api: Api, stack: Stack, frozen: Clock, alice: str
) -> None:
    for index in range(10):
        reply = api.login("alice", f"wrong horse {index}", ip=f"203.0.113.{index}")
        assert reply.status == 401, (index, reply.body)
    before = sessions(stack)

    reply = api.login("alice", PASSWORD, ip="192.0.2.200")

    assert reply.status == 429, reply.body
    assert reply.body == RATELIMITED
    retry_after = header(reply, "Retry-After")
    assert retry_after is not None
    assert 0 < int(retry_after) <= ACCOUNT_WINDOW
    assert sessions(stack) == before
    guess = api.login("alice", "wrong horse again", ip="192.0.2.201")
    assert guess.status == 429, guess.body  # no more guesses while locked


def test_the_account_lock_ends_after_15_minutes(api: Api, frozen: Clock, alice: str) -> None:
    for index in range(10):
        assert api.login("alice", "wrong horse", ip=f"203.0.113.{index}").status == 401
    assert api.login("alice", PASSWORD, ip="192.0.2.200").status == 429

    frozen.now = float(int(NOW) + ACCOUNT_WINDOW)
    reply = api.login("alice", PASSWORD, ip="192.0.2.201")

    assert reply.status == 201, reply.body


def test_the_account_lock_is_over_once_its_retry_after_has_passed(
    api: Api, frozen: Clock, alice: str
) -> None:
    for index in range(10):
        assert api.login("alice", "wrong horse", ip=f"203.0.113.{index}").status == 401
    locked = api.login("alice", PASSWORD, ip="192.0.2.200")
    assert locked.status == 429
    retry_after = header(locked, "Retry-After")
    assert retry_after is not None

    frozen.now += int(retry_after)
    reply = api.login("alice", PASSWORD, ip="192.0.2.201")

    assert reply.status == 201, reply.body


# ---------------------------------------------------------------- bans


def test_a_banned_user_gets_401_for_a_wrong_password_and_403_for_the_right_one(
    api: Api, stack: Stack, alice: str
) -> None:
    set_user_attribute(stack, alice, "bannedAt", {"S": "2027-01-01T00:00:00.000Z"})
    set_user_attribute(stack, alice, "banReason", {"S": "spam"})
    before = sessions(stack)

    wrong = api.login("alice", "wrong horse", ip="203.0.113.1")
    right = api.login("alice", PASSWORD, ip="203.0.113.2")

    assert wrong.status == 401, wrong.body
    assert wrong.body == INVALID_PASSWORD
    assert right.status == 403, right.body
    assert right.body == BANNED
    assert sessions(stack) == before  # the 403 wrote no session


def test_a_ban_landing_between_password_check_and_session_write_opens_no_session(
    api: Api, stack: Stack, monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    verify = passwords.verify_password

    def verify_then_ban(stored_hash: str, password: str) -> bool:
        matched = verify(stored_hash, password)
        set_user_attribute(stack, alice, "bannedAt", {"S": "2027-01-01T00:00:00.000Z"})
        return matched

    monkeypatch.setattr(passwords, "verify_password", verify_then_ban)
    before = sessions(stack)

    reply = api.login("alice", PASSWORD)

    assert reply.status == 403, reply.body
    assert reply.body == BANNED
    assert sessions(stack) == before


def test_a_password_change_landing_between_check_and_session_write_opens_no_session(
    api: Api, stack: Stack, monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    verify = passwords.verify_password
    replaced = PasswordHasher().hash("a brand new password")

    def verify_then_change(stored_hash: str, password: str) -> bool:
        matched = verify(stored_hash, password)
        set_user_attribute(stack, alice, "passwordHash", {"S": replaced})
        return matched

    monkeypatch.setattr(passwords, "verify_password", verify_then_change)
    before = sessions(stack)

    reply = api.login("alice", PASSWORD)

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_PASSWORD
    assert sessions(stack) == before
    assert user_item(stack, alice)["passwordHash"] == replaced


# ---------------------------------------------------------------- rehash


@pytest.mark.real_argon2
def test_login_rehashes_a_password_stored_with_weaker_argon2_parameters(
    api: Api, stack: Stack, alice: str
) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8192).hash(PASSWORD)
    assert weak.startswith("$argon2id$v=19$m=8192,t=1,")
    set_user_attribute(stack, alice, "passwordHash", {"S": weak})

    reply = api.login("alice", PASSWORD)

    assert reply.status == 201, reply.body
    rehashed = user_item(stack, alice)["passwordHash"]
    assert rehashed.startswith(ARGON2_CURRENT)
    assert rehashed != weak
    assert PasswordHasher().verify(rehashed, PASSWORD)
    assert api.login("alice", PASSWORD, ip="203.0.113.77").status == 201


@pytest.mark.real_argon2
def test_login_with_a_wrong_password_leaves_a_weak_hash_unchanged(api: Api, stack: Stack, alice: str) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8192).hash(PASSWORD)
    set_user_attribute(stack, alice, "passwordHash", {"S": weak})

    reply = api.login("alice", "wrong horse")

    assert reply.status == 401, reply.body
    assert user_item(stack, alice)["passwordHash"] == weak


@pytest.mark.real_argon2
def test_login_keeps_a_hash_made_with_the_current_parameters(api: Api, stack: Stack, alice: str) -> None:
    current = user_item(stack, alice)["passwordHash"]

    assert api.login("alice", PASSWORD).status == 201

    assert user_item(stack, alice)["passwordHash"] == current
