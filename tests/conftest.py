"""Settings every test process shares, applied before any service module is imported."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Powertools names child loggers after the service when their module is imported; the functions get
# the name from the template (POWERTOOLS_SERVICE_NAME), so a test process importing a module before
# any handler would otherwise log through "service_undefined" and not the functions' logger.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "nimbus")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``long`` first, the others in their order. xdist's worksteal splits the
    list between its workers and a worker out of tests takes half of another's remaining ones, so a
    run ends on whatever is left then: with the long tests taken first, that is short tests, not one
    worker idle while the other runs a long one to the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture
def cheap_password_hashing() -> Iterator[None]:
    """argon2id's test profile in this process for the test (nimbus_core.sessions.passwords): the
    rules are the same, each hash takes milliseconds."""
    from nimbus_core.sessions import passwords

    passwords.use_profile(passwords.TEST_PROFILE)
    yield
    passwords.use_profile(passwords.PRODUCTION_PROFILE)
