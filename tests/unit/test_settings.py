"""Deployment settings are read from the environment the template sets, and refused when unusable."""

from __future__ import annotations

import pytest

from nimbus_core.platform.settings import Settings, SettingsError
from tests.fakes import SETTINGS


def _environment(**changes: str | None) -> dict[str, str]:
    env = SETTINGS.environment()
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def test_settings_round_trip_through_their_environment() -> None:
    assert Settings.from_environment(SETTINGS.environment()) == SETTINGS


def test_unset_optional_settings_take_their_defaults_and_others_are_ignored() -> None:
    env = _environment(SESSION_HOURS=None, CONFIG_CACHE_SECONDS=None, PATH="/usr/bin")
    settings = Settings.from_environment(env)
    assert (settings.session_hours, settings.config_cache_seconds) == (24, 10)


def test_every_missing_required_setting_is_named() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_environment(_environment(USERS_TABLE=None, SENDER_EMAIL=None))
    assert "USERS_TABLE is missing" in str(refused.value)
    assert "SENDER_EMAIL is missing" in str(refused.value)


@pytest.mark.parametrize(
    ("spelled", "value"), [("true", True), ("False", False), ("1", True), ("off", False)]
)
def test_switches_take_the_usual_spellings(spelled: str, value: bool) -> None:
    settings = Settings.from_environment(_environment(STAFF_REQUIRE_SECOND_FACTOR=spelled))
    assert settings.staff_require_second_factor is value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STAFF_REQUIRE_SECOND_FACTOR", "maybe"),
        ("SESSION_HOURS", "0"),
        ("SESSION_HOURS", "two"),
        ("CONFIG_CACHE_SECONDS", "11"),
        ("CONFIG_CACHE_SECONDS", "-1"),
        ("WEBAUTHN_USER_VERIFICATION", "always"),
    ],
)
def test_unusable_values_are_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_environment(_environment(**{name: value}))
