"""Delivery of outbox messages: SES with bounded retries, then the dead-letter queue.

Each message gets :attr:`RetryPolicy.attempts` SES calls inside the invocation, separated by
exponential backoff with full jitter. A message that still fails is written to the dead-letter
queue (its outbox id, recipient, kind, the error and the attempt count: never its body, link or
token) and counts as handled, so one bad address cannot hold up the stream. Only when the
dead-letter queue itself refuses the message does :meth:`MailService.deliver` raise, which the
handler reports as a batch item failure so the stream delivers that record again.

Stream delivery is at least once: a record can arrive twice (the records after a failed one when
the stream retries, a replayed batch). So each message is claimed in the outbox before it is sent
and settled after (:class:`Ledger`): a message already sent or dead-lettered, or deleted (its user
is gone), is skipped, and one held by an invocation still running makes its record retry later.
The one duplicate left is an invocation that dies between SES accepting a message and the settle
write: SES has no idempotency key, and its claim ends with the invocation.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aws_lambda_powertools import Logger

from nimbus_core.adapters.dead_letters import DeadLetter
from nimbus_core.adapters.outbox import Claim, OutboxMessage, Settlement
from nimbus_core.domain.models import Email
from nimbus_core.platform import clock, metrics

# A child of the function's Powertools logger. Never log an email's body, link or token.
_log = Logger(child=True)

# SES errors that another attempt a moment later cannot fix: dead-letter them at once.
PERMANENT_ERRORS = frozenset(
    {
        "MessageRejected",
        "BadRequestException",
        "MailFromDomainNotVerifiedException",
        "AccountSuspendedException",
        "NotFoundException",
    }
)
MAX_ERROR_TEXT = 500
# How long one message's claim lasts at most: its SES attempts (a hung call is cut at 7 s by the
# client's timeouts) and backoff fit within it, so a claim left by an invocation that died lapses
# soon enough for the stream's retries to find the message free again.
MESSAGE_CLAIM_SECONDS = 30
UNREADABLE = "unreadable"  # the kind of a dead letter whose outbox item was not a message


class Mailer(Protocol):
    """Sends one email; returns the provider's message id (``SesMailer``)."""

    def send(self, email: Email) -> str:
        """Send ``email`` or raise."""
        ...


class Ledger(Protocol):
    """Which messages were sent (``DynamoOutbox``: the outbox item itself)."""

    def claim(self, message_id: str, *, now: float, until: float) -> Claim:
        """Take the message for sending until ``until``, or say why not."""
        ...

    def settle(self, message_id: str, outcome: Settlement, *, now: float) -> None:
        """Record that the message was sent or dead-lettered."""
        ...

    def release(self, message_id: str) -> None:
        """Give up the claim: the record will be retried."""
        ...


class MessageBusy(Exception):  # noqa: N818 - a state, not a failure of this code
    """Another invocation holds the message's claim: the record is retried later."""


class DeadLetterSink(Protocol):
    """Keeps messages that could not be sent (``SqsDeadLetterQueue``)."""

    def send(self, letter: DeadLetter) -> str:
        """Store ``letter`` or raise."""
        ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently one message is tried within an invocation."""

    attempts: int = 3
    base_delay: float = 0.2
    max_delay: float = 2.0

    def delay(self, failed_attempts: int, jitter: float) -> float:
        """Seconds to wait after ``failed_attempts`` failures: full jitter (``jitter`` in [0, 1))."""
        return jitter * min(self.max_delay, self.base_delay * 2.0 ** (failed_attempts - 1))


@dataclass(frozen=True, slots=True)
class Delivery:
    """What happened to one message."""

    outbox_id: str
    sent: bool  # False: written to the dead-letter queue, or skipped
    attempts: int
    ses_message_id: str | None = None
    skipped: Claim | None = None  # "settled" or "gone": not sent by this delivery


class MailService:
    """Sends outbox messages through ``mailer``; gives up into ``dead_letters``."""

    def __init__(
        self,
        mailer: Mailer,
        dead_letters: DeadLetterSink,
        ledger: Ledger,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,  # noqa: S311 (backoff jitter, not a secret)
        now: Callable[[], float] = clock.now,
    ) -> None:
        self.mailer = mailer
        self.dead_letters = dead_letters
        self.ledger = ledger
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._jitter = jitter
        self._now = now

    def deliver(self, message: OutboxMessage, *, until: float) -> Delivery:
        """Send ``message``, retrying; dead-letter it if every attempt fails. ``until``: when this
        invocation ends at the latest (the claim lasts that long).

        Raises if the message cannot be claimed now (the store failed, or another invocation holds
        it) or the dead-letter queue cannot take it: the record must be retried.
        """
        now = self._now()
        claim = self.ledger.claim(message.id, now=now, until=min(until, now + MESSAGE_CLAIM_SECONDS))
        if claim == "busy":
            raise MessageBusy(message.id)
        if claim != "claimed":
            _log.info("outbox message skipped", extra={"outbox_id": message.id, "found": claim})
            return Delivery(message.id, sent=False, attempts=0, skipped=claim)
        attempts = 0
        while True:
            attempts += 1
            try:
                ses_id = self.mailer.send(message.email)
            except Exception as error:
                code = error_code(error)
                _log.warning(
                    "sending an outbox message failed",
                    extra={
                        "outbox_id": message.id,
                        "kind": message.kind,
                        "attempt": attempts,
                        "error_code": code,
                    },
                )
                if attempts >= self.policy.attempts or code in PERMANENT_ERRORS:
                    return self._give_up(message, error, attempts)
                self._sleep(self.policy.delay(attempts, self._jitter()))
                continue
            _log.info(
                "outbox message sent",
                extra={"outbox_id": message.id, "kind": message.kind, "attempts": attempts},
            )
            metrics.count(metrics.Event.MAIL_SENT)
            self._settle(message.id, "sentAt")
            return Delivery(message.id, sent=True, attempts=attempts, ses_message_id=ses_id)

    def dead_letter_unreadable(self, outbox_id: str, error: Exception, *, until: float) -> Delivery:
        """Dead-letter an outbox item that is not a message (a field missing or of the wrong type):
        no attempt can send it. Raises as :meth:`deliver` does."""
        now = self._now()
        lease = min(until, now + MESSAGE_CLAIM_SECONDS)
        claim = self.ledger.claim(outbox_id, now=now, until=lease) if outbox_id else "claimed"
        if claim == "busy":
            raise MessageBusy(outbox_id)
        if claim != "claimed":
            return Delivery(outbox_id, sent=False, attempts=0, skipped=claim)
        letter = DeadLetter(
            outbox_id=outbox_id,
            to="",
            kind=UNREADABLE,
            error=describe(error),
            attempts=0,
            failed_at=clock.iso(self._now()),
        )
        return self._dead_letter(letter)

    def _give_up(self, message: OutboxMessage, error: Exception, attempts: int) -> Delivery:
        return self._dead_letter(
            DeadLetter(
                outbox_id=message.id,
                to=message.email.to,
                kind=message.kind,
                error=describe(error),
                attempts=attempts,
                failed_at=clock.iso(self._now()),
            )
        )

    def _dead_letter(self, letter: DeadLetter) -> Delivery:
        try:
            self.dead_letters.send(letter)
        except Exception:
            _log.error(
                "could not dead-letter an outbox message; the stream will deliver it again",
                extra={"outbox_id": letter.outbox_id, "kind": letter.kind},
                exc_info=True,
            )
            if letter.outbox_id:
                self._release(letter.outbox_id)
            raise
        _log.error(
            "outbox message dead-lettered",
            extra={"outbox_id": letter.outbox_id, "kind": letter.kind, "attempts": letter.attempts},
        )
        metrics.count(metrics.Event.MAIL_DEAD_LETTERED)
        if letter.outbox_id:
            self._settle(letter.outbox_id, "deadLetteredAt")
        return Delivery(letter.outbox_id, sent=False, attempts=letter.attempts)

    def _release(self, outbox_id: str) -> None:
        # If this fails too, the claim lapses when the invocation ends; the retry waits for that.
        try:
            self.ledger.release(outbox_id)
        except Exception:
            _log.warning("could not release an outbox message's claim", extra={"outbox_id": outbox_id})

    def _settle(self, outbox_id: str, outcome: Settlement) -> None:
        # Never raised: the message went out (or to the dead letters), and a retried record would
        # send it again. Its claim then lapses, and only a replay of the record could repeat it.
        try:
            self.ledger.settle(outbox_id, outcome, now=self._now())
        except Exception:
            _log.error("could not settle an outbox message", extra={"outbox_id": outbox_id}, exc_info=True)


def error_code(error: Exception) -> str:
    """The AWS error code of ``error`` (botocore's ClientError), else its class name."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if isinstance(code, str) and code:
            return code
    return type(error).__name__


def describe(error: Exception) -> str:
    """A short, single-line description of ``error`` for the dead letter."""
    text = " ".join(f"{error_code(error)}: {error}".split())
    return text[:MAX_ERROR_TEXT]
