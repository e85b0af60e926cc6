"""Unit tests run with the network disabled: they prove rules, not AWS calls."""

from __future__ import annotations

import pytest
from pytest_socket import disable_socket, enable_socket

from tests.fakes import FakeWorld


@pytest.fixture(autouse=True)
def _no_network() -> object:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> object:
    """Deployment settings as the template would set them (names only; nothing is reached)."""
    from nimbus_core.platform import metrics
    from nimbus_core.platform.settings import get_settings

    # The fakes' settings, as the template would set them (names only; nothing is reached).
    from tests.fakes import SETTINGS

    env = SETTINGS.environment()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    metrics.reset()
    yield
    get_settings.cache_clear()
    metrics.reset()


@pytest.fixture
def world() -> FakeWorld:
    """A fresh world of in-memory fakes (every port of ``Deps``)."""
    from tests.fakes import fake_world

    return fake_world()
