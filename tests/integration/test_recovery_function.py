"""The recovery function on moto, fed the outbox stream as its event source mapping would feed it:
each recovery request becomes one token and one mail (or nothing, for a name that is no account),
however often the stream delivers its record; the mail function never sees a request; a fault is
retried and finished; a batch that keeps failing is given up to its own queue."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.outbox import RECOVERY_REQUEST_TTL_SECONDS
from tests.integration.conftest import REGION, Api, Clock, Faults, Stack, take_messages
from tests.integration.test_mail import dead_letters
from tests.integration.test_stream_resilience import invoke


def _recover(api: Api, name: str, ip: str = "198.51.100.20") -> None:
    reply = api.call("POST", "/users/recover", {"username": name}, ip=ip)
    assert (reply.status, reply.body["code"]) == (201, "SEND_RECOVERY_EMAIL_SUCCESS"), reply.body


def _outbox(stack: Stack, kind: str) -> list[dict[str, Any]]:
    return [m for m in map(from_item, stack.messages()) if m["kind"] == kind]


def _recovery_tokens(stack: Stack) -> list[dict[str, Any]]:
    return [t for t in map(from_item, stack.items("TokensTable")) if str(t["pk"]).startswith("RECOVER#")]


def _user(stack: Stack, name: str) -> dict[str, Any]:
    return next(i for i in map(from_item, stack.items("UsersTable")) if i.get("username") == name)


def test_a_record_delivered_twice_issues_one_token_and_one_mail(api: Api, stack: Stack) -> None:
    assert api.register("alice").status == 201
    _recover(api, "alice")

    [first] = stack.handle_recovery_requests()
    again = invoke(stack, "RecoveryFunction", first.records)  # at least once: the same batch again

    assert first.failures == []
    assert again == {"batchItemFailures": []}
    assert [m["to"] for m in _outbox(stack, "recover-password")] == ["alice@example.com"]
    [token] = _recovery_tokens(stack)
    user = _user(stack, "alice")
    assert user["pendingRecovery"] == str(token["pk"]).removeprefix("RECOVER#")
    assert user["recoveryMails"] == 1  # counted once against the silent limit
    assert _outbox(stack, "recover-request") == []


def test_the_mail_function_never_gets_a_request_and_an_unknown_name_only_removes_it(
    api: Api, stack: Stack
) -> None:
    _recover(api, "nobody")
    _recover(api, "nobody@example.com", ip="198.51.100.21")

    mail = stack.feed("MailFunction").drain(stack.routed.handler("MailFunction"))
    [handled] = stack.handle_recovery_requests()

    assert mail == []  # its filter kept both requests away: no invocation, no unreadable mail
    assert dead_letters(stack) == []
    assert len(handled.records) == 2
    assert _outbox(stack, "recover-request") == []
    assert _outbox(stack, "recover-password") == []


def test_a_banned_account_and_one_past_its_limit_are_mailed_nothing(api: Api, stack: Stack) -> None:
    assert api.register("alice").status == 201
    assert api.register("bob", ip="198.51.100.8").status == 201
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{_user(stack, 'bob')['id']}"}},
        UpdateExpression="SET bannedAt = :b",
        ExpressionAttributeValues={":b": {"S": "2027-01-15T08:00:00.250Z"}},
    )
    for n in range(4):
        _recover(api, "alice", ip=f"198.51.100.{30 + n}")
    _recover(api, "bob", ip="198.51.100.40")

    stack.handle_recovery_requests()

    assert [m["to"] for m in _outbox(stack, "recover-password")] == ["alice@example.com"] * 3
    assert "pendingRecovery" not in _user(stack, "bob")
    assert _outbox(stack, "recover-request") == []


def test_a_fault_in_the_transaction_is_reported_retried_and_mails_once(
    api: Api, stack: Stack, faults: Faults
) -> None:
    assert api.register("alice").status == 201
    _recover(api, "alice")
    faults.fail("dynamodb", "TransactWriteItems", "InternalServerError", 500, times=1)

    [failed] = stack.handle_recovery_requests()
    assert len(failed.failures) == 1
    assert _outbox(stack, "recover-password") == []
    assert len(_outbox(stack, "recover-request")) == 1  # nothing half done: the request waits

    [retried] = stack.handle_recovery_requests()
    assert retried.failures == []
    assert len(_outbox(stack, "recover-password")) == 1
    assert _outbox(stack, "recover-request") == []


def test_a_request_that_waited_past_its_ttl_is_dropped_unmailed(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    assert api.register("alice").status == 201
    _recover(api, "alice")
    frozen.now += RECOVERY_REQUEST_TTL_SECONDS

    stack.handle_recovery_requests()

    assert _outbox(stack, "recover-password") == []
    assert _outbox(stack, "recover-request") == []


def test_a_batch_that_keeps_failing_goes_to_the_recovery_dead_letter_queue(
    api: Api, stack: Stack, faults: Faults
) -> None:
    assert api.register("alice").status == 201
    _recover(api, "alice")
    faults.fail("dynamodb", "Query", "InternalServerError", 500)
    feed = stack.feed("RecoveryFunction")

    while not feed.given_up:
        assert all(i.failures for i in stack.handle_recovery_requests())

    sqs = boto3.client("sqs", region_name=REGION)
    url = stack.provisioned.queues["RecoveryDeadLetterQueue"]
    [message] = take_messages(sqs, url)
    batch = json.loads(message["Body"])["DDBStreamBatchInfo"]
    assert batch["batchSize"] == 1
    assert "alice" not in message["Body"]  # where the records are, never what they hold


@pytest.mark.parametrize("image", [{"id": {"S": "x"}, "kind": {"S": "recover-request"}}, {"id": {"S": "y"}}])
def test_a_record_that_is_no_readable_request_is_skipped_not_retried(
    stack: Stack, image: dict[str, Any]
) -> None:
    record = {
        "eventID": "1",
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": {"id": image["id"]}, "NewImage": image, "SequenceNumber": "1"},
    }
    assert invoke(stack, "RecoveryFunction", [record]) == {"batchItemFailures": []}
