"""The local stream event source's rules: filters, batch item failures, Lambda's record shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from nimbus_tools.local.lambda_records import batch_failures, lambda_record, matches

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
    for rule in ({"suffix": "ERT"}, {"anything-but": {"prefix": "IN"}}, {"prefix": 1}, ["INSERT"]):
        with pytest.raises(ValueError, match="not supported locally"):
            matches(record("1"), [{"eventName": [rule]}])
    with pytest.raises(ValueError, match="not supported locally"):  # even where the key is absent
        matches(record("1"), [{"missing": [{"suffix": "x"}]}])


def outbox_record(kind: Any, event: str = "INSERT") -> dict[str, Any]:
    """A NEW_IMAGE outbox record whose item has ``kind`` (an attribute value; None: no kind)."""
    image: dict[str, Any] = {"id": {"S": "1"}} | ({"kind": kind} if kind is not None else {})
    return {"eventName": event, "dynamodb": {"SequenceNumber": "1", "NewImage": image}}


def test_anything_but_keeps_every_other_value_and_drops_the_named_ones_and_a_missing_field() -> None:
    """Lambda event filtering's ``anything-but``: a value among those named is dropped, any other
    kept; a record without the field matches no rule on it, as in Lambda."""
    kind = {"S": [{"anything-but": ["a", "b"]}]}
    mail = [{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"kind": kind}}}]

    assert matches(outbox_record({"S": "verify-email"}), mail)
    assert not matches(outbox_record({"S": "a"}), mail)
    assert not matches(outbox_record({"S": "b"}), mail)
    assert not matches(outbox_record({"S": "verify-email"}, "MODIFY"), mail)
    assert not matches(outbox_record(None), mail)
    assert not matches(outbox_record({"N": "1"}), mail)  # no string kind
    one = [{"dynamodb": {"NewImage": {"kind": {"S": [{"anything-but": "a"}]}}}}]  # one value, no list
    assert matches(outbox_record({"S": "ab"}), one)
    assert not matches(outbox_record({"S": "a"}), one)


def users_record(pk: str, event: str) -> dict[str, Any]:
    """A KEYS_ONLY users-table record: no images, only the key."""
    return {
        "eventName": event,
        "dynamodb": {"SequenceNumber": "1", "StreamViewType": "KEYS_ONLY", "Keys": {"pk": {"S": pk}}},
    }


def test_a_prefix_filter_on_the_key_keeps_user_items_and_drops_claims() -> None:
    user_items = {"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "USER#"}]}}}}
    patterns = [{"eventName": ["MODIFY", "REMOVE"], **user_items}]

    assert matches(users_record("USER#01ABC", "MODIFY"), patterns)
    assert matches(users_record("USER#01ABC", "REMOVE"), patterns)
    assert not matches(users_record("USER#01ABC", "INSERT"), patterns)
    assert not matches(users_record("USERNAME#alice", "REMOVE"), patterns)
    assert not matches(users_record("EMAIL#alice@example.com", "MODIFY"), patterns)
    assert not matches(users_record("XUSER#01ABC", "MODIFY"), patterns)  # a prefix, not a substring
    assert not matches({"eventName": "MODIFY", "dynamodb": {"Keys": {"pk": {"N": "1"}}}}, patterns)
    assert not matches({"eventName": "MODIFY", "dynamodb": {}}, patterns)


def test_exact_values_and_prefixes_mix_in_one_list() -> None:
    patterns = [{"dynamodb": {"Keys": {"pk": {"S": ["ADMIN", {"prefix": "USER#"}]}}}}]

    assert matches(users_record("ADMIN", "MODIFY"), patterns)
    assert matches(users_record("USER#1", "MODIFY"), patterns)
    assert not matches(users_record("ADMINS", "MODIFY"), patterns)


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
