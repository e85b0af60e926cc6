"""Delivery of outbox messages: SES with bounded retries, then the dead-letter queue; SES
throttling is back-pressure, never a failure.

Each message gets :attr:`RetryPolicy.attempts` failed SES calls inside the invocation, separated by
exponential backoff with full jitter. A message that still fails is written to the dead-letter
queue (its outbox id, recipient, kind, the error and the attempt count: never its body, link or
token) and counts as handled, so one bad address cannot hold up the stream. Only when the
dead-letter queue itself refuses the message does :meth:`MailService.deliver` raise, which the
handler reports as a batch item failure so the stream delivers that record again.

SES refusing a message for the account's sending rate or daily quota (:func:`is_throttle`) is not
a failed attempt: the message is tried again after a longer backoff for as long as its claim lasts,
and if SES still refuses, the claim is released and :class:`MessageDeferred` raised. The handler
then stops the batch there: that record and every later one are retried by the stream, in order,
and none is ever dead-lettered for throttling (docs/operations.md, "When SES throttles").

Stream delivery is at least once: a record can arrive twice (the records after a failed one when
the stream retries, a replayed batch). So each message is claimed in the outbox before it is sent
and settled after (:class:`Ledger`): a message already sent or dead-lettered, or deleted (its user
is gone), is skipped, and one held by an invocation still running makes its record retry later. An
SES call starts only if it can end while the claim holds. The one duplicate left is an invocation
that dies between SES accepting a message and the settle write: SES has no idempotency key, and its
claim ends with the invocation.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from aws_lambda_powertools import Logger

from nimbus_core.accounts.notices import COMPROMISED_NOTICE_INTERVAL, NEW_SIGN_IN_INTERVAL, Notice
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
# SES refusing a message for the account's sending rate or daily quota ("Maximum sending rate
# exceeded", "Daily message quota exceeded"): SES v2 answers TooManyRequestsException, the SES API
# ThrottlingException (Throttling in its query protocol).
THROTTLING_ERRORS = frozenset({"TooManyRequestsException", "ThrottlingException", "Throttling"})
# LimitExceededException also means a limit on resources: a throttle only when it names a quota or rate.
_QUOTA_OR_RATE = re.compile(r"\b(quota|rate)\b", re.IGNORECASE)
MAX_ERROR_TEXT = 500
# How long one message's claim lasts at most: its SES attempts (a hung call is cut at 7 s by the
# client's timeouts) and backoff fit within it, so a claim left by an invocation that died lapses
# soon enough for the stream's retries to find the message free again.
MESSAGE_CLAIM_SECONDS = 30
# The longest one SES call lasts: the client's connect (2 s) and read (5 s) timeouts, one attempt.
SES_CALL_SECONDS = 7
# Notices sent at most once per interval (seconds) per account, by outbox kind.
BOUNDED_NOTICES = {
    Notice.NEW_SIGN_IN.kind: NEW_SIGN_IN_INTERVAL,
    Notice.PASSWORD_COMPROMISED.kind: COMPROMISED_NOTICE_INTERVAL,
}
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

    def admit(self, message: OutboxMessage, *, interval: int) -> bool:
        """Whether a notice sent at most once per ``interval`` per account may go (recording it)."""
        ...


class MessageDeferred(Exception):  # noqa: N818 - back-pressure, not a failure of this code
    """The message was neither sent nor dead-lettered, and its claim is released: SES throttled it
    for as long as the claim allowed (or the invocation had no time left for a call). Its record
    and every later one of the batch are retried, in order."""


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

    attempts: int = 3  # failed calls before the dead-letter queue (throttled ones do not count)
    base_delay: float = 0.2
    max_delay: float = 2.0
    throttle_max_delay: float = 5.0  # SES's rate is per second; its daily quota frees up slowly

    def delay(self, calls: int, jitter: float, *, throttled: bool = False) -> float:
        """Seconds to wait after ``calls`` unsuccessful calls: full jitter (``jitter`` in [0, 1)),
        capped higher after a throttle."""
        cap = self.throttle_max_delay if throttled else self.max_delay
        return jitter * min(cap, self.base_delay * 2.0 ** (calls - 1))


@dataclass(frozen=True, slots=True)
class Delivery:
    """What happened to one message."""

    outbox_id: str
    sent: bool  # False: written to the dead-letter queue, or skipped
    attempts: int
    ses_message_id: str | None = None
    # "settled" or "gone": not sent by this delivery; "bounded": a notice of its kind told the
    # account within its interval
    skipped: Claim | Literal["bounded"] | None = None


def _clock_now() -> float:
    # clock.now looked up at each call, never bound once: the handler's deadline and the claims
    # must read one clock, even one that a test moved after this module was imported.
    return clock.now()


class MailService:
    """Sends outbox messages through ``mailer``; gives up into ``dead_letters``."""

    def __init__(
        self,
        mailer: Mailer,
        dead_letters: DeadLetterSink,
        ledger: Ledger,
        *,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None],
        jitter: Callable[[], float] = random.random,  # noqa: S311 (backoff jitter, not a secret)
        now: Callable[[], float] | None = None,
    ) -> None:
        self.mailer = mailer
        self.dead_letters = dead_letters
        self.ledger = ledger
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._jitter = jitter
        self._now = now or _clock_now

    def deliver(self, message: OutboxMessage, *, until: float) -> Delivery:
        """Send ``message``, retrying; dead-letter it if every attempt fails. ``until``: when this
        invocation ends at the latest (the claim lasts that long).

        Raises :class:`MessageDeferred` if SES throttles it past its claim (nothing is then
        dead-lettered), and otherwise if the message cannot be claimed now (the store failed, or
        another invocation holds it) or the dead-letter queue cannot take it: the record must be
        retried.
        """
        started = self._now()
        # Whole seconds, as the outbox stores the claim's end: no call may outlast what is stored.
        lease = math.floor(min(until, started + MESSAGE_CLAIM_SECONDS))
        if started + SES_CALL_SECONDS > lease:
            raise MessageDeferred(message.id)
        bound = BOUNDED_NOTICES.get(message.kind)
        if bound is not None and not self.ledger.admit(message, interval=bound):
            # Another notice of this kind told the account within the interval (CONTRACT section
            # 17: at most one new sign-in notice an hour); the sign-in's event is recorded anyway.
            _log.info("outbox message within its notice bound", extra={"outbox_id": message.id})
            metrics.count(metrics.Event.MAIL_BOUNDED)
            return Delivery(message.id, sent=False, attempts=0, skipped="bounded")
        claim = self.ledger.claim(message.id, now=started, until=lease)
        if claim == "busy":
            raise MessageBusy(message.id)
        if claim != "claimed":
            _log.info("outbox message skipped", extra={"outbox_id": message.id, "found": claim})
            return Delivery(message.id, sent=False, attempts=0, skipped=claim)
        calls = failures = 0
        slept = 0.0  # the sleeps, for a clock that a test's sleep does not move
        while True:
            calls += 1
            try:
                ses_id = self.mailer.send(message.email)
            except Exception as error:
                throttled = is_throttle(error)
                self._log_failure(message, calls, error, throttled)
                if not throttled:
                    failures += 1
                    if failures >= self.policy.attempts or error_code(error) in PERMANENT_ERRORS:
                        return self._give_up(message, error, calls)
                wait = self.policy.delay(calls, self._jitter(), throttled=throttled)
                # Another call only if it ends while the claim holds: after it, another delivery of
                # the record could claim and send the message too.
                if max(self._now(), started + slept) + wait + SES_CALL_SECONDS > lease:
                    self._release(message.id)
                    if throttled:
                        raise MessageDeferred(message.id) from error
                    raise
                self._sleep(wait)
                slept += wait
                continue
            _log.info(
                "outbox message sent",
                extra={"outbox_id": message.id, "kind": message.kind, "attempts": calls},
            )
            metrics.count(metrics.Event.MAIL_SENT)
            self._settle(message.id, "sentAt")
            return Delivery(message.id, sent=True, attempts=calls, ses_message_id=ses_id)

    @staticmethod
    def _log_failure(message: OutboxMessage, calls: int, error: Exception, throttled: bool) -> None:
        if throttled:
            metrics.count(metrics.Event.MAIL_THROTTLED)
        _log.warning(
            "SES throttled an outbox message" if throttled else "sending an outbox message failed",
            extra={
                "outbox_id": message.id,
                "kind": message.kind,
                "attempt": calls,
                "error_code": error_code(error),
            },
        )

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


def is_throttle(error: Exception) -> bool:
    """Whether SES refused for the account's sending rate or daily quota (back-pressure: the
    message goes out later, never to the dead letters)."""
    code = error_code(error)
    if code in THROTTLING_ERRORS:
        return True
    return code == "LimitExceededException" and bool(_QUOTA_OR_RATE.search(error_message(error)))


def error_message(error: Exception) -> str:
    """The AWS error message of ``error`` (botocore's ClientError), else its text."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        message = response.get("Error", {}).get("Message")
        if isinstance(message, str):
            return message
    return str(error)


def describe(error: Exception) -> str:
    """A short, single-line description of ``error`` for the dead letter."""
    text = " ".join(f"{error_code(error)}: {error}".split())
    return text[:MAX_ERROR_TEXT]
