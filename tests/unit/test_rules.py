"""Small rules: scopes, kill switch parsing, log levels, passwords, device names, error bodies."""

from __future__ import annotations

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.killswitches import KillSwitch, enabled_in, is_on, parameter_names, stored_value
from nimbus_core.domain.loglevels import normalize
from nimbus_core.domain.scopes import ALL_BITS, STAFF_BITS, Scope, grants
from nimbus_core.domain.useragent import device_name
from nimbus_core.sessions import passwords


def test_normal_sessions_and_scope_all_grant_everything() -> None:
    assert grants(None, Scope.STAFF_MODIFY_LOGLEVEL)
    assert grants(Scope.ALL, Scope.ACCOUNT_READ)


def test_scoped_sessions_need_the_exact_bit() -> None:
    assert grants(Scope.ACCOUNT_READ | Scope.SESSION_READ, Scope.ACCOUNT_READ)
    assert not grants(Scope.ACCOUNT_MODIFY, Scope.ACCOUNT_READ)
    assert not grants(0, Scope.ACCOUNT_READ)


def test_scope_table_covers_every_seed_bit() -> None:
    assert sum(s.value for s in Scope) == ALL_BITS
    assert Scope.STAFF_READ_ACCOUNTS in STAFF_BITS
    assert Scope.ACCOUNT_READ not in STAFF_BITS


def test_each_kill_switch_has_its_own_parameter_and_reads_on_or_off() -> None:
    names = parameter_names("/nimbus/dev/killswitches/")
    values = {names[KillSwitch.GLOBAL]: stored_value(True), names[KillSwitch.ACCOUNT_CREATE]: " ON\n"}
    values |= {names[KillSwitch.FILE_CREATE]: stored_value(False), names[KillSwitch.FILE_DELETE]: "yes"}

    assert names[KillSwitch.ACCOUNT_EMAIL_VERIFY] == "/nimbus/dev/killswitches/ACCOUNT_EMAIL_VERIFY"
    assert len(set(names.values())) == 9
    assert enabled_in(values, names) == {KillSwitch.GLOBAL, KillSwitch.ACCOUNT_CREATE}
    for junk in ("", None, "off", "true", "1", '["GLOBAL"]', "o n"):
        assert not is_on(junk)


@pytest.mark.parametrize(("given", "expected"), [("debug", "DEBUG"), (" Warn ", "WARN"), ("NONE", "NONE")])
def test_log_level_names_are_case_insensitive(given: str, expected: str) -> None:
    assert normalize(given) == expected


@pytest.mark.parametrize("given", ["10", 10, "TRACE", "", None, "WARNING"])
def test_numeric_and_unknown_log_levels_are_refused(given: object) -> None:
    assert normalize(given) is None


def test_passwords_use_argon2id_owasp_profile_and_verify_in_both_directions() -> None:
    stored = passwords.hash_password("correct horse")
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert passwords.verify_password(stored, "correct horse")
    assert not passwords.verify_password(stored, "correct horse ")
    assert not passwords.verify_password("not a hash", "x")
    assert not passwords.needs_rehash(stored)


def test_hashes_made_with_old_parameters_need_a_rehash() -> None:
    from argon2 import PasswordHasher

    old = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash("pw")
    assert passwords.needs_rehash(old)
    assert passwords.verify_password(old, "pw")


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        (
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            "Firefox 132 on Ubuntu",
        ),
        ("curl/8.5.0", "curl 8 on an unknown OS"),
        # The client library's own header: the parser does not know it, its product token names it.
        ("Cumulonimbus-Wrapper/5.1.0", "Cumulonimbus-Wrapper 5 on an unknown OS"),
        ("node", "node on an unknown OS"),
        ("MyApp/v2 (Linux)", "MyApp 2 on Linux"),
        ("\x00\x1b[31m", "Unknown client on an unknown OS"),
        ("/1.0", "Unknown client on an unknown OS"),
        (None, "Unknown device"),
        ("", "Unknown device"),
    ],
)
def test_device_names_read_naturally(agent: str | None, name: str) -> None:
    assert device_name(agent) == name


def test_device_names_are_at_most_64_characters() -> None:
    assert len(device_name("X" * 5000)) <= 64
    assert len(device_name("A" * 40 + "/1 (" + "Windows NT 10.0; " * 30 + ")")) <= 64


def test_error_bodies_carry_code_message_and_extras() -> None:
    error = NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["a"])
    assert (error.status, error.body()) == (
        400,
        {"code": "MISSING_FIELDS_ERROR", "message": "Missing Fields", "fields": ["a"]},
    )
    assert NimbusError(ErrorCode.INVALID_SESSION_ERROR, status=404).status == 404


def test_the_switches_and_the_log_level_fit_one_get_parameters_call() -> None:
    # GetParameters takes at most 10 names: a tenth switch would make every read fail.
    assert len(parameter_names("/nimbus/dev/killswitches")) + 1 <= 10
