"""Mail through the outbox, over the real local API: the stream-fed mail function, the dead-letter
queue and the operator tool that lists and replays it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from nimbus_tools.local.control import clear_faults, inject_fault, read_mail
from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_name
from tests.e2e.conftest import Client, run_cli

LINK = "/verify?token="


def poll(read: Callable[[], list[dict[str, Any]]], bound: float) -> list[dict[str, Any]]:
    """``read()`` again every 0.2 s until it returns something, or the bound passes (then: [])."""
    deadline = time.monotonic() + bound
    while True:
        found = read()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def cli_json(local_api: LocalApiProcess, *args: str) -> list[dict[str, Any]]:
    result = run_cli(local_api, *args, "--json")
    assert result.returncode == 0, result.stderr
    parsed: list[dict[str, Any]] = json.loads(result.stdout)
    return parsed


def mail_to(local_api: LocalApiProcess, address: str) -> list[dict[str, Any]]:
    return cli_json(local_api, "mail", "list", "--to", address)


def failed_to(local_api: LocalApiProcess, address: str) -> list[dict[str, Any]]:
    return [m for m in cli_json(local_api, "mail", "failed") if m.get("to") == address]


def test_a_registration_email_is_listed_by_nimbus_mail_list_within_seconds(
    client: Client, local_api: LocalApiProcess
) -> None:
    name = new_name()
    address = f"{name}@example.com"

    assert client.register(name).status == 201

    [mail] = poll(lambda: mail_to(local_api, address), bound=5)
    assert mail["subject"] == "Verify your email address"
    assert LINK in mail["text"]


def test_mail_ses_refuses_is_listed_as_failed_and_retry_all_delivers_it(
    client: Client, local_api: LocalApiProcess
) -> None:
    name = new_name()
    address = f"{name}@example.com"
    inject_fault(local_api.aws_endpoint_url, "ses", "SendEmail", status=400, code="MessageRejected")
    try:
        registered = client.register(name)
        assert registered.status == 201, registered.body  # SES is down; registration is not
        [failed] = poll(lambda: failed_to(local_api, address), bound=10)
    finally:
        clear_faults(local_api.aws_endpoint_url)
    assert failed["kind"] == "verify-email"
    assert failed["error"].startswith("MessageRejected")
    assert LINK not in json.dumps(failed)
    assert mail_to(local_api, address) == []
    assert failed_to(local_api, address) == [failed]  # listing did not consume it

    retried = run_cli(local_api, "mail", "retry", "--all")

    assert retried.returncode == 0, retried.stderr
    assert f"{failed['id']}: sent" in retried.stdout
    [mail] = mail_to(local_api, address)
    assert LINK in mail["text"]
    assert failed_to(local_api, address) == []


def test_mail_retry_refuses_an_unknown_id_and_a_bare_call(local_api: LocalApiProcess) -> None:
    unknown = run_cli(local_api, "mail", "retry", "NOT-AN-ID")
    bare = run_cli(local_api, "mail", "retry")

    assert unknown.returncode == 1
    assert "not in the dead-letter queue" in unknown.stderr
    assert bare.returncode == 2


def test_an_outbox_item_that_is_no_message_is_dead_lettered_once_and_retry_names_it_without_failing_the_rest(
    client: Client, local_api: LocalApiProcess, dynamodb: Any, aws: Any
) -> None:
    poison = f"01POISON{int(time.time() * 1000) % 10**18:018d}"
    tables = local_api.state["tables"]
    dynamodb.put_item(  # no "to", no text: nothing the mail function could ever send
        TableName=tables["OutboxTable"], Item={"id": {"S": poison}, "kind": {"S": "verify-email"}}
    )
    try:
        _poison_is_named_and_the_rest_sent(client, local_api, aws, poison)
    finally:  # no change ever writes such an item: the tests after this one must not meet it
        dynamodb.delete_item(TableName=tables["OutboxTable"], Key={"id": {"S": poison}})


def _poison_is_named_and_the_rest_sent(
    client: Client, local_api: LocalApiProcess, aws: Any, poison: str
) -> None:
    [letter] = poll(
        lambda: [m for m in cli_json(local_api, "mail", "failed") if m.get("outboxId") == poison], 10
    )
    assert letter["kind"] == "unreadable"
    name = new_name()
    inject_fault(local_api.aws_endpoint_url, "ses", "SendEmail", status=400, code="MessageRejected")
    try:
        assert client.register(name).status == 201
        [failed] = poll(lambda: failed_to(local_api, f"{name}@example.com"), bound=10)
    finally:
        clear_faults(local_api.aws_endpoint_url)

    retried = run_cli(local_api, "mail", "retry", letter["id"], failed["id"])

    assert retried.returncode == 1  # one could not be sent, and says why; no traceback
    assert f"outbox item {poison} is not a message" in retried.stderr
    assert "Traceback" not in retried.stderr
    assert len(mail_to(local_api, f"{name}@example.com")) == 1  # sent once, by the retry
    assert failed_to(local_api, f"{name}@example.com") == []  # sent: removed from the queue
    # The poison letter stays for an operator to read; this test takes it out for the tests after.
    sqs = aws.client("sqs", endpoint_url=local_api.aws_endpoint_url)
    url = local_api.state["queues"]["MailDeadLetterQueue"]
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            if poison in message["Body"]:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            else:
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        if not any(poison in m["Body"] for m in messages):
            break


def test_a_registration_burst_ses_throttles_is_mailed_in_order_each_once_and_nothing_is_dead_lettered(
    client: Client, local_api: LocalApiProcess
) -> None:
    """SES over its sending rate is back-pressure: the mail function waits and tries again (the
    emulator answers SendEmail as SES v2 does, 429 TooManyRequestsException)."""
    addresses = [f"{new_name()}@example.com" for _ in range(6)]
    failed_before = cli_json(local_api, "mail", "failed")
    # More refusals than the three failed attempts a message gets before the dead-letter queue.
    inject_fault(
        local_api.aws_endpoint_url, "ses", "SendEmail", status=429, code="TooManyRequestsException", times=6
    )
    try:
        for address in addresses:
            assert client.register(address.partition("@")[0]).status == 201

        def mailed() -> list[dict[str, Any]]:
            found = [m for m in read_mail(local_api.aws_endpoint_url) if set(m["to"]) & set(addresses)]
            return found if len(found) >= len(addresses) else []

        mails = poll(mailed, bound=60)
    finally:
        clear_faults(local_api.aws_endpoint_url)

    assert [to for mail in mails for to in mail["to"]] == addresses  # in order, each once
    assert cli_json(local_api, "mail", "failed") == failed_before  # nothing dead-lettered
