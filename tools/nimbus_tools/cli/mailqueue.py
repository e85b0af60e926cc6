"""``nimbus mail failed`` and ``nimbus mail retry``: the mail dead-letter queue, read and replayed
(docs/operations.md). Listing consumes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.adapters.dead_letters import DeadLetter, dead_letter_from_body
from nimbus_core.adapters.mail import SesMailer
from nimbus_core.adapters.outbox import RECOVERY_REQUEST, DynamoOutbox
from nimbus_core.platform import clock
from nimbus_tools.cli import render
from nimbus_tools.cli.target import EXIT_USAGE, CliError, Target

QUEUE = "MailDeadLetterQueue"
HOLD_SECONDS = 60  # how long messages stay hidden from other readers while we look at them


@dataclass
class FailedMail:
    """One message of the dead-letter queue."""

    message_id: str
    receipt_handle: str
    sent_at: str
    letter: DeadLetter | None = None
    batch: dict[str, Any] | None = None  # DDBStreamBatchInfo
    raw: str = ""

    @property
    def id(self) -> str:
        """What operators name it by: the outbox id of a dead letter, else the SQS message id."""
        return self.letter.outbox_id if self.letter else self.message_id

    def as_json(self) -> dict[str, Any]:
        """The message as ``--json`` prints it."""
        out: dict[str, Any] = {"id": self.id, "sqsMessageId": self.message_id, "sentAt": self.sent_at}
        if (letter := self.letter) is not None:
            out |= {"type": "dead-letter", "outboxId": letter.outbox_id, "to": letter.to, "kind": letter.kind}
            return out | {"error": letter.error, "attempts": letter.attempts, "failedAt": letter.failed_at}
        if self.batch is not None:
            return out | {"type": "stream-batch", "batch": self.batch}
        return out | {"type": "unknown", "body": self.raw[:500]}


@dataclass
class RetryOutcome:
    """What ``retry`` did with one queue message."""

    mail: FailedMail
    sent: list[str] = field(default_factory=list)  # outbox ids sent
    skipped: list[str] = field(default_factory=list)  # outbox ids the mail function had sent already
    problems: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Every email it stands for went out, now or before (so the queue message was deleted)."""
        return bool(self.sent or self.skipped) and not self.problems


def _receive_all(target: Target) -> list[FailedMail]:
    """Every message of the queue, each hidden from other readers for :data:`HOLD_SECONDS`."""
    sqs = target.sqs()
    url = target.queue(QUEUE)
    wait = 0 if target.endpoint_url else 1  # long polling asks every SQS server (short polling samples)
    seen: dict[str, FailedMail] = {}
    while messages := sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=HOLD_SECONDS,
        WaitTimeSeconds=wait,
        MessageSystemAttributeNames=["SentTimestamp"],
    ).get("Messages"):
        seen |= {message["MessageId"]: _parse(message) for message in messages}
    return sorted(seen.values(), key=lambda m: m.sent_at)


def _parse(message: Any) -> FailedMail:
    body = str(message.get("Body", ""))
    sent_ms = int(message.get("Attributes", {}).get("SentTimestamp", "0") or 0)
    mail = FailedMail(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        sent_at=clock.iso(sent_ms / 1000),
        letter=dead_letter_from_body(body),
        raw=body,
    )
    if mail.letter is None:
        try:
            info = json.loads(body).get("DDBStreamBatchInfo")
        except (ValueError, AttributeError):
            info = None
        mail.batch = info if isinstance(info, dict) else None
    return mail


def _release(target: Target, mails: list[FailedMail]) -> None:
    """Make ``mails`` visible again at once (they were only looked at)."""
    for start in range(0, len(mails), 10):
        entries = [
            {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0}
            for i, m in enumerate(mails[start : start + 10])
        ]
        target.sqs().change_message_visibility_batch(QueueUrl=target.queue(QUEUE), Entries=entries)  # type: ignore[arg-type]


def _outbox_ids(target: Target, batch: dict[str, Any]) -> list[str]:
    """The outbox ids of the INSERT records in a stream batch's sequence-number range, but the
    recovery requests among them (the mail function's filter kept them away: they are the recovery
    function's, and no message)."""
    streams = target.dynamodbstreams()
    start, end = int(batch["startSequenceNumber"]), int(batch["endSequenceNumber"])
    iterator: str | None = streams.get_shard_iterator(
        StreamArn=batch["streamArn"],
        ShardId=batch["shardId"],
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=str(start),
    )["ShardIterator"]
    ids: list[str] = []
    while iterator:
        answer = streams.get_records(ShardIterator=iterator, Limit=100)
        records = answer.get("Records", [])
        for record in records:
            data = record.get("dynamodb", {})
            if int(data.get("SequenceNumber", "0")) > end:
                return ids
            key = (data.get("Keys") or {}).get("id", {}).get("S")
            kind = (data.get("NewImage") or {}).get("kind", {}).get("S")
            if record.get("eventName") == "INSERT" and key and kind != RECOVERY_REQUEST:
                ids.append(str(key))  # read by key: an item that is no message is told, not fatal
        if not records:
            break
        iterator = answer.get("NextShardIterator")
    return ids


# How long a send by the tool holds its claim on the outbox item (the mail function's own claims
# last until its invocation ends): one SES call with the SDK's retries fits well within it.
CLAIM_SECONDS = 60


class _NotSentError(Exception):
    """Why one outbox item was not sent (the queue message stays)."""


def _send(mailer: SesMailer, outbox: DynamoOutbox, outbox_id: str, *, dead_letter: bool) -> bool:
    """Send one outbox item again: True once sent, False when the mail function had sent it. A dead
    letter was given up on, so it is sent whatever its settlement says; a record of a stream batch
    only if not sent or dead-lettered already (Lambda hands back the whole rest of a batch). The
    item is claimed first and settled as sent after, as the mail function does."""
    if not outbox_id:
        raise _NotSentError("a dead letter without an outbox id (an unreadable item); nothing to send")
    now = clock.now()
    try:
        message = outbox.get(outbox_id)
    except (KeyError, ValueError, TypeError):
        raise _NotSentError(
            f"outbox item {outbox_id} is not a message (a field missing or wrong); not sent"
        ) from None
    if message is None or message.expired(now):
        raise _NotSentError(
            f"outbox item {outbox_id} has expired (kept 7 days); the email cannot be re-sent from here"
        )
    claim = outbox.claim(outbox_id, now=now, until=now + CLAIM_SECONDS)
    if claim == "busy":
        raise _NotSentError(f"outbox item {outbox_id} is being sent by the mail function; try again later")
    if claim == "settled" and not dead_letter:
        return False  # sent (or dead-lettered, and listed as such) already
    try:
        mailer.send(message.email)
    except (ClientError, BotoCoreError) as error:
        outbox.release(outbox_id)
        raise _NotSentError(f"SES refused {outbox_id} again: {error}") from None
    outbox.settle(outbox_id, "sentAt", now=clock.now())
    return True


def _retry_one(target: Target, mailer: SesMailer, outbox: DynamoOutbox, mail: FailedMail) -> RetryOutcome:
    outcome = RetryOutcome(mail)
    if mail.letter is not None:
        ids = [mail.letter.outbox_id]
    elif mail.batch is not None:
        try:
            ids = _outbox_ids(target, mail.batch)
        except (ClientError, BotoCoreError, KeyError, ValueError) as error:
            outcome.problems.append(f"the stream no longer has this batch's records: {error}")
            return outcome
    else:
        outcome.problems.append("not a message Nimbus wrote; left in the queue")
        return outcome
    for outbox_id in ids:
        try:
            sent = _send(mailer, outbox, outbox_id, dead_letter=mail.letter is not None)
        except _NotSentError as problem:
            outcome.problems.append(str(problem))
        else:
            (outcome.sent if sent else outcome.skipped).append(outbox_id)
    return outcome


def retry(target: Target, wanted: list[str], every: bool) -> list[RetryOutcome]:
    """Re-send the named messages (outbox ids or SQS message ids), or all of them."""
    if not wanted and not every:
        raise CliError("name the messages to retry (IDs from `nimbus mail failed`) or pass --all", EXIT_USAGE)
    if not target.sender_email:
        raise CliError(f"{target.description} does not say its sender address (SenderEmail output)")
    mails = _receive_all(target)
    outcomes: list[RetryOutcome] = []
    try:
        chosen = mails if every else [m for m in mails if m.id in wanted or m.message_id in wanted]
        missing = sorted(set(wanted) - {m.id for m in chosen} - {m.message_id for m in chosen})
        if missing:
            raise CliError(f"not in the dead-letter queue: {', '.join(missing)}")
        mailer = SesMailer(target.sesv2(), target.sender_email)
        outbox = DynamoOutbox(target.dynamodb(), target.table("OutboxTable"))
        for mail in chosen:
            outcomes.append(_retry_one(target, mailer, outbox, mail))
            if outcomes[-1].done:
                target.sqs().delete_message(QueueUrl=target.queue(QUEUE), ReceiptHandle=mail.receipt_handle)
    finally:
        deleted = {o.mail.message_id for o in outcomes if o.done}
        _release(target, [m for m in mails if m.message_id not in deleted])
    return outcomes


def failed_command(target: Target, as_json: bool) -> str:
    """``mail failed [--json]``: every message in the dead-letter queue, oldest first, none consumed."""
    mails = _receive_all(target)
    _release(target, mails)
    if as_json:
        return json.dumps([m.as_json() for m in mails], indent=2)
    if not mails:
        return "no failed mail"
    rows = []
    for mail in mails:
        if (letter := mail.letter) is not None:
            rows.append(
                (mail.id, letter.to, letter.kind, str(letter.attempts), letter.failed_at, letter.error)
            )
        elif mail.batch is not None:
            size = str(mail.batch.get("batchSize", "?"))
            rows.append((mail.id, "-", f"stream batch of {size}", "-", mail.sent_at, "retries exhausted"))
        else:
            rows.append((mail.id, "-", "unknown message", "-", mail.sent_at, mail.raw[:60]))
    return render.table(("ID", "TO", "KIND", "ATTEMPTS", "FAILED AT", "ERROR"), rows)


def retry_command(target: Target, wanted: list[str], every: bool) -> str:
    """``mail retry ID... | --all``; fails (exit 1) if any message could not be re-sent."""
    outcomes = retry(target, wanted, every)
    if not outcomes:
        return "no failed mail"
    lines = []
    for outcome in outcomes:
        if outcome.done:
            before = f", {len(outcome.skipped)} sent before" if outcome.skipped else ""
            lines.append(
                f"{outcome.mail.id}: sent ({len(outcome.sent)} email(s){before}), removed from the queue"
            )
        else:
            lines.extend(f"{outcome.mail.id}: {problem}; left in the queue" for problem in outcome.problems)
    text = "\n".join(lines)
    if not all(o.done for o in outcomes):
        raise CliError(text)
    return text
