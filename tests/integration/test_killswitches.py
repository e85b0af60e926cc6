"""Kill switches: which switch closes which endpoint, GLOBAL, staff, the order of checks and the SSM cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nimbus_core.adapters import container
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.platform.settings import get_settings
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_staff_accounts import Staff

SWITCHES = {
    "ACCOUNT_CREATE": 0,
    "ACCOUNT_MODIFY": 1,
    "ACCOUNT_DELETE": 2,
    "ACCOUNT_EMAIL_VERIFY": 3,
    "ACCOUNT_LOGIN": 4,
    "FILE_CREATE": 5,
    "FILE_MODIFY": 6,
    "FILE_DELETE": 7,
    "GLOBAL": 8,
}
PASSWORD = "correct horse"


def unavailable(feature: int) -> dict[str, Any]:
    return {"code": "SERVICE_UNAVAILABLE_ERROR", "message": "Service Unavailable", "feature": feature}


def all_but(*names: str) -> list[str]:
    return [name for name in SWITCHES if name not in names]


def write_switches(stack: Stack, *names: str) -> None:
    """Turn exactly ``names`` on WITHOUT dropping the functions' cached copy (what an operator does)."""
    stack.write_switches(*names)


def make_staff(stack: Stack, token: str) -> None:
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{token.partition('.')[0]}"}},
        UpdateExpression="SET staff = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )


def counted(stack: Stack) -> dict[str, int]:
    """Rate-limit counters by key."""
    return {i["pk"]["S"]: int(i["count"]["N"]) for i in stack.items("CountersTable")}


# ---------------------------------------------------------------- each endpoint's switches


@pytest.mark.parametrize("switch", ["ACCOUNT_CREATE", "ACCOUNT_EMAIL_VERIFY"])
def test_each_register_switch_closes_register_with_its_number(api: Api, stack: Stack, switch: str) -> None:
    stack.set_switches(switch)

    reply = api.register()

    assert reply.status == 503, reply.body
    assert reply.body == unavailable(SWITCHES[switch])
    assert [stack.items(t) for t in ("UsersTable", "SessionsTable", "TokensTable")] == [[], [], []]
    assert stack.emails == []
    assert counted(stack) == {}  # refused before the rate limit


def test_account_login_closes_login_with_its_number(api: Api, stack: Stack, token: str) -> None:
    sessions_before = stack.items("SessionsTable")
    stack.set_switches("ACCOUNT_LOGIN")

    reply = api.login("alice", PASSWORD)

    assert reply.status == 503, reply.body
    assert reply.body == unavailable(4)
    assert stack.items("SessionsTable") == sessions_before
    assert not any(key.startswith("login#") for key in counted(stack))


def test_switches_of_other_endpoints_do_not_close_register(api: Api, stack: Stack) -> None:
    stack.set_switches(*all_but("ACCOUNT_CREATE", "ACCOUNT_EMAIL_VERIFY", "GLOBAL"))

    reply = api.register()

    assert reply.status == 201, reply.body


def test_switches_of_other_endpoints_do_not_close_login(api: Api, stack: Stack, token: str) -> None:
    stack.set_switches(*all_but("ACCOUNT_LOGIN", "GLOBAL"))

    reply = api.login("alice", PASSWORD)

    assert reply.status == 201, reply.body


def test_no_switch_but_global_closes_get_users_me_or_get_root(api: Api, stack: Stack, token: str) -> None:
    stack.set_switches(*all_but("GLOBAL"))

    me = api.call("GET", "/users/me", token=token)
    root = api.call("GET", "/")

    assert me.status == 200, me.body
    assert root.status == 200, root.body


def test_turning_a_switch_off_reopens_the_endpoint(api: Api, stack: Stack) -> None:
    stack.set_switches("ACCOUNT_CREATE")
    assert api.register(ip="192.0.2.1").status == 503

    stack.set_switches()
    reply = api.register(ip="192.0.2.1")

    assert reply.status == 201, reply.body


# ---------------------------------------------------------------- GLOBAL


def test_global_closes_every_endpoint_with_number_8(api: Api, stack: Stack, token: str) -> None:
    stack.set_switches("GLOBAL")

    replies = {
        "GET /": api.call("GET", "/"),
        "GET /users/me": api.call("GET", "/users/me", token=token),
        "POST /register": api.register("bob", ip="198.51.100.2"),
        "POST /login": api.login("alice", PASSWORD),
    }

    assert {route: (r.status, r.body) for route, r in replies.items()} == {
        route: (503, unavailable(8)) for route in replies
    }


@pytest.mark.parametrize(
    ("switches", "route"),
    [
        (("ACCOUNT_LOGIN", "GLOBAL"), "login"),
        (("GLOBAL", "ACCOUNT_LOGIN"), "login"),
        (("ACCOUNT_CREATE", "GLOBAL"), "register"),
        (("ACCOUNT_EMAIL_VERIFY", "ACCOUNT_CREATE", "GLOBAL"), "register"),
    ],
)
def test_global_wins_over_the_endpoints_own_switch(
    api: Api, stack: Stack, token: str, switches: tuple[str, ...], route: str
) -> None:
    stack.set_switches(*switches)

    reply = api.login("alice", PASSWORD) if route == "login" else api.register("bob", ip="198.51.100.2")

    assert reply.status == 503, reply.body
    assert reply.body == unavailable(8)


def test_staff_pass_global_on_get_users_me_and_get_root(api: Api, stack: Stack, token: str) -> None:
    make_staff(stack, token)
    stack.set_switches("GLOBAL")

    me = api.call("GET", "/users/me", token=token)
    root = api.call("GET", "/", token=token)

    assert me.status == 200, me.body
    assert (me.body["username"], me.body["staff"]) == ("alice", True)
    assert root.status == 200, root.body
    assert root.body == {"name": "nimbus", "version": "0.1.0"}


def test_non_staff_and_banned_staff_do_not_pass_global(api: Api, stack: Stack, token: str) -> None:
    stack.set_switches("GLOBAL")
    assert api.call("GET", "/", token=token).body == unavailable(8)

    make_staff(stack, token)
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{token.partition('.')[0]}"}},
        UpdateExpression="SET bannedAt = :b",
        ExpressionAttributeValues={":b": {"S": "2027-01-01T00:00:00.000Z"}},
    )
    reply = api.call("GET", "/users/me", token=token)

    assert reply.status == 503, reply.body
    assert reply.body == unavailable(8)


def test_a_staff_caller_passes_a_register_switch_and_then_is_already_logged_in(
    api: Api, stack: Stack, token: str
) -> None:
    make_staff(stack, token)
    stack.set_switches("ACCOUNT_CREATE")

    reply = api.call(
        "POST",
        "/register",
        {"username": "bob", "email": "bob@example.com", "password": PASSWORD},
        token=token,
        ip="198.51.100.2",
    )

    assert reply.status == 401, reply.body
    assert reply.body == {"code": "INVALID_SESSION_ERROR", "message": "Invalid Session"}


# ---------------------------------------------------------------- order of checks


def test_the_503_comes_before_the_401_of_a_missing_session(api: Api, stack: Stack) -> None:
    stack.set_switches("GLOBAL")

    for token in (None, "garbage"):
        reply = api.call("GET", "/users/me", token=token)
        assert reply.status == 503, reply.body
        assert reply.body == unavailable(8)


def test_the_503_comes_before_the_401_of_an_already_logged_in_caller(
    api: Api, stack: Stack, token: str
) -> None:
    stack.set_switches("ACCOUNT_CREATE", "ACCOUNT_LOGIN")

    register = api.call(
        "POST",
        "/register",
        {"username": "bob", "email": "bob@example.com", "password": PASSWORD},
        token=token,
        ip="198.51.100.2",
    )
    login = api.call("POST", "/login", {"username": "alice", "password": PASSWORD}, token=token)

    assert (register.status, register.body) == (503, unavailable(0))
    assert (login.status, login.body) == (503, unavailable(4))


def test_the_503_comes_before_body_validation(api: Api, stack: Stack) -> None:
    stack.set_switches("ACCOUNT_CREATE", "ACCOUNT_LOGIN")

    register = api.call("POST", "/register", raw="not json")
    login = api.call("POST", "/login", {})

    assert (register.status, register.body) == (503, unavailable(0))
    assert (login.status, login.body) == (503, unavailable(4))


def test_the_503_comes_before_the_rate_limit_and_is_not_counted(api: Api, stack: Stack) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201
    stack.set_switches("ACCOUNT_CREATE")

    limited_ip = api.register("bob", ip="192.0.2.1")
    fresh_ip = api.register("bob", ip="192.0.2.2")

    assert (limited_ip.status, limited_ip.body) == (503, unavailable(0))
    assert (fresh_ip.status, fresh_ip.body) == (503, unavailable(0))
    stack.set_switches()
    assert api.register("bob", ip="192.0.2.2").status == 201


# ---------------------------------------------------------------- stored values


def test_unknown_switch_names_are_ignored_and_known_ones_still_apply(
    api: Api, stack: Stack, token: str
) -> None:
    stack.set_switches("NOT_A_SWITCH", "ACCOUNT_LOGIN", "global")

    login = api.login("alice", PASSWORD)
    me = api.call("GET", "/users/me", token=token)

    assert (login.status, login.body) == (503, unavailable(4))
    assert me.status == 200, me.body


@pytest.mark.parametrize("value", ["yes", "1", "true", "on!", "null", '["GLOBAL"]'])
def test_a_malformed_switch_value_reads_as_off_and_never_answers_500(
    api: Api, stack: Stack, token: str, value: str
) -> None:
    name = stack.switch_parameters[KillSwitch.GLOBAL]
    stack.ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
    container.reset()

    me = api.call("GET", "/users/me", token=token)

    assert me.status == 200, me.body


@pytest.mark.parametrize("value", ["on", "ON", " On\n"])
def test_on_in_any_case_turns_a_switch_on(api: Api, stack: Stack, token: str, value: str) -> None:
    name = stack.switch_parameters[KillSwitch.GLOBAL]
    stack.ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
    container.reset()

    me = api.call("GET", "/users/me", token=token)

    assert (me.status, me.body) == (503, unavailable(8))


def test_a_deleted_switch_parameter_fails_closed_with_500_not_open(api: Api, stack: Stack) -> None:
    stack.ssm.delete_parameter(Name=stack.switch_parameters[KillSwitch.ACCOUNT_LOGIN])
    container.reset()

    reply = api.call("GET", "/")
    stack.write_switches()  # put it back for the tests that follow

    assert reply.status == 500, reply.body


# ---------------------------------------------------------------- the cache


def test_a_switch_flipped_in_ssm_is_not_seen_while_the_cached_copy_is_fresh(
    api: Api, stack: Stack, parameter_clock: Callable[[float], None]
) -> None:
    assert api.call("GET", "/").status == 200  # the function reads and caches the switches
    write_switches(stack, "GLOBAL")

    assert api.call("GET", "/").status == 200
    parameter_clock(7)  # a read is kept for a random 75-100 % of the 10 s, so at least 7.5 s
    reply = api.call("GET", "/")

    assert reply.status == 200, reply.body


def test_a_switch_flipped_in_ssm_is_seen_once_the_cache_age_has_passed(
    api: Api, stack: Stack, parameter_clock: Callable[[float], None]
) -> None:
    assert get_settings().config_cache_seconds == 10
    assert api.call("GET", "/").status == 200
    write_switches(stack, "GLOBAL")

    parameter_clock(11)
    reply = api.call("GET", "/")

    assert reply.status == 503, reply.body
    assert reply.body == unavailable(8)


def test_without_a_cache_a_switch_flipped_in_ssm_is_seen_at_once(
    api: Api, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFIG_CACHE_SECONDS", "0")
    get_settings.cache_clear()
    container.reset()
    assert api.call("GET", "/").status == 200

    write_switches(stack, "GLOBAL")
    closed = api.call("GET", "/")
    write_switches(stack)
    reopened = api.call("GET", "/")

    assert (closed.status, closed.body) == (503, unavailable(8))
    assert reopened.status == 200, reopened.body


# ---------------------------------------------------------------- a staff member whose login is locked


def test_a_staff_member_whose_login_someone_locked_still_flips_a_switch_reverified(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    # The login lock holds logins only (CONTRACT section 8): whoever guesses at a staff member's
    # name must not also take the kill switches from them.
    staff = Staff(api, stack, frozen)
    for n in range(10):
        assert api.login(staff.username, "a guess!", ip=f"192.0.2.{n + 10}").status == 401
    assert api.login(staff.username, PASSWORD, ip="192.0.2.200").status == 429

    enabled = staff.reverified("PUT", "/killswitches/5")

    assert enabled.status == 200, enabled.body
    assert {i["name"]: i["state"] for i in enabled.body["items"]}["FILE_CREATE"] is True
