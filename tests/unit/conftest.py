"""Unit tests run with the network disabled: they prove rules, not AWS calls."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network() -> object:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()


def _settings_fields() -> list[tuple[Any, Any]]:
    from tests.fakes import SETTINGS

    return [(field, getattr(SETTINGS, name)) for name, field in type(SETTINGS).model_fields.items()]


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> object:
    """Deployment settings as the template would set them (names only; nothing is reached)."""
    from nimbus_core import metrics
    from nimbus_core.settings import get_settings

    # The fakes' settings, as the template would set them (names only; nothing is reached).
    env = {field.alias: str(value) for field, value in _settings_fields() if field.alias}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    metrics.reset()
    yield
    get_settings.cache_clear()
    metrics.reset()
