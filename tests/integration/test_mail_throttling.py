"""SES throttling is back-pressure: mail waits in the outbox stream and goes out in order, each
message once, when SES takes it again; nothing is dead-lettered for it.

The mail function runs in process on moto, fed by its event source mapping as template.yaml
configures it (``stack.feed``: a batch restarts at its lowest reported record, retried without a
count since MaximumRetryAttempts is -1). SES's refusals are injected at the SDK boundary as the
local API's fault harness sends them (TooManyRequestsException, 429).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nimbus_core.adapters.outbox import OutboxMessage
from nimbus_core.platform import clock
from nimbus_tools.template import load_template
from tests.integration.conftest import Faults, Stack
from tests.integration.test_stream_resilience import Outbox, queue_bodies, reported, sequence


@pytest.fixture
def outbox(stack: Stack) -> Outbox:
    return Outbox(stack)


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The mail function's waits between SES calls, recorded instead of slept: the
    sleep the handler hands the service (``nimbus_core.platform.clock.sleep``)."""
    waits: list[float] = []
    monkeypatch.setattr(clock, "sleep", waits.append)
    return waits


def burst(outbox: Outbox, count: int) -> list[OutboxMessage]:
    """``count`` verification emails queued one after another, as a launch queues them."""
    return [outbox.write(f"launch{n}@example.com") for n in range(count)]


def recipients(stack: Stack) -> list[str]:
    """Who SES accepted mail for, in the order it did."""
    return [to for email in stack.sent for to in email["to"]]


def throttle_ses(faults: Faults, *, after: int = 0, times: int | None = None) -> None:
    faults.fail("ses", "SendEmail", "TooManyRequestsException", 429, after=after, times=times)


def test_a_burst_throttled_past_each_invocation_waits_in_the_stream_and_then_goes_out_in_order_once(
    stack: Stack, outbox: Outbox, faults: Faults, backoff: list[float]
) -> None:
    messages = burst(outbox, 6)
    throttle_ses(faults, after=2)  # SES takes two, then refuses until its quota frees up

    stalled = outbox.deliver() + outbox.deliver() + outbox.deliver()  # three polls while SES refuses

    # Each poll stops at the third message: it and every later one are reported, none is tried.
    first, *retries = stalled
    assert reported(first) == [sequence(r) for r in first.records[2:]]
    assert len(retries) == 2
    for invocation in retries:
        assert reported(invocation) == [sequence(r) for r in invocation.records]
        assert invocation.records == first.records[2:]
    assert recipients(stack) == [m.email.to for m in messages[:2]]
    assert outbox.feed.given_up == []  # no retry count runs out
    assert len(backoff) > 3 * 3  # several throttled calls per invocation, none counted as failed

    faults.clear()  # SES takes mail again
    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    assert recipients(stack) == [m.email.to for m in messages]  # in order, each once
    assert queue_bodies(stack, "MailDeadLetterQueue") == []
    assert outbox.deliver() == []  # nothing left, nothing sent again


def test_a_short_throttle_is_absorbed_inside_the_invocation(
    stack: Stack, outbox: Outbox, faults: Faults, backoff: list[float]
) -> None:
    messages = burst(outbox, 4)
    throttle_ses(faults, after=1, times=3)

    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    assert recipients(stack) == [m.email.to for m in messages]
    assert len(backoff) == 3
    assert queue_bodies(stack, "MailDeadLetterQueue") == []


def test_a_permanent_refusal_is_still_dead_lettered_while_throttles_are_not(
    stack: Stack, outbox: Outbox, faults: Faults, backoff: list[float]
) -> None:
    messages = burst(outbox, 3)
    throttle_ses(faults, times=2)
    # Counted by the calls that reach it, past the throttles: the second message's first call.
    faults.fail("ses", "SendEmail", "MessageRejected", 400, after=1, times=1)

    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    assert recipients(stack) == [messages[0].email.to, messages[2].email.to]
    [letter] = queue_bodies(stack, "MailDeadLetterQueue")
    assert (letter["outboxId"], letter["error"].split(":")[0]) == (messages[1].id, "MessageRejected")


def _emf(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


def test_throttled_mail_is_counted_where_its_alarm_looks(
    outbox: Outbox, faults: Faults, backoff: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    burst(outbox, 1)
    throttle_ses(faults, times=2)
    capsys.readouterr()

    outbox.deliver()

    [line] = [line for line in _emf(capsys.readouterr().out) if "MailThrottled" in line]
    assert sum(line["MailThrottled"]) == 2
    [directive] = line["_aws"]["CloudWatchMetrics"]
    alarm = load_template()["Resources"]["MailThrottledAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == (directive["Namespace"], "MailThrottled")
    assert directive["Dimensions"] == [[d["Name"] for d in alarm["Dimensions"]]]
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
        name: line[name] for name in directive["Dimensions"][0]
    }
