"""The local stream event source's rules: filters, batch item failures, Lambda's record shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from nimbus_tools.local.streams import batch_failures, lambda_record, matches

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/OutboxTable/stream/x"


def record(sequence: str, event: str = "INSERT") -> dict[str, Any]:
    return {"eventName": event, "dynamodb": {"SequenceNumber": sequence, "Keys": {"id": {"S": sequence}}}}


def test_an_insert_filter_keeps_inserts_and_drops_removes_and_modifies() -> None:
    patterns = [{"eventName": ["INSERT"]}]

    assert matches(record("1"), patterns)
    assert not matches(record("2", "REMOVE"), patterns)
    assert not matches(record("3", "MODIFY"), patterns)
    assert matches(record("4", "REMOVE"), [])  # no filter: everything


def test_a_filter_form_the_emulator_cannot_read_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="not supported locally"):
        matches(record("1"), [{"eventName": [{"prefix": "INS"}]}])


def test_a_reported_failure_retries_that_record_and_every_later_one() -> None:
    batch = [record("10"), record("20"), record("30")]

    failed = batch_failures(json.dumps({"batchItemFailures": [{"itemIdentifier": "20"}]}), batch)

    assert [r["dynamodb"]["SequenceNumber"] for r in failed] == ["20", "30"]
    assert batch_failures(json.dumps({"batchItemFailures": []}), batch) == []


def test_an_unknown_item_identifier_fails_the_whole_batch() -> None:
    batch = [record("10"), record("20")]

    assert batch_failures(json.dumps({"batchItemFailures": [{"itemIdentifier": "99"}]}), batch) == batch
    assert batch_failures(json.dumps({"batchItemFailures": [{"itemIdentifier": ""}]}), batch) == batch


def test_a_record_gets_lambdas_shape_with_the_stream_arn_and_epoch_seconds() -> None:
    raw = record("10") | {"eventID": "e1"}
    raw["dynamodb"]["ApproximateCreationDateTime"] = datetime(2027, 1, 15, 8, tzinfo=UTC)

    shaped = lambda_record(raw, ARN)

    assert shaped["eventSourceARN"] == ARN
    assert shaped["eventSource"] == "aws:dynamodb"
    assert shaped["dynamodb"]["ApproximateCreationDateTime"] == 1_800_000_000
    json.dumps(shaped)  # JSON-ready for the worker pipe
