"""The mail function's delivery rules on a fake mailer and a fake dead-letter queue."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from mail_api import handler
from mail_api.service import (
    MESSAGE_CLAIM_SECONDS,
    SES_CALL_SECONDS,
    MailService,
    MessageBusy,
    MessageDeferred,
    RetryPolicy,
)
from nimbus_core.accounts.mail_templates import verification_email
from nimbus_core.adapters.dead_letters import DeadLetter, dead_letter_from_body
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.outbox import Claim, OutboxMessage, Settlement, message_to_values
from nimbus_core.domain.models import iso_to_epoch
from nimbus_core.platform import clock as clock_module
from nimbus_core.platform import metrics
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
        self.notices: dict[tuple[str, str | None], tuple[str, int]] = {}  # (kind, user) -> (id, at)
        self.lock = threading.Lock()

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

    def admit(self, message: OutboxMessage, *, interval: int) -> bool:
        # As DynamoOutbox.admit: one conditional write per account and kind, at the message's time.
        created = int(iso_to_epoch(message.created_at))
        with self.lock:
            sent = self.notices.get((message.kind, message.user_id))
            if sent is not None and sent[0] != message.id and sent[1] > created - interval:
                return False
            self.notices[(message.kind, message.user_id)] = (message.id, created)
            return True

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
    service(FakeMailer([]), FakeDeadLetters(), [], ledger).deliver(OTHER, until=8.0)

    assert ledger.leases == [30.0, 8.0]


# --- SES throttling: back-pressure, never a failure


def throttle(
    code: str = "TooManyRequestsException", message: str = "Maximum sending rate exceeded."
) -> SesError:
    """An SES refusal for the account's sending rate or daily quota, as botocore raises it."""
    error = SesError(code)
    error.response["Error"]["Message"] = message
    return error


class Clock:
    """The invocation's time: a backoff sleep moves it on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ThrottledSes:
    """SES that accepts ``accepted`` messages, then is over its sending rate for ``throttles``
    calls (None: any number) until ``open_at`` on the clock, then accepts again; records who was
    sent what, in order, and when each call started."""

    def __init__(
        self, clock: Clock, throttles: int | None, accepted: int = 0, open_at: float = float("inf")
    ) -> None:
        self.clock = clock
        self.accepted = accepted
        self.throttles = throttles
        self.open_at = open_at
        self.sent: list[str] = []
        self.call_times: list[float] = []

    def send(self, email: Any) -> str:
        self.call_times.append(self.clock.now)
        refusing = self.clock.now < self.open_at and (self.throttles is None or self.throttles > 0)
        if len(self.sent) >= self.accepted and refusing:
            self.throttles = None if self.throttles is None else self.throttles - 1
            raise throttle()
        self.sent.append(email.to)
        return f"ses-{len(self.sent)}"


def clocked_service(mailer: Any, dead: FakeDeadLetters, ledger: FakeLedger, clock: Clock) -> MailService:
    return MailService(mailer, dead, ledger, sleep=clock.sleep, jitter=lambda: 1.0, now=lambda: clock.now)


def addressed(to: str) -> OutboxMessage:
    return OutboxMessage(
        f"01{to.upper():0<24}"[:26], "verify-email", dataclasses.replace(EMAIL, to=to), "", 1
    )


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("TooManyRequestsException", "Maximum sending rate exceeded."),
        ("TooManyRequestsException", "Daily message quota exceeded."),
        ("ThrottlingException", "Maximum sending rate exceeded."),
        ("Throttling", "Daily message quota exceeded."),
        ("LimitExceededException", "Daily message quota exceeded."),
    ],
)
def test_a_throttled_message_is_sent_once_ses_accepts_it_however_often_ses_refused_it(
    code: str, message: str
) -> None:
    clock, dead, ledger = Clock(), FakeDeadLetters(), FakeLedger()
    mailer = FakeMailer([throttle(code, message)] * 6)  # twice the failed attempts a message gets

    delivery = clocked_service(mailer, dead, ledger, clock).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts, mailer.calls) == (True, 7, 7)
    assert dead.letters == []
    assert ledger.settled == {MESSAGE.id: "sentAt"}
    assert clock.sleeps == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0]  # jitter at its maximum: doubled, capped


def test_a_limit_exceeded_error_that_names_no_sending_quota_or_rate_counts_as_a_failed_attempt() -> None:
    mailer = FakeMailer([throttle("LimitExceededException", "Too many configuration sets.")] * 3)
    dead = FakeDeadLetters()

    delivery = clocked_service(mailer, dead, FakeLedger(), Clock()).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts) == (False, 3)
    assert [letter.error.split(":")[0] for letter in dead.letters] == ["LimitExceededException"]


def test_a_throttle_outlasting_the_claim_defers_the_message_releases_it_and_dead_letters_nothing() -> None:
    clock, dead, ledger = Clock(), FakeDeadLetters(), FakeLedger()
    ses = ThrottledSes(clock, throttles=None)

    with pytest.raises(MessageDeferred):
        clocked_service(ses, dead, ledger, clock).deliver(MESSAGE, until=UNTIL)

    assert (ses.sent, dead.letters, ledger.settled, ledger.claims) == ([], [], {}, {})
    assert len(ses.call_times) > 3  # throttles are not failed attempts
    # Every call could still end (a hung call is cut after SES_CALL_SECONDS) while the claim held.
    [lease] = ledger.leases
    assert all(start + SES_CALL_SECONDS <= lease for start in ses.call_times)


def test_no_ses_call_starts_when_the_invocation_has_no_time_left_for_one() -> None:
    clock, ledger = Clock(), FakeLedger()
    ses = ThrottledSes(clock, throttles=0)

    with pytest.raises(MessageDeferred):
        clocked_service(ses, FakeDeadLetters(), ledger, clock).deliver(MESSAGE, until=SES_CALL_SECONDS - 1)

    assert (ses.call_times, ledger.claims) == ([], {})


def test_a_permanent_error_after_throttles_is_still_dead_lettered_at_once() -> None:
    mailer = FakeMailer([throttle(), throttle(), SesError("MessageRejected")])
    dead = FakeDeadLetters()

    delivery = clocked_service(mailer, dead, FakeLedger(), Clock()).deliver(MESSAGE, until=UNTIL)

    assert (delivery.sent, delivery.attempts, mailer.calls) == (False, 3, 3)
    assert [(letter.error.split(":")[0], letter.attempts) for letter in dead.letters] == [
        ("MessageRejected", 3)
    ]


def test_every_throttled_answer_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[metrics.Event] = []
    monkeypatch.setattr(metrics, "count", lambda event, value=1: counted.append(event))
    clock = Clock()

    clocked_service(ThrottledSes(clock, throttles=2), FakeDeadLetters(), FakeLedger(), clock).deliver(
        MESSAGE, until=UNTIL
    )

    assert counted == [metrics.Event.MAIL_THROTTLED] * 2 + [metrics.Event.MAIL_SENT]


class Context(LambdaContextStub):
    """A context with the mail function's whole timeout ahead."""

    def get_remaining_time_in_millis(self) -> int:
        return 90_000


def run_batch(monkeypatch: pytest.MonkeyPatch, ses: ThrottledSes, records: list[dict[str, Any]]) -> Any:
    """One invocation of the handler on ``records``, with ``ses`` and the clock it shares."""
    monkeypatch.setattr(handler, "_apply_log_level", lambda: None)
    monkeypatch.setattr(handler, "_service", lambda: clocked_service(ses, DEAD, LEDGER, ses.clock))
    monkeypatch.setattr(clock_module, "now", lambda: ses.clock.now)
    return handler.lambda_handler({"Records": records}, Context("MailFunction"))  # type: ignore[arg-type]


BURST = [addressed(f"user{n}@example.com") for n in range(5)]
BURST_RECORDS = [stream_record(message, str(100 + n)) for n, message in enumerate(BURST)]
DEAD, LEDGER = FakeDeadLetters(), FakeLedger()


@pytest.fixture(autouse=True)
def _empty_outbox() -> None:
    DEAD.letters.clear()
    LEDGER.claims.clear()
    LEDGER.settled.clear()


def test_a_burst_throttled_for_a_while_goes_out_in_order_each_message_once_in_one_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ses = ThrottledSes(Clock(), throttles=8, accepted=1)

    answer = run_batch(monkeypatch, ses, BURST_RECORDS)

    assert answer == {"batchItemFailures": []}
    assert ses.sent == [m.email.to for m in BURST]
    assert DEAD.letters == []


def test_a_throttle_outlasting_the_invocation_stops_the_batch_at_its_message_and_the_retry_sends_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SES takes one message, then refuses longer than the second one's claim, but not much longer.
    ses = ThrottledSes(Clock(), throttles=None, accepted=1, open_at=MESSAGE_CLAIM_SECONDS - 5)

    first = run_batch(monkeypatch, ses, BURST_RECORDS)

    # The record SES refused and every one after it are retried (the stream restarts at the lowest
    # one reported); none after it was tried, so none can go out before it.
    assert ses.clock.now < ses.open_at + SES_CALL_SECONDS  # the third would have gone out
    assert first == {
        "batchItemFailures": [{"itemIdentifier": sequence} for sequence in ("101", "102", "103", "104")]
    }
    assert ses.sent == [BURST[0].email.to]
    assert (DEAD.letters, LEDGER.claims) == ([], {})

    ses.clock.now = ses.open_at  # SES lets mail through again
    again = run_batch(monkeypatch, ses, BURST_RECORDS[1:])  # the stream's retry

    assert again == {"batchItemFailures": []}
    assert ses.sent == [m.email.to for m in BURST]  # in order, each once
    assert DEAD.letters == []
