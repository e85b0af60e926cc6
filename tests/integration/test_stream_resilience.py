"""The two stream-fed functions against what a DynamoDB stream really delivers: poison records,
partial batch failures, replays (delivery is at least once) and AWS faults in the middle of a batch.

MailFunction reads the outbox table's stream (NEW_IMAGE, INSERT only) and SweepFunction the users
table's (KEYS_ONLY, MODIFY/REMOVE of USER# items). Both are driven by ``stack.feed(...)``, which
reads moto's stream and applies the event source mapping's rules from template.yaml
(FilterCriteria, BatchSize, ReportBatchItemFailures: a retry starts at the lowest failed sequence
number and re-delivers every record after it, MaximumRetryAttempts, then the OnFailure queue).
Records are the ones moto streams for real writes, malformed items included; a record is built by
hand only where no write can make it (a TTL removal, an INSERT naming a user, a record without
keys), from a real one, in the shape Lambda sends.

Already proven elsewhere and not repeated: tests/integration/test_mail.py (one message sent, an SES
refusal dead-lettered without its link, a record neither sent nor dead-lettered reported),
test_sweep.py (filters, a fault mid-sweep retried, a batch given up to the OnFailure queue) and
tests/unit/test_{mail,sweep}_service.py (backoff, the handlers' answers on fakes).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.config import Config

from nimbus_core.accounts.mail_templates import verification_email
from nimbus_core.adapters import clients, container
from nimbus_core.adapters.dead_letters import dead_letter_from_body
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.outbox import DynamoOutbox, OutboxMessage, message_to_values
from nimbus_core.adapters.sessions import DynamoSessions, session_item
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.models import User
from nimbus_core.platform import clock, ids
from nimbus_core.sessions.session_issuer import revoke_all
from nimbus_tools.local.inprocess import LambdaContextStub
from nimbus_tools.local.lambda_records import lambda_event, matches
from nimbus_tools.local.streams import StreamReader, latest_stream_arn
from tests.contract.builders import a_session, a_user
from tests.integration.conftest import REGION, Faults, Stack, take_messages
from tests.integration.stream_feed import Invocation, StreamFeed

EXPIRES = 2_000_000_000  # no message or session here expires during a test
# Bidi overrides, zero-width joiners, a ZWJ emoji sequence, a combining accent, astral characters,
# NUL, a BOM, a tag character, title case, a ligature and mathematical letters.
ODD = (
    "\u202eevil\u202c \u200b\u200d 👩\u200d👩\u200d👧 e\u0301 \U0001f600 \x00 \ufeff \U000e0041 "
    "ǅ ß ﬃ \U0001d518\U0001d52b\U0001d526"
)


# ------------------------------------------------------------------------------------------ helpers


def invoke(stack: Stack, function: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One invocation of ``function`` on exactly ``records``, past its FilterCriteria: a batch
    Lambda delivers again, or records the filter would have kept away."""
    handler = stack.routed.handler(function)
    answer: dict[str, Any] = handler(lambda_event(records), LambdaContextStub(function))
    return answer


def until_idle(feed: StreamFeed, function: str, stack: Stack, rounds: int = 20) -> list[Invocation]:
    """Let the event source mapping poll until it has nothing left to deliver: retries and the
    give-up to the OnFailure queue included."""
    handler = stack.routed.handler(function)
    made: list[Invocation] = []
    for _ in range(rounds):
        invocations = feed.drain(handler)
        if not invocations:
            return made
        made += invocations
    raise AssertionError(f"{function}'s feed was still busy after {rounds} rounds")


def captured(feed: StreamFeed) -> list[dict[str, Any]]:
    """The records the event source mapping would deliver next (they count as delivered)."""
    records: list[dict[str, Any]] = []

    def keep(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        records.extend(event["Records"])
        return {"batchItemFailures": []}

    feed.drain(keep)
    return records


def sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def reported(invocation: Invocation) -> list[str]:
    """The sequence numbers an invocation answered as failed (it must not have raised)."""
    assert invocation.error is None, f"the whole batch failed: {invocation.error!r}"
    return [str(f["itemIdentifier"]) for f in invocation.failures]


def queue_bodies(stack: Stack, logical_id: str) -> list[dict[str, Any]]:
    """Every message of one of the stack's queues, consumed (read it once per test)."""
    sqs = boto3.client("sqs", region_name=REGION)  # not the functions' client: no fault reaches it
    url = stack.provisioned.queues[logical_id]
    return [json.loads(m["Body"]) for m in take_messages(sqs, url)]


def record_calls(service: str, client: Any) -> list[str]:
    """The operations ``client`` calls from now on (faulted ones included)."""
    calls: list[str] = []

    def remember(model: Any, **_: Any) -> None:
        calls.append(model.name)

    client.meta.events.register(f"provide-client-params.{service}.*", remember)
    return calls


def stream_records(stack: Stack, logical_id: str) -> list[dict[str, Any]]:
    """Every record of a table's stream so far, unfiltered, read by a reader of its own."""
    streams = boto3.client(
        "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
    )
    arn = latest_stream_arn(stack.dynamodb, stack.table(logical_id))
    reader = StreamReader(streams, arn, "TRIM_HORIZON")
    records: list[dict[str, Any]] = []
    while batch := reader.read(1000):
        records += batch
    return records


# --------------------------------------------------------------------------------------------- mail


class Outbox:
    """Writes outbox items (each one a real INSERT record on the outbox stream) and runs the mail
    function through its event source mapping."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.client = stack.dynamodb
        self.table = stack.table("OutboxTable")
        self.feed = stack.feed("MailFunction")

    def message(self, to: str, kind: str = "verify-email", **email: str) -> OutboxMessage:
        """A verification email to ``to`` as register queues it (``email`` replaces its subject,
        text or html)."""
        link = f"https://files.test/verify?token={ids.new_id()}"
        rendered = verification_email(to=to, username=to.partition("@")[0], link=link, valid_hours=24)
        return OutboxMessage(
            id=ids.new_id(),
            kind=kind,
            email=dataclasses.replace(rendered, **email),
            created_at="2027-01-15T08:00:00.250Z",
            expires_at=EXPIRES,
        )

    def write(self, to: str, kind: str = "verify-email", **email: str) -> OutboxMessage:
        """Queue :meth:`message`."""
        message = self.message(to, kind, **email)
        self.put(to_item(message_to_values(message)))
        return message

    def put(self, item: dict[str, Any]) -> None:
        """Store ``item`` as it is: DynamoDB checks an item's key, not its other attributes."""
        self.client.put_item(TableName=self.table, Item=item)

    def malformed(self, poison: str) -> str:
        """Queue an item that is not a readable message (its INSERT is a poison record); its id."""
        item = to_item(message_to_values(self.message("poison@example.com")))
        if poison == "missing-fields":
            del item["to"], item["html"]
        elif poison == "wrong-types":
            item["expiresAt"] = {"S": "next week"}
            item["subject"] = {"BOOL": True}
        else:
            raise AssertionError(poison)
        self.put(item)
        return str(item["id"]["S"])

    def deliver(self) -> list[Invocation]:
        """One poll of the event source mapping: new records (or a failed batch again) until a
        batch fails."""
        return self.feed.drain(self.stack.routed.handler("MailFunction"))

    def sent_to(self) -> Counter[str]:
        """How many emails SES accepted for each recipient."""
        return Counter(to for email in self.stack.sent for to in email["to"])


@pytest.fixture
def outbox(stack: Stack) -> Outbox:
    return Outbox(stack)


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The mail function's waits between SES attempts, recorded instead of slept: the
    sleep the handler hands the service (``nimbus_core.platform.clock.sleep``)."""
    waits: list[float] = []
    monkeypatch.setattr(clock, "sleep", waits.append)
    return waits


def ids_of(invocation: Invocation) -> list[str]:
    return [r["dynamodb"]["Keys"]["id"]["S"] for r in invocation.records]


# --- poison records


@pytest.mark.parametrize("poison", ["missing-fields", "wrong-types"])
def test_a_malformed_outbox_item_fails_at_most_its_own_record_and_its_neighbours_are_sent(
    outbox: Outbox, poison: str
) -> None:
    first = outbox.write("first@example.com")
    bad = outbox.malformed(poison)
    last = outbox.write("last@example.com")

    invocation = outbox.deliver()[0]

    assert ids_of(invocation) == [first.id, bad, last.id]  # one batch
    assert set(reported(invocation)) <= {sequence(invocation.records[1])}
    assert outbox.sent_to() == {"first@example.com": 1, "last@example.com": 1}


def test_a_malformed_outbox_item_is_never_lost_it_ends_in_the_dead_letter_queue(
    stack: Stack, outbox: Outbox
) -> None:
    bad = outbox.malformed("missing-fields")

    invocations = until_idle(outbox.feed, "MailFunction", stack)

    [message] = queue_bodies(stack, "MailDeadLetterQueue")
    letter = dead_letter_from_body(json.dumps(message))
    batch = message.get("DDBStreamBatchInfo") or {}
    poison_record = next(r for r in invocations[0].records if r["dynamodb"]["Keys"]["id"]["S"] == bad)
    # A dead letter naming it, or Lambda's record of the batch it gave up on (which `nimbus mail
    # retry` reads back from the stream): either way the operator sees it.
    assert (letter is not None and letter.outbox_id == bad) or (
        batch.get("startSequenceNumber") == sequence(poison_record)
    )
    assert stack.sent == []


def test_a_malformed_outbox_item_does_not_make_the_stream_resend_the_emails_after_it(
    stack: Stack, outbox: Outbox
) -> None:
    outbox.write("first@example.com")
    outbox.malformed("missing-fields")
    outbox.write("last@example.com")

    until_idle(outbox.feed, "MailFunction", stack)

    assert outbox.sent_to() == {"first@example.com": 1, "last@example.com": 1}


def test_an_outbox_message_of_an_unknown_kind_is_sent_as_it_was_rendered(
    stack: Stack, outbox: Outbox
) -> None:
    message = outbox.write("carol@example.com", kind=f"no-such-kind {ODD}")

    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    [email] = stack.sent
    assert (email["to"], email["subject"], email["text"], email["html"]) == (
        [message.email.to],
        message.email.subject,
        message.email.text,
        message.email.html,
    )


def test_huge_and_odd_unicode_messages_are_sent_exactly_as_stored(stack: Stack, outbox: Outbox) -> None:
    huge = outbox.write("huge@example.com", text="\U0001f4e7" * 90_000)  # 360 KB in 4-byte characters
    odd = outbox.write("odd@example.com", subject=ODD, text=ODD * 100, html=f"<p>{ODD}</p>")
    idn = outbox.write("用户@例子.广告", subject="Ünïcödé")

    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    sent = {email["to"][0]: email for email in stack.sent}
    assert len(stack.sent) == len(sent) == 3
    for message in (huge, odd, idn):
        email = sent[message.email.to]
        assert (email["subject"], email["text"], email["html"]) == (
            message.email.subject,
            message.email.text,
            message.email.html,
        )


def test_changes_and_removals_of_outbox_items_never_send_mail_even_when_delivered_to_the_function(
    stack: Stack, outbox: Outbox
) -> None:
    changed = outbox.write("changed@example.com")
    removed = outbox.write("removed@example.com")
    assert [reported(i) for i in outbox.deliver()] == [[]]
    outbox.client.update_item(
        TableName=outbox.table,
        Key={"id": {"S": changed.id}},
        UpdateExpression="SET createdAt = :c",
        ExpressionAttributeValues={":c": {"S": "2027-01-15T09:00:00.000Z"}},
    )
    outbox.client.delete_item(TableName=outbox.table, Key={"id": {"S": removed.id}})
    fresh = outbox.write("fresh@example.com")

    [invocation] = outbox.deliver()

    assert ids_of(invocation) == [fresh.id]  # FilterCriteria: INSERTs only
    # Had the filter let them through: the real MODIFY (with its NewImage) and REMOVE, a TTL
    # deletion's REMOVE, an INSERT without its image and a record without its dynamodb part.
    # (The mail function's own claims and settlements are MODIFY records too.)
    [modify] = [
        r
        for r in stream_records(stack, "OutboxTable")
        if r["eventName"] == "MODIFY"
        and r["dynamodb"]["NewImage"]["createdAt"] == {"S": "2027-01-15T09:00:00.000Z"}
    ]
    [remove] = [r for r in stream_records(stack, "OutboxTable") if r["eventName"] == "REMOVE"]
    expired = {**remove, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}
    new = invocation.records[0]
    imageless = {**new, "dynamodb": {k: v for k, v in new["dynamodb"].items() if k != "NewImage"}}
    bare = {k: v for k, v in new.items() if k != "dynamodb"}

    answer = invoke(stack, "MailFunction", [modify, remove, expired, imageless, bare])

    assert answer == {"batchItemFailures": []}
    assert outbox.sent_to() == {"changed@example.com": 1, "removed@example.com": 1, "fresh@example.com": 1}


# --- partial batch failures


def three_messages(outbox: Outbox) -> list[OutboxMessage]:
    return [outbox.write(f"{name}@example.com") for name in ("one", "two", "three")]


def refuse_the_second_everywhere(faults: Faults) -> None:
    """SES refuses the batch's second message once, and the dead-letter queue refuses it too."""
    faults.fail("ses", "SendEmail", "MessageRejected", 400, after=1, times=1)
    faults.fail("sqs", "SendMessage", "InternalError", 500, times=1)


def test_one_message_neither_sent_nor_dead_lettered_is_the_only_record_reported_and_its_retry_sends_it(
    stack: Stack, outbox: Outbox, faults: Faults
) -> None:
    messages = three_messages(outbox)
    refuse_the_second_everywhere(faults)

    [first] = outbox.deliver()

    assert ids_of(first) == [m.id for m in messages]
    assert reported(first) == [sequence(first.records[1])]
    assert outbox.sent_to() == {"one@example.com": 1, "three@example.com": 1}
    [retry] = outbox.deliver()  # the stream resumes at the reported record
    assert retry.records[0] == first.records[1]
    assert reported(retry) == []
    assert outbox.sent_to()["two@example.com"] == 1  # not lost
    assert queue_bodies(stack, "MailDeadLetterQueue") == []
    assert outbox.deliver() == []


def test_the_retry_of_a_partial_failure_does_not_resend_the_messages_already_sent(
    outbox: Outbox, faults: Faults
) -> None:
    three_messages(outbox)
    refuse_the_second_everywhere(faults)

    outbox.deliver()
    outbox.deliver()

    assert outbox.sent_to() == {"one@example.com": 1, "two@example.com": 1, "three@example.com": 1}


# --- replays


@pytest.mark.parametrize("outcome", ["sent", "dead-lettered"])
def test_a_record_delivered_again_after_success_sends_no_second_email_and_no_second_dead_letter(
    stack: Stack, outbox: Outbox, faults: Faults, outcome: str
) -> None:
    outbox.write("once@example.com")
    if outcome == "dead-lettered":
        faults.fail("ses", "SendEmail", "MessageRejected", 400)
    [first] = outbox.deliver()
    assert reported(first) == []

    answer = invoke(stack, "MailFunction", first.records)  # at-least-once: the same batch again

    assert answer == {"batchItemFailures": []}
    assert len(stack.sent) + len(queue_bodies(stack, "MailDeadLetterQueue")) == 1


# --- AWS faults mid-batch


@pytest.mark.parametrize(
    ("code", "status", "times", "sent", "attempts", "waits"),
    [
        pytest.param("TooManyRequestsException", 429, 1, True, 2, 1, id="throttled-once"),
        pytest.param("InternalFailure", 500, 3, False, 3, 2, id="500-on-every-attempt"),
        pytest.param("MessageRejected", 400, 1, False, 1, 0, id="rejected"),
    ],
)
def test_an_ses_fault_on_one_message_mid_batch_is_retried_or_dead_lettered_and_the_others_go_once(
    stack: Stack,
    outbox: Outbox,
    faults: Faults,
    backoff: list[float],
    code: str,
    status: int,
    times: int,
    sent: bool,
    attempts: int,
    waits: int,
) -> None:
    messages = three_messages(outbox)
    faults.fail("ses", "SendEmail", code, status, after=1, times=times)
    ses_calls = record_calls("sesv2", clients.sesv2())

    [invocation] = outbox.deliver()

    assert reported(invocation) == []
    assert len(ses_calls) == 2 + attempts
    assert len(backoff) == waits
    letters = [dead_letter_from_body(json.dumps(b)) for b in queue_bodies(stack, "MailDeadLetterQueue")]
    expected = {"one@example.com": 1, "three@example.com": 1} | ({"two@example.com": 1} if sent else {})
    assert outbox.sent_to() == expected
    if sent:
        assert letters == []
    else:
        [letter] = letters
        assert letter is not None
        assert (letter.outbox_id, letter.attempts, letter.error.split(":")[0]) == (
            messages[1].id,
            attempts,
            code,
        )


# ------------------------------------------------------------------------------------------- sweep


class Accounts:
    """Users, sessions and queued mail written with the production adapters (on a client no
    injected fault reaches), and the sweep function's event source mapping."""

    def __init__(self, stack: Stack) -> None:
        client = stack.dynamodb
        self.stack = stack
        self.client = client
        self.users = DynamoUsers(client, stack.table("UsersTable"))
        self.sessions = DynamoSessions(
            client, stack.table("SessionsTable"), stack.table("UsersTable"), stack.table("TokensTable")
        )
        self.outbox = DynamoOutbox(client, stack.table("OutboxTable"))
        self.tx = DynamoTransactor(client)
        self.feed = stack.feed("SweepFunction")

    def new_user(self) -> User:
        user = a_user()
        self.tx.commit(self.users.create_ops(user))
        return user

    def add_sessions(self, user: User, count: int) -> set[str]:
        """``count`` sessions of ``user``'s current generation; their ids."""
        sessions = [a_session(user, exp=EXPIRES) for _ in range(count)]
        puts: Any = [{"PutRequest": {"Item": session_item(s)}} for s in sessions]
        if puts:
            self.client.batch_write_item(RequestItems={self.stack.table("SessionsTable"): puts})
        return {s.id for s in sessions}

    def revoked(self, *, stale: int, current: int) -> tuple[User, set[str]]:
        """A user with ``stale`` sessions of a revoked generation and ``current`` of the new one."""
        user = self.new_user()
        self.add_sessions(user, stale)
        user = self.revoke(user)
        return user, self.add_sessions(user, current)

    def revoke(self, user: User) -> User:
        revoked = revoke_all(user)
        self.tx.commit(self.users.change_ops(user, revoked))
        return revoked

    def delete(self, user: User) -> None:
        self.tx.commit(self.users.delete_ops(user))

    def queue_mail(self, user: User) -> str:
        email = verification_email(to=user.email, username=user.username, link="https://x/y", valid_hours=1)
        self.tx.commit(
            [self.outbox.enqueue_op(email, now=1_800_000_000, kind="verify-email", user_id=user.id)]
        )
        [message_id] = [str(i["id"]["S"]) for i in self.stack.messages() if i["userId"]["S"] == user.id]
        return message_id

    def stored(self, user: User) -> set[str]:
        return set(self.sessions.list_ids(user.id))

    def sweep(self) -> list[Invocation]:
        return self.stack.sweep()


@pytest.fixture
def accounts(stack: Stack) -> Accounts:
    return Accounts(stack)


def users_record(template: dict[str, Any], pk: Any, event: str | None = "MODIFY") -> dict[str, Any]:
    """A users-stream record like ``template`` (a real one) naming another key."""
    record = {**template, "eventID": ids.new_id(), "dynamodb": {**template["dynamodb"], "Keys": {"pk": pk}}}
    if event is None:
        del record["eventName"]
    else:
        record["eventName"] = event
    return record


def user_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["pk"]["S"]).removeprefix("USER#")


# --- poison records


def test_malformed_and_foreign_users_stream_records_are_ignored_without_failing_the_batch(
    stack: Stack, accounts: Accounts
) -> None:
    user, current = accounts.revoked(stale=3, current=1)
    bystander, bystanders_current = accounts.revoked(stale=2, current=1)
    real = {user_of(r): r for r in captured(accounts.feed)}
    assert set(real) == {user.id, bystander.id}
    mine, theirs = real[user.id], real[bystander.id]
    poison = [
        users_record(theirs, {"S": f"USER#{bystander.id}"}, "INSERT"),  # not a change: not this function's
        users_record(theirs, {"S": f"USER#{bystander.id}"}, None),  # no eventName
        users_record(theirs, {"S": f"USERNAME#{bystander.username.lower()}"}, "REMOVE"),  # a claim
        users_record(theirs, {"S": "USER#"}),
        users_record(theirs, {"N": "1"}),
        users_record(theirs, f"USER#{bystander.id}"),  # not an attribute value
        {**theirs, "dynamodb": {**theirs["dynamodb"], "Keys": {}}},
        {**theirs, "dynamodb": None},
        {k: v for k, v in theirs.items() if k != "dynamodb"},
        users_record(theirs, {"S": f"USER#{ODD}"}),  # a user that never existed
        users_record(theirs, {"S": "USER#" + "\U0001f600" * 400}),  # 1.6 KB, still a valid key
    ]

    answer = invoke(stack, "SweepFunction", [*poison, mine])

    assert answer == {"batchItemFailures": []}
    assert accounts.stored(user) == current
    stored = accounts.stored(bystander)
    assert len(stored) == 3  # none of the records above swept it
    assert bystanders_current < stored


def test_a_stray_remove_record_for_a_user_who_still_exists_removes_only_stale_sessions(
    stack: Stack, accounts: Accounts
) -> None:
    user, current = accounts.revoked(stale=3, current=2)
    [modify] = captured(accounts.feed)

    answer = invoke(
        stack, "SweepFunction", [users_record(modify, modify["dynamodb"]["Keys"]["pk"], "REMOVE")]
    )

    assert answer == {"batchItemFailures": []}
    assert accounts.stored(user) == current  # the user is read afresh: the record's eventName is not trusted
    assert accounts.users.get(user.id) is not None


def test_the_records_of_a_user_deleted_since_remove_all_their_sessions_and_mail_in_one_sweep(
    stack: Stack, accounts: Accounts
) -> None:
    user = accounts.new_user()
    accounts.add_sessions(user, 3)
    mail = accounts.queue_mail(user)
    user = accounts.revoke(user)
    accounts.add_sessions(user, 2)
    accounts.delete(user)  # after the change, before any sweep: both records name a gone user
    other, others_current = accounts.revoked(stale=0, current=2)
    accounts.queue_mail(other)
    # Every record the FilterCriteria accept, as Lambda delivers them. (Not through the feed: its
    # committed() check drops a MODIFY whose item is gone, a moto workaround DynamoDB does not need.)
    records = [
        r
        for r in stream_records(stack, "UsersTable")
        if matches(r, accounts.feed.subscription.filter_patterns)
    ]
    assert [(r["eventName"], user_of(r)) for r in records] == [
        ("MODIFY", user.id),
        ("REMOVE", user.id),
        ("MODIFY", other.id),
    ]
    calls = record_calls("dynamodb", clients.dynamodb())

    answer = invoke(stack, "SweepFunction", records)

    assert answer == {"batchItemFailures": []}
    assert accounts.stored(user) == set()
    assert mail not in {i["id"]["S"] for i in stack.messages()}
    assert accounts.stored(other) == others_current
    assert len([i for i in stack.messages() if i["userId"]["S"] == other.id]) == 1
    assert calls.count("GetItem") == 2  # the gone user once, for both its records


# --- replays


def test_a_sweep_batch_delivered_again_later_keeps_the_sessions_made_since(
    stack: Stack, accounts: Accounts
) -> None:
    user, current = accounts.revoked(stale=4, current=1)
    gone = accounts.new_user()
    accounts.add_sessions(gone, 2)
    accounts.delete(gone)
    [first] = accounts.sweep()
    assert reported(first) == []
    newer = accounts.add_sessions(user, 2)  # signed in again after the sweep: the same generation
    replacement = a_user(username=gone.username)  # a new account (a new id) under the gone one's name
    accounts.tx.commit(accounts.users.create_ops(replacement))
    mine = accounts.add_sessions(replacement, 1)

    answer = invoke(stack, "SweepFunction", first.records)  # at-least-once: the same batch again
    again = invoke(stack, "SweepFunction", first.records)

    assert answer == again == {"batchItemFailures": []}
    assert accounts.stored(user) == current | newer
    assert accounts.stored(gone) == set()
    assert accounts.stored(replacement) == mine


# --- partial batch failures and AWS faults mid-batch


@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [
        ("GetItem", "ProvisionedThroughputExceededException", 400),
        ("Query", "ThrottlingException", 400),
        ("BatchWriteItem", "InternalServerError", 500),
    ],
)
def test_a_dynamodb_fault_on_one_user_mid_batch_reports_only_that_record_and_the_retry_finishes(
    accounts: Accounts, faults: Faults, operation: str, code: str, status: int
) -> None:
    arranged = [accounts.revoked(stale=3, current=1) for _ in range(3)]
    users = [user for user, _ in arranged]
    faults.fail("dynamodb", operation, code, status, after=1, times=1)  # the second user's call

    [first] = accounts.sweep()

    assert [user_of(r) for r in first.records] == [u.id for u in users]
    assert reported(first) == [sequence(first.records[1])]
    assert [accounts.stored(u) == current for u, current in arranged] == [True, False, True]
    assert len(accounts.stored(users[1])) == 4  # nothing of its sweep was written
    calls = record_calls("dynamodb", clients.dynamodb())

    [retry] = accounts.sweep()

    assert retry.records == first.records[1:]  # Lambda re-delivers from the failed record on
    assert reported(retry) == []
    assert all(accounts.stored(u) == current for u, current in arranged)
    assert calls.count("BatchWriteItem") == 1  # the third user, swept again, had nothing left to delete
    assert accounts.sweep() == []


# ---------------------------------------------------------------------------------------- both


def test_both_functions_carry_on_while_the_log_level_cannot_be_read(
    stack: Stack, outbox: Outbox, accounts: Accounts, faults: Faults
) -> None:
    user, current = accounts.revoked(stale=2, current=1)
    outbox.write("dora@example.com")
    container.production_deps.cache_clear()  # a cold container: the log level is read from SSM
    ssm_calls = record_calls("ssm", clients.ssm())
    faults.fail("ssm", "GetParameters", "ThrottlingException", 400)

    mailed = outbox.deliver()
    swept = accounts.sweep()

    assert ssm_calls.count("GetParameters") >= 2
    assert [reported(i) for i in mailed + swept] == [[], []]
    assert outbox.sent_to() == {"dora@example.com": 1}
    assert accounts.stored(user) == current
