"""POST /register: the answer, every item it writes, the email it sends, its errors and its rate limit."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from argon2 import PasswordHasher

from nimbus_core.adapters.items import from_item, read_record
from nimbus_core.adapters.user_items import list_partition
from nimbus_core.adapters.users import count_shard
from nimbus_core.domain.models import Session
from nimbus_tools.local.events import HttpRequest, build_event
from nimbus_tools.local.inprocess import LambdaContextStub, Reply
from tests.integration.conftest import NOW, Api, Clock, Faults, Stack

NOW_ISO = "2027-01-15T08:00:00.250Z"
HOUR = 3600
DAY = 24 * HOUR
SIX_HOURS = 6 * HOUR
ARGON2_CURRENT = "$argon2id$v=19$m=19456,t=2,p=1$"
LINK = re.compile(r"https://files\.test/verify\?token=([A-Za-z0-9_.-]+)")
PYTEST_DEVICE = "pytest 9 on an unknown OS"  # what the parser makes of the harness's "pytest/9.2"

INVALID_BODY = {"code": "INVALID_BODY_ERROR", "message": "Invalid Body"}
INVALID_USERNAME = {"code": "INVALID_USERNAME_ERROR", "message": "Invalid Username"}
INVALID_EMAIL = {"code": "INVALID_EMAIL_ERROR", "message": "Invalid Email"}
INVALID_SESSION = {"code": "INVALID_SESSION_ERROR", "message": "Invalid Session"}
USER_EXISTS = {"code": "USER_EXISTS_ERROR", "message": "User Exists"}
PASSWORDS_DO_NOT_MATCH = {"code": "PASSWORDS_DO_NOT_MATCH_ERROR", "message": "Passwords Do Not Match"}
RATELIMITED = {"code": "RATELIMITED_ERROR", "message": "You Have Been Ratelimited. Please Try Again Later."}
INTERNAL = {"code": "INTERNAL_SERVER_ERROR", "message": "Internal Server Error"}


def users_by_pk(stack: Stack) -> dict[str, dict[str, Any]]:
    """Every item of the users table (users and claims) by pk."""
    return {i["pk"]: i for i in map(from_item, stack.items("UsersTable"))}


def stored(stack: Stack) -> dict[str, list[dict[str, Any]]]:
    """Everything a registration can write, for before/after comparisons."""
    return {
        name: sorted((from_item(i) for i in stack.items(name)), key=lambda i: json.dumps(i, sort_keys=True))
        for name in ("UsersTable", "SessionsTable", "TokensTable")
    }


def nothing_stored(stack: Stack) -> bool:
    """No user, claim, session or verification token exists."""
    return all(not items for items in stored(stack).values())


def header(reply: Reply, name: str) -> str | None:
    """A response header, case-insensitively."""
    return next((v for k, v in reply.headers.items() if k.lower() == name.lower()), None)


def body(
    username: str = "alice", email: str | None = None, password: str = "correct horse", **extra: Any
) -> dict[str, Any]:
    """A valid registration body."""
    return {"username": username, "email": email or f"{username}@example.com", "password": password, **extra}


def token_parts(token: str) -> tuple[str, str, str]:
    """userId, sessionId and secret of a session token (the server's own format)."""
    user_id, session_id, secret = token.split(".")
    return user_id, session_id, secret


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def register_with_user_agent(api: Api, user_agent: str | None, username: str, ip: str) -> dict[str, Any]:
    """POST /register with exactly this User-Agent (or none), bypassing the harness's default one."""
    headers = [("host", "api.test"), ("content-type", "application/json")]
    if user_agent is not None:
        headers.append(("user-agent", user_agent))
    request = HttpRequest(
        method="POST",
        target="/register",
        headers=headers,
        body=json.dumps(body(username)).encode(),
        source_ip=ip,
    )
    match = api.router.match("POST", "/register")
    assert match is not None
    result = api.handler(match.function)(build_event(request, match), LambdaContextStub(match.function))
    assert result["statusCode"] == 201, result
    answer: dict[str, Any] = json.loads(result["body"])
    return answer


# ---------------------------------------------------------------- success


def test_register_answers_201_with_a_token_a_24_hour_exp_and_a_known_device(api: Api, frozen: Clock) -> None:
    reply = api.register()

    assert reply.status == 201, reply.body
    assert set(reply.body) == {"token", "exp", "device"}
    assert len(reply.body["device"]) >= 43  # 256 bits, base64url
    assert reply.body["exp"] == int(NOW) + DAY
    user_id, session_id, secret = token_parts(reply.body["token"])
    assert len(secret) >= 43  # 256 bits, base64url
    assert (len(user_id), len(session_id)) == (26, 26)


@pytest.mark.parametrize(("remember_me", "lifetime"), [(True, 30 * DAY), (False, DAY), (None, DAY)])
def test_register_session_lasts_30_days_with_remember_me_else_24_hours(
    api: Api, stack: Stack, frozen: Clock, remember_me: bool | None, lifetime: int
) -> None:
    reply = api.register(rememberMe=remember_me)

    assert reply.status == 201, reply.body
    assert reply.body["exp"] == int(NOW) + lifetime
    [session] = map(from_item, stack.items("SessionsTable"))
    assert session["exp"] == session["expiresAt"] == int(NOW) + lifetime


def only_token_hash(stack: Stack) -> str:
    [token] = [from_item(i) for i in stack.items("TokensTable") if i["kind"]["S"] == "verify-email"]
    return str(token["hash"])


@pytest.mark.real_argon2
def test_register_stores_the_user_with_lower_cased_keys_and_the_case_as_given(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com", password="correct horse")

    assert reply.status == 201, reply.body
    user_id, _, _ = token_parts(reply.body["token"])
    items = users_by_pk(stack)
    shard = f"USERCOUNT#{count_shard(user_id)}"
    assert set(items) == {f"USER#{user_id}", "USERNAME#alice_w", "EMAIL#alice.w@example.com", shard}
    assert items[shard] == {"pk": shard, "users": 1}  # counted in the same transaction
    user = dict(items[f"USER#{user_id}"])
    password_hash = user.pop("passwordHash")
    assert user == {
        "pk": f"USER#{user_id}",
        "id": user_id,
        "username": "Alice_W",
        "usernameKey": "alice_w",
        "email": "Alice.W@example.com",
        "emailKey": "alice.w@example.com",
        "listPartition": list_partition(user_id),
        "listOrder": f"{1_800_000_000_250:015d}#{user_id}",  # created at NOW, in ms
        "staff": False,
        "domain": "nimbus.test",
        "secondFactors": {},
        "backupCodes": {},
        "authFailures": 0,
        "authFailuresResetAt": 0,
        "sessionGeneration": 0,
        "recoveryMails": 0,
        "recoveryMailsResetAt": 0,
        "pendingVerification": only_token_hash(stack),
        "createdAt": NOW_ISO,
        "updatedAt": NOW_ISO,
    }  # no verifiedAt, bannedAt, subdomain
    assert password_hash.startswith(ARGON2_CURRENT)
    assert "correct horse" not in password_hash
    assert PasswordHasher().verify(password_hash, "correct horse")


def test_register_claims_the_username_and_the_email_case_insensitively(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com")

    user_id, _, _ = token_parts(reply.body["token"])
    items = users_by_pk(stack)
    assert items["USERNAME#alice_w"] == {"pk": "USERNAME#alice_w", "userId": user_id, "createdAt": NOW_ISO}
    assert items["EMAIL#alice.w@example.com"] == {
        "pk": "EMAIL#alice.w@example.com",
        "userId": user_id,
        "createdAt": NOW_ISO,
    }


def test_register_opens_one_session_storing_only_the_sha256_of_the_token_secret(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    reply = api.register()

    user_id, session_id, secret = token_parts(reply.body["token"])
    sessions = [from_item(i) for i in stack.items("SessionsTable")]
    assert sessions == [
        {
            "userId": user_id,
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
    ]  # a normal session: no permissionFlags
    assert sessions[0]["secretHash"] != secret
    assert secret not in json.dumps(stack.items("SessionsTable"))


def test_register_stores_one_verification_token_hashed_and_bound_to_the_user_and_address(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com")

    user_id, _, session_secret = token_parts(reply.body["token"])
    [email] = stack.emails
    match = LINK.search(email["text"])
    assert match is not None, email["text"]
    emailed_user, _, emailed = match.group(1).partition(".")
    assert emailed_user == user_id  # the id lets verification fetch token and user in one read
    assert len(emailed) >= 43
    assert emailed != session_secret
    verification = [i for i in stack.items("TokensTable") if i["kind"]["S"] == "verify-email"]
    assert [from_item(i) for i in verification] == [
        {
            "pk": f"VERIFY#{sha256(emailed)}",
            "hash": sha256(emailed),
            "kind": "verify-email",
            "userId": user_id,
            "email": "Alice.W@example.com",
            "createdAt": NOW_ISO,
            "exp": int(NOW) + DAY,
            "expiresAt": int(NOW) + DAY,
        }
    ]
    assert emailed not in json.dumps(stack.items("TokensTable"))


def test_register_sends_exactly_one_verification_email_with_the_link_in_text_and_html(
    api: Api, stack: Stack
) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com")

    assert reply.status == 201, reply.body
    assert len(stack.emails) == 1
    email = stack.emails[0]
    assert email["to"] == ["Alice.W@example.com"]
    assert email["subject"] == "Verify your email address"
    text_link = LINK.search(email["text"])
    html_link = LINK.search(email["html"])
    assert text_link is not None
    assert html_link is not None
    assert text_link.group(0) == html_link.group(0)
    assert f'href="{text_link.group(0)}"' in email["html"]
    assert "Alice_W" in email["text"]
    assert "Alice_W" in email["html"]


def test_register_logs_the_caller_in_with_a_token_that_reads_the_new_account(api: Api) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com")

    me = api.call("GET", "/users/me", token=reply.body["token"])
    assert me.status == 200, me.body
    assert (me.body["username"], me.body["email"], me.body["verifiedAt"]) == (
        "Alice_W",
        "Alice.W@example.com",
        None,
    )


def test_register_trims_surrounding_spaces_of_username_and_email_but_not_the_password(
    api: Api, stack: Stack
) -> None:
    reply = api.register(username="  bob  ", email="  bob@example.com ", password=" spaced out ")

    assert reply.status == 201, reply.body
    [user] = [i for i in users_by_pk(stack).values() if i["pk"].startswith("USER#")]
    assert (user["username"], user["email"]) == ("bob", "bob@example.com")
    assert PasswordHasher().verify(user["passwordHash"], " spaced out ")
    assert api.login("bob", "spaced out").status == 401
    assert api.login("bob", " spaced out ").status == 201


def test_register_accepts_usernames_and_passwords_at_their_bounds(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    cases = [
        ("a", "8 chars!"),
        ("B" * 64, "p" * 64),
        ("a.b-c_D9", "correct horse"),
        ("x", "日本語のパスワード"),
    ]
    for index, (username, password) in enumerate(cases):
        with subtests.test(username=username, password=password):
            reply = api.register(
                username=username,
                email=f"bounds{index}@example.com",
                password=password,
                ip=f"198.51.100.{index}",
            )

            assert reply.status == 201, reply.body
            user_id, _, _ = token_parts(reply.body["token"])
            user = users_by_pk(stack)[f"USER#{user_id}"]
            assert user["username"] == username
            assert PasswordHasher().verify(user["passwordHash"], password)


def test_register_accepts_a_matching_confirm_password(api: Api) -> None:
    reply = api.register(confirmPassword="correct horse")

    assert reply.status == 201, reply.body


def test_register_ignores_unknown_fields_even_deeply_nested_ones(api: Api, stack: Stack) -> None:
    nested = "[" * 4000 + "]" * 4000
    raw = json.dumps(body())[:-1] + f', "extra": {nested}, "staff": true, "domain": "evil.example"}}'

    reply = api.call("POST", "/register", raw=raw)

    assert reply.status == 201, reply.body
    [user] = [i for i in users_by_pk(stack).values() if i["pk"].startswith("USER#")]
    assert (user["staff"], user["domain"]) == (False, "nimbus.test")


# ---------------------------------------------------------------- session names


def test_register_names_the_session_after_the_x_session_name_header_trimmed(api: Api, stack: Stack) -> None:
    reply = api.call("POST", "/register", body(), headers={"X-Session-Name": "  Work laptop  "})

    assert reply.status == 201, reply.body
    [session] = map(from_item, stack.items("SessionsTable"))
    assert session["name"] == "Work laptop"


def test_register_accepts_a_64_character_session_name(api: Api, stack: Stack) -> None:
    reply = api.call("POST", "/register", body(), headers={"X-Session-Name": "n" * 64})

    assert reply.status == 201, reply.body
    [session] = map(from_item, stack.items("SessionsTable"))
    assert session["name"] == "n" * 64


def test_register_refuses_a_session_name_outside_1_to_64_characters(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for name in ["n" * 65, "   ", ""]:
        with subtests.test(name=name):
            reply = api.call("POST", "/register", body(), headers={"X-Session-Name": name})

            assert reply.status == 400, reply.body
            assert reply.body == {
                "code": "INVALID_FIELDS_ERROR",
                "message": "Invalid Fields",
                "fields": ["X-Session-Name"],
            }
            assert nothing_stored(stack)
            assert stack.emails == []


def test_register_names_the_session_after_the_device_of_the_user_agent(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    cases = [
        ("pytest/9.2", PYTEST_DEVICE),
        (
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            "Firefox 132 on Ubuntu",
        ),
        ("curl/8.5.0", "curl 8 on an unknown OS"),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0.0.0 Safari/537.36",
            "Chrome 131 on Windows",
        ),
        ("   ", "Unknown device"),
        (None, "Unknown device"),
    ]
    for index, (user_agent, device) in enumerate(cases):
        with subtests.test(user_agent=user_agent):
            answer = register_with_user_agent(
                api, user_agent, username=f"user{index}", ip=f"198.51.100.{index}"
            )

            user_id, session_id, _ = token_parts(answer["token"])
            [item] = [i for i in stack.items("SessionsTable") if from_item(i)["userId"] == user_id]
            session = read_record(Session, {**item, "id": item["sessionId"]})
            # Stored with its User-Agent, named after it when shown: no parsing on register or login.
            assert (session.id, session.name, session.display_name) == (session_id, None, device)


# ---------------------------------------------------------------- invalid bodies

NOT_JSON_OBJECTS: list[tuple[str, str | bytes]] = [
    ("form-encoded", "username=alice&password=x"),
    ("truncated", '{"username": "alice",'),
    ("whitespace", "   "),
    ("array", "[]"),
    ("array-of-object", '[{"username": "alice"}]'),
    ("string", '"alice"'),
    ("number", "42"),
    ("null", "null"),
    ("boolean", "true"),
    ("invalid-utf8", b'{"username": "al\xffice", "email": "a@example.com", "password": "correct horse"}'),
    ("utf16-bom", b"\xfe\xff\x00{"),
    ("utf8-encoded-surrogate", b'{"username": "\xed\xa0\x80"}'),
    (
        "lone-surrogate-in-username",
        '{"username": "\\ud800", "email": "a@example.com", "password": "correct horse"}',
    ),
    (
        "lone-surrogate-in-password",
        '{"username": "alice", "email": "a@example.com", "password": "a \\udfff horse"}',
    ),
    (
        "lone-surrogate-in-unknown-key",
        '{"\\ud800": 1, "username": "alice", "email": "a@example.com", "password": "correct horse"}',
    ),
    ("arrays-nested-too-deep", '{"username": ' + "[" * 20_000 + "]" * 20_000 + "}"),
    ("objects-nested-too-deep", "{" + '"a":{' * 10_500 + "}" * 10_501),
]


def test_register_refuses_a_body_that_is_not_a_json_object_with_invalid_body(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for case, raw in NOT_JSON_OBJECTS:
        with subtests.test(case):
            reply = api.call("POST", "/register", raw=raw)

            assert reply.status == 400, reply.body
            assert reply.body == INVALID_BODY
            assert nothing_stored(stack)
            assert stack.items("CountersTable") == []  # validation comes before the rate limit
            assert stack.emails == []


MISSING_FIELDS: list[tuple[str, dict[str, Any] | None, list[str]]] = [
    ("no-body", None, ["username", "email", "password"]),
    ("empty-object", {}, ["username", "email", "password"]),
    ("only-username", {"username": "alice"}, ["email", "password"]),
    ("only-password", {"password": "correct horse"}, ["username", "email"]),
    ("all-null", {"username": None, "email": None, "password": None}, ["username", "email", "password"]),
    ("null-email", body() | {"email": None}, ["email"]),
    ("number-username", body() | {"username": 42}, ["username"]),
    ("array-username", body() | {"username": ["alice"]}, ["username"]),
    ("object-email", body() | {"email": {"address": "a@example.com"}}, ["email"]),
    ("number-password", body() | {"password": 12345678}, ["password"]),
    ("boolean-password", body() | {"password": True}, ["password"]),
    ("string-rememberMe", body() | {"rememberMe": "true"}, ["rememberMe"]),
    ("number-rememberMe", body() | {"rememberMe": 1}, ["rememberMe"]),
    ("number-confirmPassword", body() | {"confirmPassword": 12345678}, ["confirmPassword"]),
    (
        "missing-and-wrong-type",
        {"email": "not an email", "rememberMe": "yes"},
        ["username", "password", "rememberMe"],
    ),
    (
        "documented-order",
        {"rememberMe": 0, "password": None, "email": 7, "username": False},
        ["username", "email", "password", "rememberMe"],
    ),
]


def test_register_names_every_missing_null_or_wrongly_typed_field_in_order(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for case, sent, fields in MISSING_FIELDS:
        with subtests.test(case):
            reply = api.call("POST", "/register", sent)

            assert reply.status == 400, reply.body
            assert reply.body == {
                "code": "MISSING_FIELDS_ERROR",
                "message": "Missing Fields",
                "fields": fields,
            }
            assert nothing_stored(stack)
            assert stack.emails == []


BAD_USERNAMES = [
    "a" * 65,
    "",
    "   ",
    "alice smith",
    "ålice",
    "алиса",
    "alice😀",
    "alice\x00",
    "alice\n",
    "\talice",
    "alice@example.com",
    "al/ice",
    "alice\u200b",
    "\uff41\uff4c\uff49\uff43\uff45",
]


def test_register_refuses_a_malformed_username_with_invalid_username(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for username in BAD_USERNAMES:
        with subtests.test(username=username):
            reply = api.call("POST", "/register", body(username=username, email="alice@example.com"))

            assert reply.status == 400, reply.body
            assert reply.body == INVALID_USERNAME
            assert nothing_stored(stack)


BAD_EMAILS = [
    "alice",
    "",
    "alice@",
    "@example.com",
    "alice@@example.com",
    "alice@example",
    "alice@example..com",
    "alice smith@example.com",
    "Alice <alice@example.com>",
    "alice@example.com, bob@example.com",
    "x alice@example.com",
    "alice@example.com\x00",
    "alice@example.com\n",
    "a" * 250 + "@example.com",
    "alice@localhost",
]


def test_register_refuses_an_invalid_email_with_invalid_email(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for email in BAD_EMAILS:
        with subtests.test(email=email):
            reply = api.call("POST", "/register", body() | {"email": email})

            assert reply.status == 400, reply.body
            assert reply.body == INVALID_EMAIL
            assert nothing_stored(stack)


def test_register_refuses_a_password_outside_8_to_64_characters_with_invalid_fields(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    for password in ["p" * 7, "p" * 65, "", "😀" * 65]:
        with subtests.test(password=password):
            reply = api.register(password=password)

            assert reply.status == 400, reply.body
            assert reply.body == {
                "code": "INVALID_FIELDS_ERROR",
                "message": "Invalid Fields",
                "fields": ["password"],
            }
            assert nothing_stored(stack)
            assert stack.emails == []


def test_register_refuses_a_confirm_password_that_differs(api: Api, stack: Stack) -> None:
    reply = api.register(password="correct horse", confirmPassword="correct horse ")

    assert reply.status == 400, reply.body
    assert reply.body == PASSWORDS_DO_NOT_MATCH
    assert nothing_stored(stack)
    assert stack.items("CountersTable") == []  # body validation comes before the rate limit
    assert stack.emails == []


# ---------------------------------------------------------------- uniqueness


def test_register_refuses_a_taken_username_or_email_in_any_case_and_writes_nothing(
    api: Api, stack: Stack, subtests: pytest.Subtests
) -> None:
    first = api.register(username="Alice_W", email="Alice.W@example.com", ip="198.51.100.1")
    assert first.status == 201, first.body
    before = stored(stack)
    attempts = [
        ("ALICE_w", "other@example.com"),
        ("alice_w", "other@example.com"),
        ("  Alice_W ", "other@example.com"),
        ("other", "ALICE.W@EXAMPLE.COM"),
        ("other", "alice.w@example.com"),
        ("Other", "  Alice.W@example.com  "),
    ]
    for index, (username, email) in enumerate(attempts):
        with subtests.test(username=username, email=email):
            reply = api.register(username=username, email=email, ip=f"198.51.100.{10 + index}")

            assert reply.status == 409, reply.body
            assert reply.body == USER_EXISTS
            assert stored(stack) == before  # no second user, claim, session or token
            assert len(stack.emails) == 1


# ---------------------------------------------------------------- sessions on register


@pytest.mark.parametrize("scheme", ["", "Bearer "])
def test_register_with_a_valid_session_is_refused_as_already_logged_in(
    api: Api, stack: Stack, scheme: str
) -> None:
    first = api.register(ip="198.51.100.1")
    before = stored(stack)

    reply = api.call("POST", "/register", body("bob"), token=scheme + first.body["token"], ip="198.51.100.2")

    assert reply.status == 401, reply.body
    assert reply.body == INVALID_SESSION
    assert stored(stack) == before
    assert len(stack.emails) == 1


def test_register_ignores_invalid_tokens(api: Api, stack: Stack) -> None:
    first = api.register(ip="198.51.100.1")
    user_id, session_id, secret = token_parts(first.body["token"])
    wrong_secret = f"{user_id}.{session_id}.{'A' * len(secret)}"
    swapped = f"{session_id}.{user_id}.{secret}"
    invalid = ["garbage", "Bearer garbage", "Bearer", "a.b.c", wrong_secret, swapped, "x" * 4000]

    for index, token in enumerate(invalid):
        reply = api.call(
            "POST", "/register", body(f"user{index}"), token=token, ip=f"198.51.100.{10 + index}"
        )
        assert reply.status == 201, (token, reply.body)

    stack.dynamodb.delete_item(
        TableName=stack.table("SessionsTable"),
        Key={"userId": {"S": user_id}, "sessionId": {"S": session_id}},
    )
    revoked = api.call("POST", "/register", body("revoked"), token=first.body["token"], ip="198.51.100.99")
    assert revoked.status == 201, revoked.body


# ---------------------------------------------------------------- rate limit


def test_a_second_registration_from_the_same_ip_is_ratelimited_with_headers(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    first = api.register("alice", ip="192.0.2.1")
    assert first.status == 201, first.body
    assert (header(first, "RateLimit-Limit"), header(first, "RateLimit-Remaining")) == ("1", "0")
    assert header(first, "RateLimit-Reset") == str(SIX_HOURS)
    before = stored(stack)

    frozen.now = NOW + 60
    second = api.register("bob", ip="192.0.2.1")

    assert second.status == 429, second.body
    assert second.body == RATELIMITED
    assert header(second, "RateLimit-Limit") == "1"
    assert header(second, "RateLimit-Remaining") == "0"
    assert header(second, "RateLimit-Reset") == str(SIX_HOURS - 60)
    assert header(second, "Retry-After") == str(SIX_HOURS - 60)
    assert stored(stack) == before
    assert len(stack.emails) == 1


def test_the_registration_limit_is_per_ip(api: Api) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201
    assert api.register("bob", ip="192.0.2.1").status == 429

    other = api.register("carol", ip="192.0.2.2")

    assert other.status == 201, other.body


def test_the_registration_limit_reads_the_source_ip_not_x_forwarded_for(api: Api) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201

    spoofed = api.call(
        "POST", "/register", body("bob"), headers={"X-Forwarded-For": "203.0.113.77"}, ip="192.0.2.1"
    )

    assert spoofed.status == 429, spoofed.body


def test_the_registration_window_reopens_when_retry_after_has_passed(api: Api, frozen: Clock) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201
    frozen.now = NOW + SIX_HOURS - 1
    limited = api.register("bob", ip="192.0.2.1")
    assert limited.status == 429
    retry_after = header(limited, "Retry-After")
    assert retry_after is not None

    frozen.now += int(retry_after)
    reply = api.register("bob", ip="192.0.2.1")

    assert reply.status == 201, reply.body


def test_a_409_does_not_count_against_the_registration_limit(api: Api) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201

    taken = api.register("ALICE", email="new@example.com", ip="192.0.2.2")
    assert taken.status == 409, taken.body
    assert header(taken, "RateLimit-Remaining") == "1"

    reply = api.register("bob", ip="192.0.2.2")
    assert reply.status == 201, reply.body


def test_a_500_does_not_count_against_the_registration_limit(api: Api, stack: Stack, faults: Faults) -> None:
    faults.fail("dynamodb", "TransactWriteItems")
    failed = api.register("alice", ip="192.0.2.1")
    assert failed.status == 500, failed.body
    assert failed.body == INTERNAL
    faults.clear()

    reply = api.register("alice", ip="192.0.2.1")

    assert reply.status == 201, reply.body
    assert len(stack.emails) == 1


def test_a_validation_400_never_reaches_the_registration_limit(api: Api, stack: Stack) -> None:
    refused = [
        api.call("POST", "/register", raw="not json", ip="192.0.2.1"),
        api.call("POST", "/register", {}, ip="192.0.2.1"),
        api.register("bad name", ip="192.0.2.1"),
        api.register("alice", email="nope", ip="192.0.2.1"),
        api.register("alice", password="short", ip="192.0.2.1"),
        api.register("alice", confirmPassword="correct horse!", ip="192.0.2.1"),
        api.call("POST", "/register", body(), headers={"X-Session-Name": "n" * 65}, ip="192.0.2.1"),
    ]
    assert [r.status for r in refused] == [400] * len(refused)
    assert all(header(r, "RateLimit-Limit") is None for r in refused)
    assert stack.items("CountersTable") == []

    reply = api.register("alice", ip="192.0.2.1")

    assert reply.status == 201, reply.body


def test_a_confirm_password_mismatch_does_not_use_up_the_registration_limit(api: Api) -> None:
    mismatch = api.register("alice", confirmPassword="something else", ip="192.0.2.1")
    assert mismatch.status == 400
    assert mismatch.body == PASSWORDS_DO_NOT_MATCH

    reply = api.register("alice", confirmPassword="correct horse", ip="192.0.2.1")

    assert reply.status == 201, reply.body
