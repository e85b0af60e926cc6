"""The mail function's delivery rules on a fake mailer and a fake dead-letter queue."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from mail_api import handler
from mail_api.service import MailService, MessageBusy, RetryPolicy
from nimbus_core.accounts.mail_templates import verification_email
from nimbus_core.adapters.dead_letters import DeadLetter, dead_letter_from_body
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.outbox import Claim, OutboxMessage, Settlement, message_to_values
from nimbus_tools.local.inprocess import LambdaContextStub

SECRET = "s3cr3t-one-time-token-AAAAAAAAAAAAAAAAAAAAAAAAAAAA"
EMAIL = verification_email(
    to="alice@example.com",
    username="alice",
    link=f"https://files.test/verify?token={SECRET}",
    valid_hours=24,
)
MESSAGE = OutboxMessage(
    id="01OUTBOXID0000000000000000",
    kind="verify-email",
    email=EMAIL,
    created_at="2027-01-15T08:00:00.250Z",
    expires_at=1_800_604_800,
)


UNTIL = 90.0  # when the invocation ends


OTHER = OutboxMessage("01OTHER0000000000000000000", "verify-email", EMAIL, "2027-01-15T08:00:00.250Z", 1)


class SesError(Exception):
    """Shaped like botocore's ClientError: the code is in ``response``."""

    def __init__(self, code: str) -> None:
        super().__init__(f"An error occurred ({code}) when calling the SendEmail operation: injected")
        self.response = {"Error": {"Code": code, "Message": "injected"}}


class FakeMailer:
    def __init__(self, failures: Sequence[Exception]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def send(self, email: object) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return f"ses-{self.calls}"


class FakeLedger:
    """The outbox as a ledger in memory: what was claimed, until when, and what was settled."""

    def __init__(self, gone: frozenset[str] = frozenset(), broken: bool = False) -> None:
        self.gone = gone
        self.broken = broken
        self.claims: dict[str, float] = {}
        self.settled: dict[str, str] = {}
        self.leases: list[float] = []  # every claim's end, in order

    def claim(self, message_id: str, *, now: float, until: float) -> Claim:
        if message_id in self.gone:
            return "gone"
        if message_id in self.settled:
            return "settled"
        if self.claims.get(message_id, -1.0) >= now:
            return "busy"
        self.claims[message_id] = until
        self.leases.append(until)
        return "claimed"

    def release(self, message_id: str) -> None:
        self.claims.pop(message_id, None)

    def settle(self, message_id: str, outcome: Settlement, *, now: float) -> None:
        if self.broken:
            raise SesError("InternalServerError")
        self.settled[message_id] = outcome
        self.claims.pop(message_id, None)


class FakeDeadLetters:
    def __init__(self, broken: bool = False, broken_for: frozenset[str] = frozenset()) -> None:
        self.broken = broken
        self.broken_for = broken_for
        self.letters: list[DeadLetter] = []

    def send(self, letter: DeadLetter) -> str:
        if self.broken or letter.outbox_id in self.broken_for:
            raise SesError("AWS.SimpleQueueService.NonExistentQueue")
        self.letters.append(letter)
        return "sqs-1"


def service(
    mailer: FakeMailer, dead: FakeDeadLetters, sleeps: list[float], ledger: FakeLedger | None = None
) -> MailService:
    return MailService(
        mailer,
        dead,
        ledger or FakeLedger(),
        policy=RetryPolicy(),
        sleep=sleeps.append,
        jitter=lambda: 1.0,
        now=lambda: 0,
    )


def test_a_message_that_fails_twice_is_sent_on_the_third_attempt_after_growing_backoff() -> None:
    mailer = FakeMailer([SesError("Throttling"), SesError("InternalFailure")])
    dead, sleeps = FakeDeadLetters(), list[float]()

    delivery = service(mailer, dead, sleeps).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts, delivery.ses_message_id) == (True, 3, "ses-3")
    assert sleeps == [0.2, 0.4]  # base 0.2 s, doubled; jitter pinned at its maximum
    assert dead.letters == []


def test_backoff_is_jittered_and_capped() -> None:
    policy = RetryPolicy(attempts=10, base_delay=0.2, max_delay=1.0)

    assert policy.delay(1, 0.5) == pytest.approx(0.1)
    assert policy.delay(3, 1.0) == pytest.approx(0.8)
    assert policy.delay(9, 1.0) == pytest.approx(1.0)
    assert policy.delay(2, 0.0) == 0.0


def test_a_message_that_fails_every_attempt_is_dead_lettered_without_its_body_or_token() -> None:
    mailer = FakeMailer([SesError("InternalFailure")] * 3)
    dead, sleeps = FakeDeadLetters(), list[float]()

    delivery = service(mailer, dead, sleeps).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts) == (False, 3)
    assert mailer.calls == 3
    [letter] = dead.letters
    assert (letter.outbox_id, letter.to, letter.kind, letter.attempts) == (
        MESSAGE.id,
        "alice@example.com",
        "verify-email",
        3,
    )
    assert letter.error.startswith("InternalFailure: ")
    assert dead_letter_from_body(letter.to_body()) == letter


def test_a_dead_letter_never_carries_the_email_text_html_or_link() -> None:
    mailer = FakeMailer([SesError("InternalFailure")] * 3)
    dead = FakeDeadLetters()

    service(mailer, dead, []).deliver(MESSAGE, until=UNTIL)

    body = json.loads(dead.letters[0].to_body())
    assert set(body) == {"type", "outboxId", "to", "kind", "error", "attempts", "failedAt"}
    assert SECRET not in json.dumps(body)
    assert "verify?token=" not in json.dumps(body)


def test_a_permanent_ses_error_is_dead_lettered_at_once() -> None:
    mailer, dead, sleeps = FakeMailer([SesError("MessageRejected")]), FakeDeadLetters(), list[float]()

    delivery = service(mailer, dead, sleeps).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts, mailer.calls, sleeps) == (False, 1, 1, [])
    assert [letter.error.split(":")[0] for letter in dead.letters] == ["MessageRejected"]


def test_when_the_dead_letter_queue_fails_the_message_raises_so_the_stream_retries_it() -> None:
    mailer, dead = FakeMailer([SesError("InternalFailure")] * 3), FakeDeadLetters(broken=True)

    ledger = FakeLedger()
    with pytest.raises(SesError):
        service(mailer, dead, [], ledger).deliver(MESSAGE, until=UNTIL)

    assert mailer.calls == 3
    assert ledger.claims == {}  # released: the retry can claim it at once


def stream_record(message: OutboxMessage, sequence: str) -> dict[str, Any]:
    item = to_item(message_to_values(message))
    return {
        "eventID": sequence,
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/x",
        "dynamodb": {"Keys": {"id": item["id"]}, "NewImage": item, "SequenceNumber": sequence},
    }


def run_handler(
    monkeypatch: pytest.MonkeyPatch, mailer: FakeMailer, dead: FakeDeadLetters, records: list[dict[str, Any]]
) -> Any:
    monkeypatch.setattr(handler, "_apply_log_level", lambda: None)
    monkeypatch.setattr(
        handler,
        "_service",
        lambda: MailService(mailer, dead, FakeLedger(), sleep=lambda _s: None, jitter=lambda: 0.0),
    )
    return handler.lambda_handler({"Records": records}, LambdaContextStub("MailFunction"))  # type: ignore[arg-type]


def test_the_handler_reports_only_the_record_whose_dead_letter_failed_as_a_batch_item_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = MESSAGE
    second = OutboxMessage("01SECOND000000000000000000", "verify-email", EMAIL, MESSAGE.created_at, 1)
    mailer = FakeMailer([SesError("MessageRejected")] + [SesError("InternalFailure")] * 3)
    dead = FakeDeadLetters(broken_for=frozenset({second.id}))

    answer = run_handler(
        monkeypatch, mailer, dead, [stream_record(first, "100"), stream_record(second, "200")]
    )

    assert answer == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    assert [letter.outbox_id for letter in dead.letters] == [first.id]


def test_the_handler_reports_no_failure_when_every_message_was_sent_or_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mailer, dead = FakeMailer([SesError("MessageRejected")]), FakeDeadLetters()
    other = OutboxMessage("01OTHER0000000000000000000", "verify-email", EMAIL, MESSAGE.created_at, 1)

    answer = run_handler(monkeypatch, mailer, dead, [stream_record(MESSAGE, "1"), stream_record(other, "2")])

    assert answer == {"batchItemFailures": []}
    assert mailer.calls == 2
    assert len(dead.letters) == 1


def test_a_message_sent_is_settled_and_a_second_delivery_skips_it() -> None:
    mailer, dead, ledger = FakeMailer([]), FakeDeadLetters(), FakeLedger()

    first = service(mailer, dead, [], ledger).deliver(MESSAGE, until=UNTIL)
    again = service(mailer, dead, [], ledger).deliver(MESSAGE, until=UNTIL)

    assert (first.sent, again.sent, again.skipped, mailer.calls) == (True, False, "settled", 1)
    assert ledger.settled == {MESSAGE.id: "sentAt"}


def test_a_message_dead_lettered_is_settled_and_not_dead_lettered_twice() -> None:
    mailer, dead, ledger = FakeMailer([SesError("MessageRejected")]), FakeDeadLetters(), FakeLedger()

    service(mailer, dead, [], ledger).deliver(MESSAGE, until=UNTIL)
    again = service(mailer, dead, [], ledger).deliver(MESSAGE, until=UNTIL)

    assert (len(dead.letters), again.skipped, ledger.settled) == (
        1,
        "settled",
        {MESSAGE.id: "deadLetteredAt"},
    )


def test_a_message_deleted_from_the_outbox_is_not_sent() -> None:
    mailer = FakeMailer([])

    delivery = service(mailer, FakeDeadLetters(), [], FakeLedger(gone=frozenset({MESSAGE.id}))).deliver(
        MESSAGE, until=UNTIL
    )

    assert (delivery.skipped, mailer.calls) == ("gone", 0)


def test_a_message_another_invocation_holds_raises_so_its_record_is_retried_later() -> None:
    mailer, ledger = FakeMailer([]), FakeLedger()
    ledger.claims[MESSAGE.id] = 50.0  # claimed by an invocation that runs until t=50 (now is 0)

    with pytest.raises(MessageBusy):
        service(mailer, FakeDeadLetters(), [], ledger).deliver(MESSAGE, until=UNTIL)

    assert mailer.calls == 0


def test_a_claim_of_an_invocation_that_died_lapses_and_the_message_is_sent() -> None:
    mailer, ledger = FakeMailer([]), FakeLedger()
    ledger.claims[MESSAGE.id] = -1.0  # its invocation ended before now

    delivery = service(mailer, FakeDeadLetters(), [], ledger).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, mailer.calls) == (True, 1)


def test_a_settle_that_fails_after_the_send_does_not_fail_the_record() -> None:
    mailer, ledger = FakeMailer([]), FakeLedger(broken=True)

    delivery = service(mailer, FakeDeadLetters(), [], ledger).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, mailer.calls) == (True, 1)


def test_a_claim_lasts_one_messages_attempts_and_never_past_the_invocation() -> None:
    ledger = FakeLedger()

    service(FakeMailer([]), FakeDeadLetters(), [], ledger).deliver(MESSAGE, until=UNTIL)  # now is 0
    service(FakeMailer([]), FakeDeadLetters(), [], ledger).deliver(OTHER, until=5.0)

    assert ledger.leases == [30.0, 5.0]
