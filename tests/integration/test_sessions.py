"""Sessions: list, read, rename and revoke them (own and staff), and scoped sessions."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.scopes import ALL_BITS, STAFF_BITS, Scope
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import NOW, Api, Clock, Faults, Stack
from tests.staff import promote

PASSWORD = "correct horse"
DAY = 86400
_ips = itertools.count(1)


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def fresh_ip() -> str:
    n = next(_ips)
    return f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}"


def new_user(api: Api, **extra: Any) -> tuple[str, str]:
    """A fresh user; (username, token of its first session)."""
    username = f"u{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=fresh_ip(), **extra)
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def login(api: Api, username: str, **extra: Any) -> str:
    reply = api.login(username=username, ip=fresh_ip(), **extra)
    assert reply.status == 201, reply.body
    return str(reply.body["token"])


def sid(token: str) -> str:
    return token.split(".")[1]


def uid(token: str) -> str:
    return token.split(".", maxsplit=1)[0]


def me(api: Api, token: str) -> Reply:
    """GET /users/me: served by another function than the sessions endpoints."""
    return api.call("GET", "/users/me", token=token)


def scoped(
    api: Api, token: str, flags: int, *, name: str = "key", ip: str | None = None, **extra: Any
) -> Reply:
    body = {"name": name, "permissionFlags": flags, "password": PASSWORD, **extra}
    return api.call("POST", "/users/me/sessions", body, token=token, ip=ip or fresh_ip())


def scoped_token(api: Api, token: str, flags: int) -> str:
    reply = scoped(api, token, flags)
    assert reply.status == 201, reply.body
    return str(reply.body["token"])


def make_staff(stack: Stack, token: str, *, with_factor: bool = True) -> None:
    """Staff, with the second factor staff endpoints require (unless told otherwise)."""
    promote(
        stack.dynamodb, stack.table("UsersTable"), uid(token), with_factor=with_factor, sealer=stack.sealer
    )


# ------------------------------------------------------------------------------------------- listing


def test_list_is_newest_first_with_the_total_count_and_full_records(api: Api) -> None:
    username, first = new_user(api)
    later = [login(api, username, rememberMe=True) for _ in range(3)]

    reply = api.call("GET", "/users/me/sessions", token=first)

    assert reply.status == 200
    assert reply.body["count"] == 4
    assert [s["id"] for s in reply.body["items"]] == [sid(t) for t in [*reversed(later), first]]
    item = reply.body["items"][0]
    assert set(item) == {"id", "exp", "name", "permissionFlags", "usedAt", "createdAt", "updatedAt"}
    assert item["permissionFlags"] is None
    assert item["name"] == "pytest 9 on an unknown OS"


@pytest.mark.parametrize(
    ("query", "expected_ids", "count"),
    [
        ("?limit=2", [0, 1], 5),
        ("?limit=2&offset=2", [2, 3], 5),
        ("?offset=4", [4], 5),
        ("?offset=9", [], 5),
        ("?limit=0", [], 5),
        ("?limit=500", [0, 1, 2, 3, 4], 5),  # clamped to 50
        ("?limit=abc&offset=xyz", [0, 1, 2, 3, 4], 5),  # unparsable: the defaults
        ("?limit=-3&offset=-1", [0, 1, 2, 3, 4], 5),  # negative: the defaults, never an empty page
        ("?limit=-1", [0, 1, 2, 3, 4], 5),  # GET /domains' "every item" is the default here
        ("?offset=9223372036854775807&limit=9223372036854775807", [], 5),  # past any list: empty
    ],
)
def test_pagination_follows_the_contract(api: Api, query: str, expected_ids: list[int], count: int) -> None:
    username, first = new_user(api)
    tokens = [first, *(login(api, username) for _ in range(4))]
    newest_first = [sid(t) for t in reversed(tokens)]

    reply = api.call("GET", f"/users/me/sessions{query}", token=first)

    assert reply.status == 200, reply.body
    assert reply.body["count"] == count
    assert [s["id"] for s in reply.body["items"]] == [newest_first[i] for i in expected_ids]


def test_expired_sessions_never_authenticate_appear_or_count(api: Api, frozen: Clock) -> None:
    """moto never deletes TTL items, like DynamoDB's late TTL: the service must ignore them itself."""
    username, short = new_user(api)  # 24 hours
    long = login(api, username, rememberMe=True)  # 30 days

    frozen.now = NOW + DAY  # exactly at exp: already over
    assert me(api, short).status == 401
    listed = api.call("GET", "/users/me/sessions", token=long)
    assert listed.body["count"] == 1
    assert [s["id"] for s in listed.body["items"]] == [sid(long)]
    assert api.call("GET", f"/users/me/sessions/{sid(short)}", token=long).status == 404
    assert api.call("PATCH", f"/users/me/sessions/{sid(short)}", {"name": "x"}, token=long).status == 404
    assert api.call("DELETE", f"/users/me/sessions/{sid(short)}", token=long).status == 404
    bulk = api.call("DELETE", "/users/me/sessions", {"ids": [sid(short)]}, token=long)
    assert bulk.body["count"] == 0


def test_lists_are_per_user(api: Api) -> None:
    _, mine = new_user(api)
    _, theirs = new_user(api)

    reply = api.call("GET", "/users/me/sessions", token=mine)

    assert [s["id"] for s in reply.body["items"]] == [sid(mine)]
    assert sid(theirs) not in str(reply.body)


# ------------------------------------------------------------------------------------- one session


def test_get_me_is_the_calling_session_and_an_id_is_any_of_mine(api: Api) -> None:
    username, first = new_user(api)
    second = login(api, username)

    current = api.call("GET", "/users/me/sessions/me", token=second)
    other = api.call("GET", f"/users/me/sessions/{sid(first)}", token=second)

    assert current.status == 200
    assert current.body["id"] == sid(second)
    assert other.body["id"] == sid(first)


@pytest.mark.parametrize("bad", ["nope", "0" * 26, "x" * 2000, "%F0%9F%92%A5", "ALL"])
def test_unknown_session_ids_are_404_invalid_session(api: Api, bad: str) -> None:
    _, token = new_user(api)

    reply = api.call("GET", f"/users/me/sessions/{bad}", token=token)

    assert (reply.status, code(reply)) == (404, "INVALID_SESSION_ERROR")


def test_another_users_session_is_not_found_through_mine(api: Api) -> None:
    _, mine = new_user(api)
    _, theirs = new_user(api)

    for method, body in (("GET", None), ("PATCH", {"name": "mine now"}), ("DELETE", None)):
        reply = api.call(method, f"/users/me/sessions/{sid(theirs)}", body, token=mine)
        assert (reply.status, code(reply)) == (404, "INVALID_SESSION_ERROR"), method
    assert me(api, theirs).status == 200


@pytest.mark.parametrize("method", ["GET", "PATCH"])
@pytest.mark.parametrize("prefix", ["/users/me/sessions", "/users/{uid}/sessions"])
def test_sessions_all_is_never_taken_for_a_session_id(api: Api, method: str, prefix: str) -> None:
    _, token = new_user(api)
    path = prefix.format(uid=uid(token)) + "/all"

    for caller in (token, None):
        reply = api.call(method, path, {"name": "x"}, token=caller)
        assert (reply.status, code(reply)) == (404, "INVALID_ENDPOINT_ERROR")


def test_me_is_never_taken_for_a_user_id(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    make_staff(stack, token)

    # PATCH /users/me/sessions/<sid> exists; a method no literal route has reaches /users/{uid}/...
    reply = api.call("PUT", "/users/me/sessions", {}, token=token)

    assert (reply.status, code(reply)) == (404, "INVALID_ENDPOINT_ERROR")


# ------------------------------------------------------------------------------------------- rename


def test_rename_trims_and_answers_the_renamed_session(api: Api, frozen: Clock) -> None:
    username, first = new_user(api)
    second = login(api, username)
    frozen.now = NOW + 60

    reply = api.call(
        "PATCH", f"/users/me/sessions/{sid(first)}", {"name": "  Work laptop 💻  "}, token=second
    )

    assert reply.status == 200, reply.body
    assert reply.body["name"] == "Work laptop 💻"
    assert reply.body["updatedAt"] == "2027-01-15T08:01:00.250Z"
    assert reply.body["createdAt"] == "2027-01-15T08:00:00.250Z"
    listed = api.call("GET", "/users/me/sessions", token=second).body["items"]
    assert [s["name"] for s in listed if s["id"] == sid(first)] == ["Work laptop 💻"]
    assert api.call("PATCH", "/users/me/sessions/me", {"name": "This one"}, token=first).body["id"] == sid(
        first
    )


@pytest.mark.parametrize(
    ("body", "status", "error", "fields"),
    [
        ({}, 400, "MISSING_FIELDS_ERROR", ["name"]),
        ({"name": None}, 400, "MISSING_FIELDS_ERROR", ["name"]),
        ({"name": 7}, 400, "MISSING_FIELDS_ERROR", ["name"]),
        ({"name": "   "}, 400, "INVALID_FIELDS_ERROR", ["name"]),
        ({"name": "x" * 65}, 400, "INVALID_FIELDS_ERROR", ["name"]),
        ({"name": "line\nbreak"}, 400, "INVALID_FIELDS_ERROR", ["name"]),
        ({"name": "bidi\u202eevil"}, 400, "INVALID_FIELDS_ERROR", ["name"]),
    ],
)
def test_rename_refuses_bad_names(
    api: Api, body: dict[str, Any], status: int, error: str, fields: list[str]
) -> None:
    _, token = new_user(api)

    reply = api.call("PATCH", "/users/me/sessions/me", body, token=token)

    assert (reply.status, code(reply), reply.body.get("fields")) == (status, error, fields)
    assert api.call("GET", "/users/me/sessions/me", token=token).body["name"] == "pytest 9 on an unknown OS"


def test_a_64_character_name_is_accepted(api: Api) -> None:
    _, token = new_user(api)

    reply = api.call("PATCH", "/users/me/sessions/me", {"name": "é" * 64}, token=token)

    assert reply.status == 200
    assert reply.body["name"] == "é" * 64


# ------------------------------------------------------------------------------------------- delete


def test_deleting_a_session_takes_effect_on_its_very_next_request(api: Api) -> None:
    username, first = new_user(api)
    second = login(api, username)
    assert me(api, first).status == 200  # warm: any cache would now hold the session

    reply = api.call("DELETE", f"/users/me/sessions/{sid(first)}", token=second)

    assert (reply.status, reply.body) == (
        200,
        {"code": "DELETE_SESSION_SUCCESS", "message": "Session Successfully Deleted"},
    )
    assert me(api, first).status == 401  # another function, another instance: the same answer
    assert api.call("GET", "/users/me/sessions", token=first).status == 401
    again = api.call("DELETE", f"/users/me/sessions/{sid(first)}", token=second)
    assert (again.status, code(again)) == (404, "INVALID_SESSION_ERROR")
    assert me(api, second).status == 200


def test_deleting_me_logs_the_caller_out(api: Api) -> None:
    _, token = new_user(api)

    assert api.call("DELETE", "/users/me/sessions/me", token=token).status == 200
    assert me(api, token).status == 401


def test_bulk_delete_counts_only_the_callers_live_sessions(api: Api) -> None:
    username, first = new_user(api)
    doomed = [login(api, username) for _ in range(3)]
    kept = login(api, username)
    _, stranger = new_user(api)
    ids = [*(sid(t) for t in doomed), sid(doomed[0]), new_id(), sid(stranger), "x" * 3000, "", "me"]

    reply = api.call("DELETE", "/users/me/sessions", {"ids": ids}, token=first)

    assert reply.status == 200, reply.body
    assert reply.body == {
        "code": "DELETE_SESSIONS_SUCCESS",
        "message": "Sessions Successfully Deleted",
        "count": 4,  # three logins and the caller (me); duplicates, unknown and foreign ids skipped
    }
    assert [me(api, t).status for t in [*doomed, first]] == [401] * 4
    assert me(api, kept).status == 200
    assert me(api, stranger).status == 200


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"ids": ["a"] * 51}, 400, "BODY_TOO_LARGE_ERROR"),
        ({"ids": "me"}, 400, "MISSING_FIELDS_ERROR"),
        ({"ids": [1, 2]}, 400, "MISSING_FIELDS_ERROR"),
        ({}, 400, "MISSING_FIELDS_ERROR"),
    ],
)
def test_bulk_delete_refuses_bad_id_lists(api: Api, body: dict[str, Any], status: int, error: str) -> None:
    _, token = new_user(api)

    reply = api.call("DELETE", "/users/me/sessions", body, token=token)

    assert (reply.status, code(reply)) == (status, error)
    assert me(api, token).status == 200


def test_fifty_ids_are_allowed_and_an_empty_list_deletes_nothing(api: Api) -> None:
    _, token = new_user(api)

    fifty = api.call("DELETE", "/users/me/sessions", {"ids": [new_id() for _ in range(50)]}, token=token)
    empty = api.call("DELETE", "/users/me/sessions", {"ids": []}, token=token)

    assert (fifty.status, fifty.body["count"]) == (200, 0)
    assert (empty.status, empty.body["count"]) == (200, 0)


# ---------------------------------------------------------------------------------------- revoke all


@pytest.mark.parametrize("query", ["", "?include-self=false", "?includeSelf=0", "?include-self=FALSE"])
def test_revoke_all_keeps_the_caller_by_default(api: Api, query: str) -> None:
    username, first = new_user(api)
    others = [login(api, username) for _ in range(3)]

    reply = api.call("DELETE", f"/users/me/sessions/all{query}", token=first)

    assert reply.status == 200, reply.body
    assert (code(reply), reply.body["count"]) == ("DELETE_SESSIONS_SUCCESS", 3)
    assert [me(api, t).status for t in others] == [401, 401, 401]
    assert me(api, first).status == 200
    listed = api.call("GET", "/users/me/sessions", token=first).body
    assert (listed["count"], [s["id"] for s in listed["items"]]) == (1, [sid(first)])


@pytest.mark.parametrize("query", ["?include-self=true", "?includeSelf=true", "?include-self=1"])
def test_revoke_all_with_include_self_logs_everyone_out(api: Api, query: str) -> None:
    username, first = new_user(api)
    other = login(api, username)

    reply = api.call("DELETE", f"/users/me/sessions/all{query}", token=first)

    assert (reply.status, reply.body["count"]) == (200, 2)
    assert me(api, first).status == 401
    assert me(api, other).status == 401
    assert login(api, username)  # the account itself is untouched


@pytest.mark.parametrize("query", ["?include-self=yes", "?includeSelf=2", "?include-self="])
def test_include_self_must_be_a_boolean(api: Api, query: str) -> None:
    username, first = new_user(api)
    other = login(api, username)

    reply = api.call("DELETE", f"/users/me/sessions/all{query}", token=first)

    assert (reply.status, code(reply), reply.body["fields"]) == (
        400,
        "INVALID_FIELDS_ERROR",
        ["include-self"],
    )
    assert me(api, other).status == 200


def test_revoke_all_from_a_revoked_view_does_not_keep_the_caller(api: Api, stack: Stack) -> None:
    """Two sessions revoking "all but mine" at once: the one that loses the race is revoked too. The
    race is replayed in order here: the second request was authenticated before the first committed."""
    from nimbus_core.adapters.container import production_deps
    from nimbus_core.sessions.auth import authenticate
    from nimbus_core.sessions.tokens import parse_session_token
    from sessions_api import service

    username, first = new_user(api)
    second = login(api, username)
    deps = production_deps()
    parsed = parse_session_token(second)
    assert parsed is not None
    stale_view = authenticate(deps, parsed, time.time())  # `second` as authenticated before `first` committed
    assert stale_view is not None

    assert api.call("DELETE", "/users/me/sessions/all", token=first).status == 200
    from nimbus_core.domain.errors import NimbusError

    with pytest.raises(NimbusError) as refused:
        service.revoke_all_sessions(
            deps,
            service.Owner.me(stale_view, Actor.user("203.0.113.9", stale_view.session)),
            keep_current=True,
            now=time.time(),
        )

    assert refused.value.code.name == "INVALID_SESSION_ERROR"
    assert me(api, first).status == 200
    assert me(api, second).status == 401


def test_a_fault_while_revoking_all_changes_nothing_and_a_retry_completes(api: Api, faults: Faults) -> None:
    username, first = new_user(api)
    other = login(api, username)
    faults.fail("dynamodb", "TransactWriteItems")

    failed = api.call("DELETE", "/users/me/sessions/all", token=first)

    assert (failed.status, code(failed)) == (500, "INTERNAL_SERVER_ERROR")
    assert me(api, other).status == 200
    faults.clear()
    assert api.call("DELETE", "/users/me/sessions/all", token=first).status == 200
    assert me(api, other).status == 401
    assert me(api, first).status == 200


def test_a_fault_in_a_bulk_delete_is_safe_to_retry(api: Api, faults: Faults) -> None:
    username, first = new_user(api)
    doomed = [login(api, username) for _ in range(2)]
    faults.fail("dynamodb", "BatchWriteItem")

    failed = api.call("DELETE", "/users/me/sessions", {"ids": [sid(t) for t in doomed]}, token=first)

    assert failed.status == 500
    faults.clear()
    retried = api.call("DELETE", "/users/me/sessions", {"ids": [sid(t) for t in doomed]}, token=first)
    assert (retried.status, retried.body["count"]) == (200, 2)
    assert [me(api, t).status for t in doomed] == [401, 401]


def test_session_deletes_are_switched_off_by_account_modify_number_1(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    stack.set_switches("ACCOUNT_MODIFY")

    for method, path, body in (
        ("DELETE", "/users/me/sessions/me", None),
        ("DELETE", "/users/me/sessions", {"ids": ["me"]}),
        ("DELETE", "/users/me/sessions/all", None),
    ):
        reply = api.call(method, path, body, token=token)
        assert (reply.status, code(reply), reply.body.get("feature")) == (503, "SERVICE_UNAVAILABLE_ERROR", 1)
    assert api.call("GET", "/users/me/sessions", token=token).status == 200
    assert me(api, token).status == 200


# ---------------------------------------------------------------------------------- scoped sessions


def test_scoped_session_is_created_with_its_token_shown_once(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    flags = Scope.ACCOUNT_READ | Scope.SESSION_READ

    reply = scoped(api, token, int(flags), name="  CI key  ")

    assert reply.status == 201, reply.body
    body = reply.body
    assert set(body) == {"id", "exp", "name", "permissionFlags", "usedAt", "createdAt", "updatedAt", "token"}
    assert (body["name"], body["permissionFlags"], body["exp"]) == ("CI key", int(flags), int(NOW) + DAY)
    assert me(api, body["token"]).status == 200
    listed = api.call("GET", "/users/me/sessions", token=token).body
    assert listed["count"] == 2
    assert "token" not in listed["items"][0]
    assert listed["items"][0]["permissionFlags"] == int(flags)
    one = api.call("GET", f"/users/me/sessions/{body['id']}", token=token).body
    assert "token" not in one
    assert body["token"].split(".")[2] not in str(listed)


def test_long_lived_scoped_sessions_last_ten_years(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)

    long = scoped(api, token, Scope.ALL, longLived=True)
    short = scoped(api, token, Scope.ALL, longLived=False)

    assert long.body["exp"] == int(NOW) + 3650 * DAY
    assert short.body["exp"] == int(NOW) + DAY
    frozen.now = NOW + 9 * 365 * DAY
    assert me(api, long.body["token"]).status == 200
    assert me(api, short.body["token"]).status == 401


@pytest.mark.parametrize(
    ("body", "error", "fields"),
    [
        ({"permissionFlags": 4}, "MISSING_FIELDS_ERROR", ["name"]),
        ({"name": "k"}, "MISSING_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": "4"}, "MISSING_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": True}, "MISSING_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": 4.5}, "MISSING_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": 4, "longLived": "yes"}, "MISSING_FIELDS_ERROR", ["longLived"]),
        ({"name": "k", "permissionFlags": 0}, "INVALID_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": -1}, "INVALID_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": ALL_BITS + 1}, "INVALID_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "k", "permissionFlags": 2**64}, "INVALID_FIELDS_ERROR", ["permissionFlags"]),
        ({"name": "", "permissionFlags": 4}, "INVALID_FIELDS_ERROR", ["name"]),
        ({"name": "k" * 65, "permissionFlags": 4}, "INVALID_FIELDS_ERROR", ["name"]),
    ],
)
def test_scoped_session_bodies_are_validated_before_the_password(
    api: Api, body: dict[str, Any], error: str, fields: list[str]
) -> None:
    _, token = new_user(api)

    reply = api.call("POST", "/users/me/sessions", body, token=token, ip=fresh_ip())

    assert (reply.status, code(reply), reply.body.get("fields")) == (400, error, fields)


def test_scoped_session_creation_reverifies_the_password(api: Api) -> None:
    _, token = new_user(api)

    missing = api.call(
        "POST", "/users/me/sessions", {"name": "k", "permissionFlags": 4}, token=token, ip=fresh_ip()
    )
    bypass = api.call(
        "POST",
        "/users/me/sessions",
        {"name": "k", "permissionFlags": 4, "2fa": {}},
        token=token,
        ip=fresh_ip(),
    )
    wrong = scoped(api, token, 4, password="wrong horse")

    assert (missing.status, code(missing), missing.body["fields"]) == (
        400,
        "MISSING_FIELDS_ERROR",
        ["password"],
    )
    assert (bypass.status, code(bypass)) == (400, "MISSING_FIELDS_ERROR")
    assert (wrong.status, code(wrong)) == (401, "INVALID_PASSWORD_ERROR")
    assert api.call("GET", "/users/me/sessions", token=token).body["count"] == 1


def test_staff_scopes_need_a_staff_user(api: Api, stack: Stack) -> None:
    _, user = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff, with_factor=False)  # a factor would ask for a second-factor answer

    refused = scoped(api, user, int(Scope.ACCOUNT_READ | Scope.STAFF_READ_SESSIONS))
    granted = scoped(api, staff, int(Scope.STAFF_READ_SESSIONS))

    assert (refused.status, code(refused)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert granted.status == 201
    assert api.call("GET", "/users/me/sessions", token=user).body["count"] == 1


def test_scoped_sessions_never_create_scoped_sessions_or_delete_the_account(api: Api) -> None:
    _, token = new_user(api)
    key = scoped_token(api, token, ALL_BITS & ~STAFF_BITS)  # every scope a non-staff user may hold

    created = api.call(
        "POST", "/users/me/sessions", {"name": "k", "permissionFlags": 1}, token=key, ip=fresh_ip()
    )
    deleted = api.call("DELETE", "/users/me", {}, token=key)

    assert (created.status, code(created)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert (deleted.status, code(deleted)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert me(api, token).status == 200


def test_scoped_session_creation_is_limited_to_four_per_five_minutes_per_ip(api: Api) -> None:
    _, token = new_user(api)
    ip = fresh_ip()

    replies = [scoped(api, token, 4, ip=ip) for _ in range(5)]

    assert [r.status for r in replies] == [201, 201, 201, 201, 429]
    assert replies[0].headers["RateLimit-Limit"] == "4"
    assert scoped(api, token, 4, ip=fresh_ip()).status == 201


@pytest.mark.parametrize(("switch", "feature"), [("ACCOUNT_MODIFY", 1), ("ACCOUNT_LOGIN", 4)])
def test_scoped_session_creation_has_two_kill_switches(
    api: Api, stack: Stack, switch: str, feature: int
) -> None:
    _, token = new_user(api)
    stack.set_switches(switch)

    reply = scoped(api, token, 4)

    assert (reply.status, reply.body.get("feature")) == (503, feature)


def test_a_scoped_session_is_revoked_like_any_other(api: Api) -> None:
    _, token = new_user(api)
    key = scoped_token(api, token, int(Scope.ACCOUNT_READ))

    assert api.call("DELETE", "/users/me/sessions/all", token=token).status == 200

    assert me(api, key).status == 401


# --------------------------------------------------------------------------------------------- staff


def test_staff_read_rename_and_revoke_another_users_sessions(api: Api, stack: Stack) -> None:
    username, target = new_user(api)
    second = login(api, username)
    _, staff = new_user(api)
    make_staff(stack, staff)
    base = f"/users/{uid(target)}/sessions"

    listed = api.call("GET", base, token=staff)
    one = api.call("GET", f"{base}/{sid(target)}", token=staff)
    renamed = api.call("PATCH", f"{base}/{sid(target)}", {"name": "Flagged"}, token=staff)

    assert (listed.status, listed.body["count"]) == (200, 2)
    assert [s["id"] for s in listed.body["items"]] == [sid(second), sid(target)]
    assert one.body["id"] == sid(target)
    assert renamed.body["name"] == "Flagged"
    assert api.call("DELETE", f"{base}/{sid(target)}", token=staff).status == 200
    assert me(api, target).status == 401
    third = login(api, username)
    bulk = api.call("DELETE", base, {"ids": [sid(second), "me", sid(staff)]}, token=staff)
    assert bulk.body["count"] == 1  # "me" is not the staff caller's session here
    assert me(api, staff).status == 200
    everything = api.call("DELETE", f"{base}/all", token=staff)
    assert (everything.status, everything.body["count"]) == (200, 1)
    assert me(api, third).status == 401
    assert me(api, staff).status == 200


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("GET", "/{sid}", None),
        ("PATCH", "/{sid}", {"name": "x"}),
        ("DELETE", "/{sid}", None),
        ("DELETE", "", {"ids": []}),
        ("DELETE", "/all", None),
    ],
)
def test_staff_endpoints_answer_unknown_users_and_sessions_and_refuse_non_staff(
    api: Api, stack: Stack, method: str, suffix: str, body: Any
) -> None:
    _, target = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff)

    def path(user: str, session: str) -> str:
        return f"/users/{user}/sessions" + suffix.format(sid=session)

    not_staff = api.call(method, path(uid(staff), sid(staff)), body, token=target)
    assert (not_staff.status, code(not_staff)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    anonymous = api.call(method, path(uid(target), sid(target)), body)
    assert (anonymous.status, code(anonymous)) == (401, "INVALID_SESSION_ERROR")
    for unknown_user in (new_id(), "nobody", "x" * 3000):
        reply = api.call(method, path(unknown_user, sid(target)), body, token=staff)
        assert (reply.status, code(reply)) == (404, "INVALID_USER_ERROR"), unknown_user
    if "{sid}" in suffix:
        reply = api.call(method, path(uid(target), new_id()), body, token=staff)
        assert (reply.status, code(reply)) == (404, "INVALID_SESSION_ERROR")
    assert me(api, target).status == 200


def test_staff_scopes_split_reading_from_modifying(api: Api, stack: Stack) -> None:
    _, target = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff, with_factor=False)
    reader = scoped_token(api, staff, int(Scope.STAFF_READ_SESSIONS))
    make_staff(stack, staff)  # staff endpoints require a second factor
    base = f"/users/{uid(target)}/sessions"

    assert api.call("GET", base, token=reader).status == 200
    refused = api.call("DELETE", f"{base}/all", token=reader)
    assert (refused.status, code(refused)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert me(api, target).status == 200


def test_revocation_by_staff_is_not_switched_off(api: Api, stack: Stack) -> None:
    """Kill switches never stop staff (the staff endpoints list none but GLOBAL)."""
    _, target = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff)
    stack.set_switches("GLOBAL", "ACCOUNT_MODIFY")

    reply = api.call("DELETE", f"/users/{uid(target)}/sessions/all", token=staff)

    assert reply.status == 200
    assert me(api, target).status in {401, 503}
    stack.set_switches()
    assert me(api, target).status == 401


def test_staff_may_work_on_their_own_sessions_through_the_staff_endpoints(api: Api, stack: Stack) -> None:
    """The target user is read with the caller's session: the same user twice is one key, once."""
    _, staff = new_user(api)
    make_staff(stack, staff)

    listed = api.call("GET", f"/users/{uid(staff)}/sessions", token=staff)
    one = api.call("GET", f"/users/{uid(staff)}/sessions/{sid(staff)}", token=staff)

    assert (listed.status, listed.body["count"]) == (200, 1)
    assert one.body["id"] == sid(staff)


def test_staff_endpoints_require_the_staff_caller_to_have_a_second_factor(api: Api, stack: Stack) -> None:
    _, target = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff, with_factor=False)

    refused = api.call("GET", f"/users/{uid(target)}/sessions", token=staff)
    own = api.call("GET", "/users/me/sessions", token=staff)  # non-staff endpoints never ask
    make_staff(stack, staff)
    allowed = api.call("GET", f"/users/{uid(target)}/sessions", token=staff)

    assert (refused.status, code(refused)) == (401, "ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR")
    assert own.status == 200
    assert allowed.status == 200


def test_the_staff_second_factor_rule_is_a_deployment_setting(
    api: Api, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nimbus_core.adapters import container
    from nimbus_core.platform.settings import get_settings

    _, target = new_user(api)
    _, staff = new_user(api)
    make_staff(stack, staff, with_factor=False)
    monkeypatch.setenv("STAFF_REQUIRE_SECOND_FACTOR", "false")
    get_settings.cache_clear()
    container.reset()

    reply = api.call("GET", f"/users/{uid(target)}/sessions", token=staff)

    assert reply.status == 200
