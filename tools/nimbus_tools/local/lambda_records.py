"""What a DynamoDB event source mapping hands a function and takes back, as Lambda shapes it:
records and events, FilterCriteria patterns, the OnFailure destination's message for a batch given
up on, and the records a ``batchItemFailures`` answer sends back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from nimbus_core.platform import clock
from nimbus_tools.stream_events import StreamSubscription
from nimbus_tools.template import LOCAL_ACCOUNT_ID, LOCAL_REGION


def lambda_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A GetRecords record in the shape Lambda passes to functions (JSON-ready)."""
    dynamodb = dict(record.get("dynamodb") or {})
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": record.get("eventID", uuid.uuid4().hex),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", LOCAL_REGION),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def lambda_event(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The event of one invocation."""
    return {"Records": list(records)}


def matches(record: Mapping[str, Any], patterns: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``record`` passes the FilterCriteria ``patterns`` (any one; none means all): exact
    values, nested objects, ``prefix`` and ``anything-but`` of exact values; another form is a
    ValueError, never misread. As in Lambda, a rule on a field the record lacks never matches."""
    return not patterns or any(_match(record, pattern) for pattern in patterns)


def _match(value: Any, pattern: Mapping[str, Any]) -> bool:
    if not isinstance(value, Mapping):
        return False
    for key, wanted in pattern.items():
        if isinstance(wanted, Mapping) and not _match(value.get(key), wanted):
            return False
        if isinstance(wanted, list):
            for rule in wanted:  # refuse a form the emulator cannot read, whatever the record holds
                _check_rule(rule)
            if key not in value or not any(_rule_matches(value[key], rule) for rule in wanted):
                return False
        elif not isinstance(wanted, Mapping):
            raise ValueError(f"filter pattern values must be lists or objects, got {wanted!r}")
    return True


def _check_rule(rule: Any) -> None:
    prefix = isinstance(rule, Mapping) and set(rule) == {"prefix"} and isinstance(rule["prefix"], str)
    if isinstance(rule, (Mapping, list)) and not prefix and _excluded(rule) is None:
        supported = "exact values, prefix and anything-but only"
        raise ValueError(f"filter rule {rule!r} is not supported locally ({supported})")


def _excluded(rule: Any) -> list[Any] | None:
    # The values of {"anything-but": value or [values]} (exact values only), else None.
    if not isinstance(rule, Mapping) or set(rule) != {"anything-but"}:
        return None
    values = rule["anything-but"]
    values = values if isinstance(values, list) else [values]
    return values if all(isinstance(v, (str, int, float)) for v in values) else None


def _rule_matches(value: Any, rule: Any) -> bool:
    excluded = _excluded(rule)
    if excluded is not None:
        return value not in excluded
    if isinstance(rule, Mapping):
        return isinstance(value, str) and value.startswith(rule["prefix"])
    return bool(value == rule)


def on_failure_message(
    subscription: StreamSubscription, failed: Sequence[Mapping[str, Any]], invocations: int, shard_id: str
) -> dict[str, Any]:
    """What Lambda sends to the OnFailure destination for a batch it gave up on: where the records
    are in the stream (``DDBStreamBatchInfo``), never the records themselves."""
    created = [r["dynamodb"].get("ApproximateCreationDateTime", 0) for r in failed]
    function = f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:{subscription.function}"
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": invocations,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
        "version": "1.0",
        "timestamp": clock.iso(clock.now()),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": failed[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": failed[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": clock.iso(float(min(created))),
            "approximateArrivalOfLastRecord": clock.iso(float(max(created))),
            "batchSize": len(failed),
            "streamArn": failed[0]["eventSourceARN"],
        },
    }


def batch_failures(result_json: str | None, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records of ``batch`` to invoke again after a successful invocation that reported
    ``batchItemFailures``: from the lowest failed sequence number on, as Lambda does. A malformed
    answer fails the whole batch."""
    try:
        result = json.loads(result_json or "null")
    except ValueError:
        result = {"batchItemFailures": [None]}
    failures = (result.get("batchItemFailures") or []) if isinstance(result, dict) else []
    ids = [str(f.get("itemIdentifier") or "") if isinstance(f, dict) else "" for f in failures]
    sequences = [str(r["dynamodb"]["SequenceNumber"]) for r in batch]
    first = min((sequences.index(i) if i in sequences else 0 for i in ids), default=len(batch))
    return list(batch[first:])  # type: ignore[arg-type]
