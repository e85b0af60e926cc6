"""Account self-service: username, email, password, domain, verification and deletion."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.models import Session
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import Api, Clock, Faults, Stack

PASSWORD = "correct horse"
LINK = re.compile(r"https://files\.test/verify\?token=([A-Za-z0-9_.-]+)")
DAY = 86400


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def header(reply: Reply, name: str) -> str | None:
    return next((v for k, v in reply.headers.items() if k.lower() == name.lower()), None)


_ips = itertools.count(1)


def new_user(api: Api, name: str | None = None, ip: str | None = None) -> tuple[str, str]:
    """Register a fresh user from a fresh address; (username, token)."""
    username = name or f"u{new_id()[-10:].lower()}"
    n = next(_ips)
    reply = api.register(username=username, ip=ip or f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}")
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def put(api: Api, path: str, token: str, body: dict[str, Any], ip: str = "203.0.113.50") -> Reply:
    return api.call("PUT", path, body, token=token, ip=ip)


def links(stack: Stack, address: str) -> list[str]:
    """The verification links mailed to ``address``, oldest first (security notices carry none)."""
    found = (LINK.search(m["text"]) for m in stack.emails if m["to"] == [address])
    return [match.group(1) for match in found if match]


def scoped_token(stack: Stack, user_token: str, flags: int) -> str:
    """A scoped session of the token's user, stored through the adapters (the way POST /users/me/sessions
    stores one)."""
    user_id = user_token.split(".", maxsplit=1)[0]
    secret = "s" * 43
    session = Session(
        user_id=user_id,
        id=new_id(),
        secret_hash=hash_secret(secret),
        name="scoped",
        exp=2_000_000_000,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        used_at="2099-01-01T00:00:00.000Z",
        permission_flags=flags,
    )
    sessions = DynamoSessions(
        stack.dynamodb, stack.table("SessionsTable"), stack.table("UsersTable"), stack.table("TokensTable")
    )
    DynamoTransactor(stack.dynamodb).commit([sessions.put_op(session)])
    return f"{user_id}.{session.id}.{secret}"


# ------------------------------------------------------------------------------------------ username


def test_username_change_answers_the_user_and_frees_the_old_name(api: Api, stack: Stack) -> None:
    old, token = new_user(api)
    reply = put(api, "/users/me/username", token, {"username": "  Renamed_1  ", "password": PASSWORD})
    assert reply.status == 200, reply.body
    assert reply.body["username"] == "Renamed_1"
    assert header(reply, "RateLimit-Limit") == "3"
    assert api.login("renamed_1").status == 201
    assert api.login(old).status == 404
    freed = api.register(username=old, email="someone.else@example.com", ip="192.0.2.77")
    assert freed.status == 201, freed.body  # the old name is free at once


def test_username_taken_by_another_user_in_any_case_is_409_and_not_counted(api: Api) -> None:
    taken, _ = new_user(api, "Taken_Name")
    _, token = new_user(api)
    for _ in range(4):
        reply = put(api, "/users/me/username", token, {"username": taken.upper(), "password": PASSWORD})
        assert (reply.status, code(reply)) == (409, "USER_EXISTS_ERROR")
    assert header(reply, "RateLimit-Remaining") == "3"  # 409 is not counted


def test_username_changes_are_limited_to_3_per_day(api: Api) -> None:
    _, token = new_user(api)
    statuses = [
        put(api, "/users/me/username", token, {"username": f"name_{n}", "password": PASSWORD}).status
        for n in range(4)
    ]
    assert statuses == [200, 200, 200, 429]


# Concurrent claims of one name are proven over HTTP in tests/e2e/test_e2e_concurrency.py: a Lambda
# instance handles one request at a time, so threads sharing one in-process handler would not be real.


# ---------------------------------------------------------------------------------------- reverify


def test_reverification_needs_the_password_even_with_a_2fa_object(api: Api) -> None:
    _, token = new_user(api)
    for body in ({"username": "fresh_name"}, {"username": "fresh_name", "2fa": {"token": "x", "code": "1"}}):
        reply = put(api, "/users/me/username", token, body)
        assert (reply.status, reply.body.get("fields")) == (400, ["password"]), reply.body


def test_the_endpoint_fields_are_named_before_the_password(api: Api) -> None:
    _, token = new_user(api)
    reply = put(api, "/users/me/username", token, {})
    assert (reply.status, reply.body["fields"]) == (400, ["username"])


def _lock_logins(api: Api, username: str) -> None:
    """Ten wrong passwords at login from rotating addresses: the per-account login lock."""
    for n in range(10):
        assert api.login(username, "a guess!", ip=f"192.0.2.{n + 10}").status == 401
    locked = api.login(username, ip="192.0.2.200")
    assert (locked.status, code(locked)) == (429, "RATELIMITED_ERROR")


def _auth_failures(stack: Stack, token: str) -> int:
    user = DynamoUsers(stack.dynamodb, stack.table("UsersTable")).get(token.partition(".")[0])
    assert user is not None
    return user.auth_failures


def test_five_wrong_passwords_limit_the_session_never_the_accounts_logins(api: Api, stack: Stack) -> None:
    # DELETE /users/me has no endpoint limit of its own: the session's limit stops the guessing.
    username, token = new_user(api)
    other = api.login(username, ip="192.0.2.199").body["token"]
    statuses = [
        api.call(
            "DELETE", "/users/me", {"password": "wrong one!"}, token=token, ip=f"203.0.113.{n + 1}"
        ).status
        for n in range(5)
    ]
    limited = api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token, ip="203.0.113.99")

    assert statuses == [401] * 5
    assert (limited.status, code(limited)) == (429, "RATELIMITED_ERROR")  # even the right password
    assert 0 < int(header(limited, "Retry-After") or 0) <= 15 * 60
    assert header(limited, "RateLimit-Limit") is None  # the session's limit is not an endpoint window
    assert api.call("GET", "/users/me", token=token).status == 200  # limited, not deleted
    assert _auth_failures(stack, token) == 0  # the login lock is not fed
    assert api.login(username, ip="192.0.2.201").status == 201
    renamed = put(api, "/users/me/username", other, {"username": f"{username}x", "password": PASSWORD})
    assert renamed.status == 200, renamed.body  # another session of the same user is not limited


def test_the_owner_changes_their_password_while_someone_keeps_the_login_locked(
    api: Api, frozen: Clock
) -> None:
    username, token = new_user(api)
    setup = api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token).body
    confirm = {
        "token": setup["token"],
        "name": "Phone",
        "code": pyotp.TOTP(setup["secret"]).at(frozen.now),
    }
    assert api.call("POST", "/users/me/2fa/totp/confirm", confirm, token=token).status == 201
    _lock_logins(api, username)
    frozen.now += 30
    change = {
        "password": PASSWORD,
        "newPassword": "a new passphrase",
        "confirmNewPassword": "a new passphrase",
    }

    challenged = put(api, "/users/me/password", token, change)
    answer = {
        "token": challenged.body.get("token"),
        "type": "totp",
        "code": pyotp.TOTP(setup["secret"]).at(frozen.now),
    }
    changed = put(
        api,
        "/users/me/password",
        token,
        {k: v for k, v in change.items() if k != "password"} | {"2fa": answer},
    )

    assert (challenged.status, code(challenged)) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    assert changed.status == 200, changed.body
    assert api.call("GET", "/users/me", token=token).status == 200  # this session is kept


def test_scoped_sessions_are_never_asked_for_a_password(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    scoped = scoped_token(stack, token, flags=8)  # ACCOUNT_MODIFY
    reply = put(api, "/users/me/username", scoped, {"username": "scoped_rename"})
    assert reply.status == 200, reply.body


def test_a_scoped_session_without_the_scope_is_403(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    scoped = scoped_token(stack, token, flags=4)  # ACCOUNT_READ only
    reply = put(api, "/users/me/username", scoped, {"username": "scoped_rename"})
    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")


@pytest.mark.parametrize("flags", [1, 8, 2097151])
def test_no_scoped_session_can_delete_the_account(api: Api, stack: Stack, flags: int) -> None:
    username, token = new_user(api)
    reply = api.call("DELETE", "/users/me", {}, token=scoped_token(stack, token, flags))
    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert api.login(username).status == 201


# ------------------------------------------------------------------------------------ email + verify


def test_a_new_email_starts_unverified_and_its_link_goes_to_the_new_address(api: Api, stack: Stack) -> None:
    username, token = new_user(api)
    [first] = links(stack, f"{username}@example.com")
    reply = put(api, "/users/me/email", token, {"email": "New.Address@example.org", "password": PASSWORD})
    assert reply.status == 200, reply.body
    assert (reply.body["email"], reply.body["verifiedAt"]) == ("New.Address@example.org", None)
    [second] = links(stack, "New.Address@example.org")

    old = api.call("PUT", "/users/verify", {"token": first})
    assert (old.status, code(old)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")
    ok = api.call("PUT", "/users/verify", {"token": second})
    assert (ok.status, ok.body) == (
        200,
        {"code": "VERIFY_EMAIL_SUCCESS", "message": "Successfully Verified Email"},
    )
    assert api.call("GET", "/users/me", token=token).body["verifiedAt"] is not None
    replay = api.call("PUT", "/users/verify", {"token": second})
    assert (replay.status, code(replay)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")


def test_emails_collide_after_case_folding(api: Api) -> None:
    api.register(username="strasse_one", email="STRASSE@example.com", ip="192.0.2.31")
    _, token = new_user(api)
    reply = put(api, "/users/me/email", token, {"email": "straße@example.com", "password": PASSWORD})
    assert (reply.status, code(reply)) == (409, "USER_EXISTS_ERROR")
    refused = api.register(username="strasse_two", email="straße@example.com", ip="192.0.2.32")
    assert (refused.status, code(refused)) == (409, "USER_EXISTS_ERROR")


def test_verification_tokens_expire_after_24_hours(api: Api, stack: Stack, frozen: Clock) -> None:
    username, _ = new_user(api)
    [link] = links(stack, f"{username}@example.com")
    frozen.now += DAY
    reply = api.call("PUT", "/users/verify", {"token": link})
    assert (reply.status, code(reply)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")


def test_a_token_only_verifies_its_own_user(api: Api, stack: Stack) -> None:
    first, _ = new_user(api)
    second, _ = new_user(api)
    [link] = links(stack, f"{first}@example.com")
    other_id = DynamoUsers(stack.dynamodb, stack.table("UsersTable")).find_by_username(second).id  # type: ignore[union-attr]
    forged = f"{other_id}.{link.split('.', 1)[1]}"
    reply = api.call("PUT", "/users/verify", {"token": forged})
    assert (reply.status, code(reply)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")


@pytest.mark.parametrize(
    "token", ["", "x" * 256, "nodot", "01M83M99VZ0PQ19JM98VB8SN17.short", "😀.😀", "\u202e" * 10]
)
def test_malformed_verification_tokens_are_400(api: Api, token: str) -> None:
    reply = api.call("PUT", "/users/verify", {"token": token})
    assert (reply.status, code(reply)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")


def test_resend_is_201_once_per_5_minutes_and_replaces_the_link(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    reply = api.call("GET", "/users/me/verify", token=token)
    assert (reply.status, code(reply)) == (201, "SEND_VERIFICATION_EMAIL_SUCCESS")
    again = api.call("GET", "/users/me/verify", token=token)
    assert (again.status, code(again)) == (429, "RATELIMITED_ERROR")
    first, second = links(stack, f"{username}@example.com")
    assert api.call("PUT", "/users/verify", {"token": first}).status == 400
    assert api.call("PUT", "/users/verify", {"token": second}).status == 200
    frozen.now += 301
    verified = api.call("GET", "/users/me/verify", token=token)
    assert (verified.status, code(verified)) == (400, "EMAIL_ALREADY_VERIFIED_ERROR")


def test_kill_switches_of_the_email_endpoints(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    stack.set_switches("ACCOUNT_EMAIL_VERIFY")
    for reply in (
        api.call("GET", "/users/me/verify", token=token),
        api.call("PUT", "/users/verify", {"token": "x.y"}),
        put(api, "/users/me/email", token, {"email": "x@example.com", "password": PASSWORD}),
    ):
        assert (reply.status, reply.body.get("feature")) == (503, 3)
    assert put(api, "/users/me/username", token, {"username": "still_ok", "password": PASSWORD}).status == 200


# -------------------------------------------------------------------------------------------- password


def test_a_password_change_keeps_this_session_and_revokes_the_others(api: Api) -> None:
    username, token = new_user(api)
    other = api.login(username).body["token"]
    reply = put(
        api,
        "/users/me/password",
        token,
        {"password": PASSWORD, "newPassword": "a new secret", "confirmNewPassword": "a new secret"},
    )
    assert reply.status == 200, reply.body
    assert api.call("GET", "/users/me", token=token).status == 200
    assert api.call("GET", "/users/me", token=other).status == 401
    assert api.login(username, password=PASSWORD, ip="192.0.2.90").status == 401
    assert api.login(username, password="a new secret", ip="192.0.2.91").status == 201


@pytest.mark.parametrize(
    ("new", "confirm", "expected"),
    [
        ("a new secret", "another one", "PASSWORDS_DO_NOT_MATCH_ERROR"),
        ("short", "short", "INVALID_FIELDS_ERROR"),
        ("x" * 65, "x" * 65, "INVALID_FIELDS_ERROR"),
        (12345678, 12345678, "MISSING_FIELDS_ERROR"),
    ],
)
def test_new_passwords_are_validated_before_the_limit(
    api: Api, new: Any, confirm: Any, expected: str
) -> None:
    _, token = new_user(api)
    reply = put(
        api,
        "/users/me/password",
        token,
        {"password": PASSWORD, "newPassword": new, "confirmNewPassword": confirm},
    )
    assert (reply.status, code(reply)) == (400, expected)
    assert header(reply, "RateLimit-Limit") is None


# ---------------------------------------------------------------------------------------------- domain


def add_domain(stack: Stack, name: str, *, subdomains: bool) -> None:
    DynamoDomains(stack.dynamodb, stack.table("DomainsTable")).put(
        name, subdomains=subdomains, now="2026-01-01T00:00:00.000Z"
    )


def test_domain_change_normalises_the_subdomain(api: Api, stack: Stack) -> None:
    add_domain(stack, "files.example", subdomains=True)
    _, token = new_user(api)
    reply = put(
        api, "/users/me/domain", token, {"domain": "Files.Example", "subdomain": "  My Cool  Site!! "}
    )
    assert reply.status == 200, reply.body
    assert (reply.body["domain"], reply.body["subdomain"]) == ("files.example", "my-cool-site")


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        ({"domain": "nope.example"}, 404, "INVALID_DOMAIN_ERROR"),
        ({"domain": "plain.example", "subdomain": "me"}, 400, "SUBDOMAIN_NOT_ALLOWED_ERROR"),
        ({"domain": "files.example", "subdomain": "a" * 64}, 400, "SUBDOMAIN_TOO_LONG_ERROR"),
        ({"domain": 5}, 400, "MISSING_FIELDS_ERROR"),
    ],
)
def test_domain_change_refusals(
    api: Api, stack: Stack, body: dict[str, Any], status: int, expected: str
) -> None:
    add_domain(stack, "files.example", subdomains=True)
    add_domain(stack, "plain.example", subdomains=False)
    _, token = new_user(api)
    reply = put(api, "/users/me/domain", token, body)
    assert (reply.status, code(reply)) == (status, expected)


def test_domains_are_listed_and_read_one_by_one(api: Api, stack: Stack) -> None:
    add_domain(stack, "b.example", subdomains=False)
    add_domain(stack, "a.example", subdomains=True)
    _, token = new_user(api)
    listed = api.call("GET", "/domains?limit=2&offset=1", token=token)
    assert listed.status == 200
    assert listed.body["count"] == 3  # with the deployment's default domain
    assert [d["id"] for d in listed.body["items"]] == ["b.example", "nimbus.test"]
    one = api.call("GET", "/domains/a.example", token=token)
    assert (one.status, one.body["subdomains"]) == (200, True)
    missing = api.call("GET", "/domains/none.example", token=token)
    assert (missing.status, code(missing)) == (404, "INVALID_DOMAIN_ERROR")


def test_domains_limit_minus_one_lists_every_domain_as_upstream_and_other_odd_limits_the_default(
    api: Api, stack: Stack
) -> None:
    for n in range(55):
        add_domain(stack, f"d{n:02}.example", subdomains=False)
    _, token = new_user(api)

    whole = api.call("GET", "/domains?limit=-1", token=token)
    assert (whole.status, whole.body["count"], len(whole.body["items"])) == (200, 56, 56)
    assert (
        api.call("GET", "/domains?limit=-1&offset=50", token=token).body["items"] == whole.body["items"][50:]
    )
    for odd in ("-2", "-9223372036854775808", "all", "9223372036854775807"):
        page = api.call("GET", f"/domains?limit={odd}", token=token)
        assert (page.status, len(page.body["items"])) == (200, 50), odd
    beyond = api.call("GET", "/domains?offset=9223372036854775807&limit=-1", token=token)
    assert (beyond.status, beyond.body) == (200, {"count": 56, "items": []})


# ---------------------------------------------------------------------------------------------- delete


def test_deleting_the_account_removes_everything_and_frees_the_name(api: Api, stack: Stack) -> None:
    username, token = new_user(api)
    for n in range(3):
        assert api.login(username, ip=f"192.0.2.{10 + n}").status == 201
    reply = api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token)
    assert (reply.status, reply.body) == (
        200,
        {"code": "DELETE_USER_SUCCESS", "message": "User Successfully Deleted"},
    )
    assert stack.items("SessionsTable") == []
    # Only the known devices its sign-ins answered stay, until their TTL: found by their token's
    # hash alone, bound to an id no later account has (docs/security.md).
    assert {i["kind"]["S"] for i in stack.items("TokensTable")} == {"device"}
    assert [i for i in stack.items("UsersTable") if username in str(i)] == []
    assert api.register(username=username, ip="192.0.2.99").status == 201


@pytest.mark.parametrize("operation", ["BatchWriteItem", "TransactWriteItems"])
def test_a_deletion_cut_by_a_fault_leaves_a_usable_account_and_completes_when_retried(
    api: Api, stack: Stack, faults: Faults, operation: str
) -> None:
    username, token = new_user(api)
    api.login(username, ip="192.0.2.20")
    faults.fail("dynamodb", operation)
    assert api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token).status == 500
    faults.clear()
    assert api.call("GET", "/users/me", token=token).status == 200
    assert api.login(username, ip="192.0.2.21").status == 201
    assert api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token).status == 200
    assert api.register(username=username, ip="192.0.2.22").status == 201


# ---------------------------------------------------------------------------------------------- bodies


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"username": NaN, "password": "x"}', "INVALID_BODY_ERROR"),
        ('{"username": "a", "username": "b", "password": "x"}', "INVALID_BODY_ERROR"),
        ('{"username": "\\ud800", "password": "x"}', "INVALID_BODY_ERROR"),
        ("[]", "INVALID_BODY_ERROR"),
        ('{"username": "' + "a" * 70_000 + '"}', "BODY_TOO_LARGE_ERROR"),
        ('{"username": "bad name!", "password": "x"}', "INVALID_USERNAME_ERROR"),
        ('{"username": "\\u202eevil", "password": "x"}', "INVALID_USERNAME_ERROR"),
    ],
)
def test_hostile_bodies_get_the_contract_error_never_a_500(api: Api, raw: str, expected: str) -> None:
    _, token = new_user(api)
    reply = api.call("PUT", "/users/me/username", raw=raw, token=token)
    assert (reply.status, code(reply)) == (400, expected)


@pytest.mark.parametrize("name", ["line\nbreak", "nul\x00", "bidi\u202e", "tab\there"])
def test_session_names_with_control_characters_are_refused(api: Api, name: str) -> None:
    reply = api.call(
        "POST",
        "/register",
        {"username": "ctl_user", "email": "ctl@example.com", "password": PASSWORD},
        headers={"X-Session-Name": name},
        ip="192.0.2.40",
    )
    assert (reply.status, reply.body) == (
        400,
        {"code": "INVALID_FIELDS_ERROR", "message": "Invalid Fields", "fields": ["X-Session-Name"]},
    )


# ---------------------------------------------------------------------------- limits and kill switches


def _limited_request(api: Api, endpoint: str, token: str, n: int, ip: str = "203.0.113.50") -> Reply:
    """The n-th valid request to ``endpoint`` by one user (bodies that succeed every time)."""
    if endpoint == "PUT /users/me/username":
        return put(api, "/users/me/username", token, {"username": f"limited_{n}", "password": PASSWORD}, ip)
    if endpoint == "PUT /users/me/email":
        return put(
            api, "/users/me/email", token, {"email": f"limited{n}@example.org", "password": PASSWORD}, ip
        )
    if endpoint == "PUT /users/me/password":
        old, new = (PASSWORD, "another secret") if n % 2 == 0 else ("another secret", PASSWORD)
        body = {"password": old, "newPassword": new, "confirmNewPassword": new}
        return put(api, "/users/me/password", token, body, ip)
    if endpoint == "PUT /users/me/domain":
        return put(api, "/users/me/domain", token, {"domain": "nimbus.test", "subdomain": f"s{n}"}, ip)
    return api.call("GET", "/users/me/verify", token=token, ip=ip)


@pytest.mark.parametrize(
    ("endpoint", "limit"),
    [
        ("PUT /users/me/username", 3),
        ("PUT /users/me/email", 3),
        ("PUT /users/me/password", 5),
        ("PUT /users/me/domain", 20),
        ("GET /users/me/verify", 1),
    ],
)
def test_each_per_user_limit_of_the_seed_holds_exactly(
    api: Api, stack: Stack, endpoint: str, limit: int
) -> None:
    _, token = new_user(api)
    replies = [_limited_request(api, endpoint, token, n) for n in range(limit + 1)]
    assert [r.status for r in replies[:limit]] == [replies[0].status] * limit
    assert replies[0].status in {200, 201}
    assert (replies[-1].status, code(replies[-1])) == (429, "RATELIMITED_ERROR")
    assert header(replies[0], "RateLimit-Limit") == str(limit)
    assert header(replies[-1], "Retry-After") is not None
    other_ip = _limited_request(api, endpoint, token, limit + 1, ip="192.0.2.250")  # per user, not per IP
    assert other_ip.status == 429


@pytest.mark.parametrize(
    ("method", "path", "body", "switch", "feature"),
    [
        (
            "PUT",
            "/users/me/username",
            {"username": "blocked_name", "password": PASSWORD},
            "ACCOUNT_MODIFY",
            1,
        ),
        ("PUT", "/users/me/email", {"email": "b@example.com", "password": PASSWORD}, "ACCOUNT_MODIFY", 1),
        (
            "PUT",
            "/users/me/password",
            {"password": PASSWORD, "newPassword": "eight chars", "confirmNewPassword": "eight chars"},
            "ACCOUNT_MODIFY",
            1,
        ),
        ("PUT", "/users/me/domain", {"domain": "nimbus.test"}, "ACCOUNT_MODIFY", 1),
        ("GET", "/users/me/verify", None, "ACCOUNT_MODIFY", 1),
        ("PUT", "/users/verify", {"token": "x.y"}, "ACCOUNT_MODIFY", 1),
        ("DELETE", "/users/me", {"password": PASSWORD}, "ACCOUNT_DELETE", 2),
        ("GET", "/domains", None, "GLOBAL", 8),
    ],
)
def test_each_endpoint_answers_503_to_its_kill_switches_and_staff_pass(
    api: Api, stack: Stack, method: str, path: str, body: Any, switch: str, feature: int
) -> None:
    _, token = new_user(api)
    stack.set_switches(switch)
    reply = api.call(method, path, body, token=token)
    assert (reply.status, code(reply), reply.body.get("feature")) == (
        503,
        "SERVICE_UNAVAILABLE_ERROR",
        feature,
    )
    users = DynamoUsers(stack.dynamodb, stack.table("UsersTable"))
    user = users.get(token.split(".")[0])
    assert user is not None
    DynamoTransactor(stack.dynamodb).commit(users.change_ops(user, user.changed(staff=True)))
    assert api.call(method, path, body, token=token).status != 503
