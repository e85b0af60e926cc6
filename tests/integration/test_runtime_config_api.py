"""Kill switches and the log level through the API (CONTRACT section 11): staff with
their scope, reverified changes that land in SSM and reach every function within the cache age."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.runtime_config import SsmRuntimeConfig
from nimbus_core.domain.killswitches import KillSwitch
from tests.integration.conftest import Api, Clock, Stack
from tests.integration.test_staff_accounts import Staff, code, fresh_ip, new_user

NAMES = [s.name for s in KillSwitch]


@pytest.fixture
def staff(api: Api, stack: Stack, frozen: Clock) -> Staff:
    return Staff(api, stack, frozen)


def stored(stack: Stack, logical_id: str) -> str:
    name = stack.provisioned.parameters[logical_id]
    return str(stack.ssm.get_parameter(Name=name)["Parameter"]["Value"])


def states(reply: Any) -> dict[str, bool]:
    return {item["name"]: item["state"] for item in reply.body["items"]}


def another_container(stack: Stack) -> SsmRuntimeConfig:
    """The runtime configuration as a second, already warm container of another function reads it."""
    config = SsmRuntimeConfig(
        clients.ssm(),
        killswitch_path=os.environ["KILLSWITCH_PATH"],
        log_level_parameter=stack.provisioned.parameters["LogLevelParameter"],
        max_age=10,
    )
    config.current()
    return config


# ------------------------------------------------------------------------------------ kill switches


def test_the_nine_switches_are_listed_with_ids_names_and_states(staff: Staff, stack: Stack) -> None:
    stack.set_switches("FILE_CREATE")

    listed = staff.call("GET", "/killswitches")

    assert listed.status == 200, listed.body
    assert listed.body["count"] == 9
    assert [(i["id"], i["name"]) for i in listed.body["items"]] == list(enumerate(NAMES))
    assert [n for n, on in states(listed).items() if on] == ["FILE_CREATE"]


def test_enabling_a_switch_reverifies_lands_in_ssm_and_answers_the_full_list(
    api: Api, stack: Stack, staff: Staff, parameter_clock: Callable[[float], None]
) -> None:
    elsewhere = another_container(stack)

    unverified = staff.call("PUT", "/killswitches/0", {})
    enabled = staff.reverified("PUT", "/killswitches/0")

    assert (unverified.status, code(unverified)) == (400, "MISSING_FIELDS_ERROR")
    assert enabled.status == 200, enabled.body
    assert enabled.body["count"] == 9
    assert [n for n, on in states(enabled).items() if on] == ["ACCOUNT_CREATE"]
    assert stack.enabled_switches() == {"ACCOUNT_CREATE"}
    # This container applies it at once ...
    refused = api.register(username=f"late{fresh_ip().replace('.', '')}", ip=fresh_ip())
    assert (refused.status, refused.body.get("feature")) == (503, 0)
    # ... and another one, which read the switches a moment ago, within the 10 s cache age.
    assert KillSwitch.ACCOUNT_CREATE not in elsewhere.current().enabled_switches
    parameter_clock(10.5)
    assert KillSwitch.ACCOUNT_CREATE in elsewhere.current().enabled_switches


def test_disabling_one_keeps_the_others_and_disabling_all_clears_them(stack: Stack, staff: Staff) -> None:
    stack.set_switches("ACCOUNT_CREATE", "ACCOUNT_LOGIN", "GLOBAL")

    one = staff.reverified("DELETE", "/killswitches/8")
    everything = staff.reverified("DELETE", "/killswitches")

    assert [n for n, on in states(one).items() if on] == ["ACCOUNT_CREATE", "ACCOUNT_LOGIN"]
    assert not any(states(everything).values())
    assert stack.enabled_switches() == set()


def test_a_change_starts_from_the_stored_switches_not_a_stale_cache(stack: Stack, staff: Staff) -> None:
    staff.call("GET", "/killswitches")  # this container caches "none enabled"
    stack.write_switches("ACCOUNT_LOGIN")  # an operator enables one, without telling the cache

    enabled = staff.reverified("PUT", "/killswitches/3")

    assert [n for n, on in states(enabled).items() if on] == ["ACCOUNT_EMAIL_VERIFY", "ACCOUNT_LOGIN"]


def test_two_changes_of_different_switches_interleaved_keep_both(stack: Stack) -> None:
    first, second = another_container(stack), another_container(stack)

    def enable_create_after_the_other_lands(stored: frozenset[KillSwitch]) -> frozenset[KillSwitch]:
        # Between this change's read and its write, another container enables another switch: with
        # one shared parameter, this write would put back the state it read and lose that change.
        second.write_killswitches(lambda now: now | {KillSwitch.ACCOUNT_LOGIN})
        return stored | {KillSwitch.ACCOUNT_CREATE}

    first.write_killswitches(enable_create_after_the_other_lands)

    assert stack.enabled_switches() == {"ACCOUNT_CREATE", "ACCOUNT_LOGIN"}


def test_disabling_all_interleaved_with_an_enable_leaves_the_late_enable_on(stack: Stack) -> None:
    stack.set_switches("GLOBAL")
    first, second = another_container(stack), another_container(stack)

    def clear_while_another_enables(_stored: frozenset[KillSwitch]) -> frozenset[KillSwitch]:
        second.write_killswitches(lambda now: now | {KillSwitch.FILE_CREATE})
        return frozenset()

    after = first.write_killswitches(clear_while_another_enables)

    # "Disable all" writes only the switches it saw on; the enable that landed after its read stays.
    assert stack.enabled_switches() == {"FILE_CREATE"}
    assert after.enabled_switches == {KillSwitch.FILE_CREATE}


def test_a_change_writes_only_the_switches_it_changes(stack: Stack, staff: Staff) -> None:
    stack.set_switches("ACCOUNT_LOGIN", "GLOBAL")
    puts: list[str] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        puts.append(params["Name"].rsplit("/", 1)[1])

    events = clients.ssm().meta.events  # the functions' own client
    events.register("provide-client-params.ssm.PutParameter", watch)
    try:
        staff.reverified("PUT", "/killswitches/5")
        staff.reverified("PUT", "/killswitches/5")  # already on: no write
        staff.reverified("DELETE", "/killswitches")
    finally:
        events.unregister("provide-client-params.ssm.PutParameter", watch)

    assert puts == ["FILE_CREATE", "ACCOUNT_LOGIN", "FILE_CREATE", "GLOBAL"]


@pytest.mark.parametrize("switch", ["9", "-1", "x", "ACCOUNT_CREATE", "1.0", "٣"])
def test_an_unknown_switch_is_400_before_reverification(staff: Staff, switch: str) -> None:
    refused = staff.call("PUT", f"/killswitches/{switch}", {})

    assert (refused.status, code(refused), refused.body["fields"]) == (400, "INVALID_FIELDS_ERROR", ["id"])


# Spellings of a number that int() reads as a switch but that are not its canonical decimal id:
# leading zeros (a long run of them too), signs, decimals, blanks, digit separators, other scripts'
# digits (int() reads Arabic-Indic and fullwidth digits), hexadecimal, and more digits than int()
# parses at all.
NOT_CANONICAL = [
    "08", "04", "00", "+4", "-0", "4.0", " 4", "4 ", "4_0", "0x4", "\u0664", "\uff14", "0" * 40 + "8",
    "0" * 5000 + "8", "4" * 5000,
]  # fmt: skip


@pytest.mark.parametrize("encoded", [True, False], ids=["percent-encoded", "as-typed"])
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
@pytest.mark.parametrize("spelling", NOT_CANONICAL, ids=lambda s: ascii(s) if len(s) < 9 else len(s))
def test_only_the_canonical_decimal_id_names_a_switch(
    stack: Stack, staff: Staff, method: str, spelling: str, encoded: bool
) -> None:
    # Every switch on for DELETE, so that a spelling read as some switch's number would turn it off.
    before = set(NAMES) if method == "DELETE" else set()
    stack.set_switches(*before)
    segment = quote(spelling, safe="") if encoded else spelling

    refused = staff.reverified(method, f"/killswitches/{segment}")

    assert (refused.status, code(refused), refused.body["fields"]) == (400, "INVALID_FIELDS_ERROR", ["id"])
    assert stack.enabled_switches() == before


def test_an_answered_challenge_cannot_change_a_switch_twice(api: Api, staff: Staff) -> None:
    first = api.call(
        "PUT", "/killswitches/5", {"password": "correct horse"}, token=staff.token, ip=fresh_ip()
    )
    staff.next_step()
    answer = {"token": first.body["token"], "type": "totp", "code": staff.totp.at(staff.frozen.now)}

    done = api.call("PUT", "/killswitches/5", {"2fa": answer}, token=staff.token, ip=fresh_ip())
    replayed = api.call("DELETE", "/killswitches/5", {"2fa": answer}, token=staff.token, ip=fresh_ip())

    assert done.status == 200, done.body
    assert (replayed.status, code(replayed)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert states(api.call("GET", "/killswitches", token=staff.token))["FILE_CREATE"] is True


def test_switches_are_staff_only_with_their_scope(api: Api) -> None:
    _, _, token = new_user(api)

    for method, path in (("GET", "/killswitches"), ("PUT", "/killswitches/1"), ("DELETE", "/killswitches")):
        refused = api.call(method, path, {"password": "correct horse"}, token=token)
        assert (refused.status, code(refused)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR"), path


# ------------------------------------------------------------------------------------ log level


def test_the_log_level_is_read_and_set_case_insensitively(
    stack: Stack, staff: Staff, log_level: Callable[[str], None]
) -> None:
    before = staff.call("GET", "/loglevel")

    changed = staff.reverified("PATCH", "/loglevel", name="wArN")

    assert (before.status, before.body) == (200, {"name": "INFO"})
    assert (changed.status, changed.body) == (200, {"name": "WARN"})
    assert stored(stack, "LogLevelParameter") == "WARN"
    assert staff.call("GET", "/loglevel").body == {"name": "WARN"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("verbose", "INVALID_LOGLEVEL_ERROR"),
        ("10", "INVALID_LOGLEVEL_ERROR"),
        ("", "INVALID_LOGLEVEL_ERROR"),
        ("WARNING", "INVALID_LOGLEVEL_ERROR"),
        (10, "MISSING_FIELDS_ERROR"),
        (None, "MISSING_FIELDS_ERROR"),
    ],
)
def test_anything_but_the_five_names_is_refused_before_reverification(
    staff: Staff, name: object, expected: str
) -> None:
    refused = staff.call("PATCH", "/loglevel", {"name": name})

    assert (refused.status, code(refused)) == (400, expected)


def test_a_new_level_applies_to_every_functions_logs_within_the_cache_age(
    api: Api,
    stack: Stack,
    staff: Staff,
    service_logs: io.StringIO,
    log_level: Callable[[str], None],
    parameter_clock: Callable[[float], None],
) -> None:
    elsewhere = another_container(stack)
    assert staff.reverified("PATCH", "/loglevel", name="none").status == 200
    start = len(service_logs.getvalue())
    quiet, _, _ = new_user(api)  # AuthFunction logs "user registered" at INFO
    silent = service_logs.getvalue()[start:]

    assert staff.reverified("PATCH", "/loglevel", name="Info").status == 200
    start = len(service_logs.getvalue())
    heard, _, _ = new_user(api)
    loud = service_logs.getvalue()[start:]

    assert quiet not in silent
    assert [line for line in silent.splitlines() if '"audit"' not in line] == []
    assert '"message":"user registered"' in loud
    assert heard in loud
    # A container of another function that read the level before: within the 10 s cache age.
    assert elsewhere.current().log_level == "INFO"
    stack.ssm.put_parameter(
        Name=stack.provisioned.parameters["LogLevelParameter"], Value="ERROR", Type="String", Overwrite=True
    )
    assert elsewhere.current().log_level == "INFO"
    parameter_clock(10.5)
    assert elsewhere.current().log_level == "ERROR"
