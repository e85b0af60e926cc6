"""The email outbox: register queues its email in its own transaction; the mail function sends it."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import boto3
import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.dead_letters import dead_letter_from_body
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.outbox import DynamoOutbox, OutboxMessage
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.domain.models import Email
from tests.integration.conftest import NOW, REGION, Api, Clock, Faults, Stack, take_messages

LINK = re.compile(r"https://files\.test/verify\?token=[A-Za-z0-9]+\.([A-Za-z0-9_-]+)")
WEEK = 7 * 24 * 3600


def record_calls(service: str, client: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every call ``client`` makes from now on: (operation, parameters)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def remember(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.name, params))

    client.meta.events.register(f"provide-client-params.{service}.*", remember)
    return calls


def dead_letters(stack: Stack) -> list[dict[str, Any]]:
    """Every message in the mail dead-letter queue (consumed: tests only)."""
    sqs = boto3.client("sqs", region_name=REGION)  # the functions' client only sends
    url = stack.provisioned.queues["MailDeadLetterQueue"]
    return [json.loads(m["Body"]) for m in take_messages(sqs, url)]


@pytest.fixture
def dynamodb_calls(stack: Stack) -> list[tuple[str, dict[str, Any]]]:
    return record_calls("dynamodb", clients.dynamodb())


@pytest.fixture
def ses_calls(stack: Stack) -> list[tuple[str, dict[str, Any]]]:
    return record_calls("sesv2", clients.sesv2())


def test_register_writes_one_outbox_item_in_the_same_transaction_as_the_account(
    api: Api, stack: Stack, frozen: Clock, dynamodb_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    reply = api.register(username="Alice_W", email="Alice.W@example.com")

    assert reply.status == 201, reply.body
    assert [name for name, _ in dynamodb_calls] == ["UpdateItem", "TransactWriteItems"]  # 2 round trips
    [transaction] = [params for name, params in dynamodb_calls if name == "TransactWriteItems"]
    tables = [next(iter(op.values()))["TableName"] for op in transaction["TransactItems"]]
    assert sorted(tables) == sorted(
        # the user, its two claims and a shard of the user count; the session; the verification
        # token; the known device; the mail; the account's first activity event
        [
            "UsersTable",
            "UsersTable",
            "UsersTable",
            "UsersTable",
            "SessionsTable",
            "TokensTable",
            "TokensTable",
            "OutboxTable",
            "OutboxTable",
        ]
    )
    [item] = [from_item(i) for i in stack.messages()]
    assert set(item) == {"id", "kind", "to", "subject", "text", "html", "createdAt", "expiresAt", "userId"}
    assert (item["kind"], item["to"], item["subject"]) == (
        "verify-email",
        "Alice.W@example.com",
        "Verify your email address",
    )
    assert item["createdAt"] == "2027-01-15T08:00:00.250Z"
    assert item["expiresAt"] == int(NOW) + WEEK
    link = LINK.search(item["text"])
    assert link is not None
    [token] = [from_item(i) for i in stack.items("TokensTable") if i["kind"]["S"] == "verify-email"]
    assert token["pk"] == "VERIFY#" + hashlib.sha256(link.group(1).encode()).hexdigest()


def test_register_makes_no_ses_call(
    api: Api, stack: Stack, ses_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    reply = api.register()

    assert reply.status == 201, reply.body
    assert ses_calls == []
    assert stack.sent == []


def test_a_register_that_is_refused_queues_no_email(api: Api, stack: Stack) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201

    assert api.register("ALICE", email="other@example.com", ip="192.0.2.2").status == 409

    assert len(stack.messages()) == 1
    assert [e["to"] for e in stack.emails] == [["alice@example.com"]]


def test_the_mail_function_fed_by_the_outbox_stream_sends_the_verification_email(
    api: Api, stack: Stack
) -> None:
    assert api.register(username="Alice_W", email="Alice.W@example.com").status == 201

    answer = stack.deliver_mail()

    assert answer == {"batchItemFailures": []}
    [email] = stack.sent
    assert (email["to"], email["from"]) == (["Alice.W@example.com"], "no-reply@nimbus.example")
    [item] = [from_item(i) for i in stack.messages()]
    assert (email["subject"], email["text"], email["html"]) == (item["subject"], item["text"], item["html"])
    assert stack.deliver_mail() == {"batchItemFailures": []}  # delivered once: nothing new
    assert len(stack.sent) == 1


def test_an_email_held_up_by_an_ses_outage_at_register_time_is_sent_once_ses_answers(
    api: Api, stack: Stack, faults: Faults
) -> None:
    faults.fail("ses", "SendEmail")
    assert api.register().status == 201
    faults.clear()

    stack.deliver_mail()

    assert [e["to"] for e in stack.sent] == [["alice@example.com"]]


def test_an_email_ses_keeps_refusing_goes_to_the_dead_letter_queue_without_its_link(
    api: Api, stack: Stack, faults: Faults
) -> None:
    assert api.register().status == 201
    faults.fail("ses", "SendEmail", "MessageRejected", 400)

    answer = stack.deliver_mail()

    assert answer == {"batchItemFailures": []}  # handled: dead-lettered, not retried by the stream
    assert stack.sent == []
    [letter] = dead_letters(stack)
    [item] = [from_item(i) for i in stack.messages()]
    assert letter["outboxId"] == item["id"]
    assert (letter["to"], letter["kind"], letter["attempts"]) == ("alice@example.com", "verify-email", 1)
    assert letter["error"].startswith("MessageRejected")
    link = LINK.search(item["text"])
    assert link is not None
    assert link.group(1) not in json.dumps(letter)
    assert dead_letter_from_body(json.dumps(letter)) is not None


def test_an_email_that_can_be_neither_sent_nor_dead_lettered_is_reported_for_the_stream_to_retry(
    api: Api, stack: Stack, faults: Faults
) -> None:
    assert api.register().status == 201
    faults.fail("ses", "SendEmail", "MessageRejected", 400)
    faults.fail("sqs", "SendMessage")

    answer = stack.deliver_mail()

    [failure] = answer["batchItemFailures"]
    assert failure["itemIdentifier"]
    assert stack.sent == []
    faults.clear()
    assert dead_letters(stack) == []


def test_mail_after_a_refused_registration_is_still_delivered(api: Api, stack: Stack) -> None:
    assert api.register("alice", ip="192.0.2.1").status == 201
    assert [e["to"] for e in stack.emails] == [["alice@example.com"]]
    assert api.register("ALICE", email="other@example.com", ip="192.0.2.2").status == 409

    assert api.register("bob", ip="192.0.2.3").status == 201

    assert [e["to"] for e in stack.emails] == [["alice@example.com"], ["bob@example.com"]]


# ---------------------------------------------------------------- the outbox as the mail ledger


def _ledger(stack: Stack) -> tuple[DynamoOutbox, OutboxMessage]:
    outbox = DynamoOutbox(stack.dynamodb, stack.table("OutboxTable"))
    email = Email(to="ledger@example.com", subject="s", text="t", html="<p>h</p>")
    message = outbox.new_message(email, now=NOW, kind="verify-email", user_id="01LEDGERUSER00000000000000")
    DynamoTransactor(stack.dynamodb).commit([outbox.put_op(message)])
    return outbox, message


def test_a_claimed_message_is_busy_until_its_claim_lapses_then_claimable_again(stack: Stack) -> None:
    outbox, message = _ledger(stack)

    first = outbox.claim(message.id, now=NOW, until=NOW + 90)
    during = outbox.claim(message.id, now=NOW + 89, until=NOW + 179)
    after = outbox.claim(message.id, now=NOW + 91, until=NOW + 181)

    assert (first, during, after) == ("claimed", "busy", "claimed")


def test_a_settled_message_is_never_claimed_again_and_a_released_one_is_at_once(stack: Stack) -> None:
    outbox, message = _ledger(stack)
    assert outbox.claim(message.id, now=NOW, until=NOW + 90) == "claimed"
    outbox.release(message.id)
    assert outbox.claim(message.id, now=NOW + 1, until=NOW + 91) == "claimed"

    outbox.settle(message.id, "sentAt", now=NOW + 2)

    assert outbox.claim(message.id, now=NOW + 1000, until=NOW + 1090) == "settled"
    stored = from_item(stack.messages()[0])
    assert "sendingUntil" not in stored
    assert stored["sentAt"]


def test_a_message_deleted_with_its_user_is_gone_and_settling_it_writes_nothing(stack: Stack) -> None:
    outbox, message = _ledger(stack)
    assert outbox.discard_for("01LEDGERUSER00000000000000") == 1

    assert outbox.claim(message.id, now=NOW, until=NOW + 90) == "gone"
    outbox.settle(message.id, "deadLetteredAt", now=NOW)
    outbox.release(message.id)
    assert stack.messages() == []
