"""The runtime configuration under a burst: SSM throttling GetParameters must not become an outage.

Every instance refreshes at its own random moment within the 10 s bound; a cold instance retries a
refused read with full jitter inside a stated budget; a warm one keeps its last configuration
through throttling for a bounded time; and nothing ever fails open. Faults are the emulator's
(``tests.integration.conftest.Faults``); the cache's clock and sleep are a fake one, so the budget
is measured exactly and no test waits.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from nimbus_core.adapters import clients, container, runtime_config
from nimbus_core.adapters.runtime_config import SsmRuntimeConfig
from tests.integration.conftest import Api, Faults, Stack

INTERNAL = {"code": "INTERNAL_SERVER_ERROR", "message": "Internal Server Error"}
THROTTLED = ("ThrottlingException", 400)
# The documented figures (docs/operations.md): a cold read waits at most 3 s for SSM; a warm
# instance serves its last configuration for at most 300 s while SSM refuses every read.
BUDGET = 3.0
STALE_BOUND = 300.0


class FakeTime:
    """The cache's monotonic clock; its sleep moves the clock instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(runtime_config, "monotonic", fake.monotonic)
    monkeypatch.setattr(runtime_config, "sleep", fake.sleep, raising=False)
    return fake


class Reads:
    """Counts the GetParameters calls the functions' SSM client of now makes (every attempt, faulted
    or not: the event comes before the faults' hook answers)."""

    def __init__(self) -> None:
        self.count = 0
        self._events = clients.ssm().meta.events
        self._events.register("provide-client-params.ssm.GetParameters", self._seen)

    def _seen(self, **_: Any) -> None:
        self.count += 1

    def close(self) -> None:
        self._events.unregister("provide-client-params.ssm.GetParameters", self._seen)


@pytest.fixture
def reads(stack: Stack) -> Any:
    counter = Reads()
    yield counter
    counter.close()


def an_instance(stack: Stack) -> SsmRuntimeConfig:
    """The runtime configuration of one more function instance (its own cache, the shared client)."""
    return SsmRuntimeConfig(
        clients.ssm(),
        killswitch_path=os.environ["KILLSWITCH_PATH"],
        log_level_parameter=stack.provisioned.parameters["LogLevelParameter"],
        max_age=10,
    )


def test_instances_started_together_refresh_at_spread_moments_never_later_than_the_max_age(
    stack: Stack, fake_time: FakeTime, reads: Reads
) -> None:
    fleet = [an_instance(stack) for _ in range(40)]
    for instance in fleet:
        instance.current()  # all cold-started at the same moment
    start, refreshed_at = fake_time.now, {}

    for step in range(1, 41):  # every 0.25 s up to the 10 s bound
        fake_time.now = start + step * 0.25
        for index, instance in enumerate(fleet):
            if index in refreshed_at:
                continue
            before = reads.count
            instance.current()
            if reads.count > before:
                refreshed_at[index] = fake_time.now - start

    assert len(refreshed_at) == len(fleet), "an instance served a configuration older than 10 s"
    assert max(refreshed_at.values()) <= 10.0
    # Not one synchronised wave: the refreshes land at many different moments of the window.
    assert len(set(refreshed_at.values())) >= 5, sorted(refreshed_at.values())


@pytest.mark.parametrize("refused", [1, 2, 3])
def test_every_cold_start_throttled_on_its_first_attempts_answers_normally_within_the_budget(
    api: Api, stack: Stack, faults: Faults, fake_time: FakeTime, token: str, refused: int
) -> None:
    for _ in range(4):  # four cold starts, each refused on its first attempts
        container.reset()
        faults.fail("ssm", "GetParameters", *THROTTLED, times=refused)
        started = fake_time.now

        reply = api.call("GET", "/users/me", token=token)

        assert reply.status == 200, reply.body
        assert fake_time.now - started <= BUDGET
        assert faults.active() == []  # every refused attempt was retried


def test_a_cold_start_refused_throughout_answers_the_clean_error_within_the_budget(
    api: Api, stack: Stack, faults: Faults, fake_time: FakeTime, token: str
) -> None:
    container.reset()
    reads = Reads()
    faults.fail("ssm", "GetParameters", *THROTTLED)
    started, before = fake_time.now, reads.count

    reply = api.call("GET", "/users/me", token=token)

    assert (reply.status, reply.body) == (500, INTERNAL)
    assert "injected fault" not in json.dumps(reply.body)
    assert fake_time.now - started <= BUDGET  # the handler's read and the guard's together
    assert reads.count - before > 1  # it retried...
    assert fake_time.slept  # ...backing off in between
    assert all(s <= BUDGET for s in fake_time.slept)
    reads.close()


def test_a_cold_start_never_ignores_a_switch_because_every_read_was_refused(
    api: Api, stack: Stack, faults: Faults, fake_time: FakeTime
) -> None:
    stack.write_switches("GLOBAL")
    container.reset()
    faults.fail("ssm", "GetParameters", *THROTTLED)

    replies = [api.call("GET", "/"), api.register("carol", ip="192.0.2.77")]

    assert [(r.status, r.body) for r in replies] == [(500, INTERNAL)] * 2
    assert stack.items("UsersTable") == []


def test_a_warm_instance_serves_its_last_configuration_through_throttling_with_one_read_per_refresh(
    api: Api,
    stack: Stack,
    faults: Faults,
    fake_time: FakeTime,
    reads: Reads,
    token: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert api.call("GET", "/users/me", token=token).status == 200  # warm: switches read, none on
    stack.write_switches("GLOBAL")  # a read that succeeded now would close everything
    faults.fail("ssm", "GetParameters", *THROTTLED)
    fake_time.now += 10.0  # past the freshness bound
    before = reads.count

    during = [api.call("GET", "/users/me", token=token) for _ in range(5)]

    assert [r.status for r in during] == [200] * 5
    assert reads.count - before == 1  # one refused refresh, not one per request, and no waiting
    assert "RuntimeConfigStaleSeconds" in capsys.readouterr().out  # the metric of its age
    faults.clear()
    fake_time.now += 10.0  # the next refresh succeeds and applies the switch
    after = api.call("GET", "/")
    assert (after.status, after.body.get("feature")) == (503, 8)


def test_a_warm_instance_fails_closed_once_its_configuration_is_older_than_the_bound(
    api: Api, stack: Stack, faults: Faults, fake_time: FakeTime, token: str
) -> None:
    assert api.call("GET", "/users/me", token=token).status == 200
    faults.fail("ssm", "GetParameters", *THROTTLED)
    fake_time.now += STALE_BOUND - 1
    assert api.call("GET", "/users/me", token=token).status == 200  # still within the bound

    fake_time.now += 2  # the last successful read is now older than the bound
    reply = api.call("GET", "/users/me", token=token)

    assert (reply.status, reply.body) == (500, INTERNAL)
    faults.clear()
    fake_time.now += 1
    assert api.call("GET", "/users/me", token=token).status == 200  # SSM answers: serving again
