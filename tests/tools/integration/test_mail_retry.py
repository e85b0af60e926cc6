"""`nimbus mail retry` of a stream batch the mail function's event source mapping gave up on, on moto:
the batch's sequence-number range also holds the recovery requests written between its messages
(the mail function's filter kept them away, the recovery function handles them), and those are
neither sent nor named as problems."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.domain.models import Email
from nimbus_core.platform import clock
from nimbus_tools.cli.mailqueue import QUEUE, retry
from nimbus_tools.cli.target import Target
from nimbus_tools.local.provision import ProvisionedStack, provision
from nimbus_tools.local.streams import latest_stream_arn
from nimbus_tools.template import load_template
from tests.integration.conftest import fresh_aws

pytestmark = pytest.mark.waits  # the operator tool run as a process

REGION = "us-east-1"
SENDER = str(load_template()["Parameters"]["SenderEmail"]["Default"])


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProvisionedStack]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    with fresh_aws():
        yield provision(boto3.Session(region_name=REGION), load_template())


def _records(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    streams = boto3.client(
        "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
    )
    arn = latest_stream_arn(dynamodb, table)
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator, Limit=100)["Records"]
    return [{**r, "shardId": shard["ShardId"], "streamArn": arn} for r in records]


def test_a_given_up_mail_batch_sends_its_messages_and_passes_over_the_recovery_requests_between_them(
    stack: ProvisionedStack,
) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    table = stack.tables["OutboxTable"]
    outbox, now = DynamoOutbox(dynamodb, table), clock.now()
    sent = []
    for n, step in enumerate(["message", "request", "message"]):
        if step == "request":
            outbox.queue_recovery("somebody", now=now)
            continue
        email = Email(to=f"user{n}@example.com", subject="Verify", text="text", html="<p>html</p>")
        DynamoTransactor(dynamodb).commit(
            [outbox.enqueue_op(email, now=now, kind="verify-email", user_id="U1")]
        )
        sent.append(_records(dynamodb, table)[-1]["dynamodb"]["Keys"]["id"]["S"])
    records = _records(dynamodb, table)
    batch = {
        "shardId": records[0]["shardId"],
        "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
        "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
        "batchSize": 2,
        "streamArn": records[0]["streamArn"],
    }
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(QueueUrl=stack.queues[QUEUE], MessageBody=json.dumps({"DDBStreamBatchInfo": batch}))
    target = Target(
        description="the test stack",
        session=boto3.Session(region_name=REGION),
        tables=stack.tables,
        parameters=stack.parameters,
        queues=stack.queues,
        sender_email=SENDER,
    )

    [outcome] = retry(target, [], every=True)

    assert outcome.problems == []
    assert outcome.sent == sent
    assert outcome.done
    assert sqs.receive_message(QueueUrl=stack.queues[QUEUE]).get("Messages", []) == []
