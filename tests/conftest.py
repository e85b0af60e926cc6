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
    """The tests marked ``long`` or ``waits`` at the head of every xdist worker's share, the
    others after them in their order.

    xdist's worksteal hands each worker an equal run of the list (by count, in order) and a worker
    out of tests takes half of another's remaining ones from its end, so a run ends on whatever is
    left then. Run first, the tests that compute for many seconds in one go or wait on processes,
    sleeps and backoff are done while the other phases of `make test` keep the cores busy, and a
    run ends on short tests that use its cores, not on one worker waiting while the other is idle.
    """
    early = {id(item) for item in items if any(item.iter_markers("long")) or any(item.iter_markers("waits"))}
    first = [item for item in items if id(item) in early]
    rest = [item for item in items if id(item) not in early]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    shares, remaining = [], len(items)
    for worker in range(workers):  # the share sizes worksteal's first distribution gives
        shares.append(remaining // (workers - worker))
        remaining -= shares[-1]
    heads = [first[worker::workers] for worker in range(workers)]
    if any(len(head) > share for head, share in zip(heads, shares, strict=True)):
        items[:] = first + rest
        return
    ordered: list[pytest.Item] = []
    for head, share in zip(heads, shares, strict=True):
        ordered += head + rest[: share - len(head)]
        del rest[: share - len(head)]
    items[:] = ordered


@pytest.fixture
def cheap_password_hashing() -> Iterator[None]:
    """argon2id's test profile in this process for the test (nimbus_core.sessions.passwords): the
    rules are the same, each hash takes milliseconds."""
    from nimbus_core.sessions import passwords

    passwords.use_profile(passwords.TEST_PROFILE)
    yield
    passwords.use_profile(passwords.PRODUCTION_PROFILE)
