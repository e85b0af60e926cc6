"""The DynamoDB counter's decisions on a failed condition (botocore Stubber): a refusal is decided on
the item DynamoDB returned with the failure, never on the failure alone."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from nimbus_core.adapters.counters import CounterSpec, CounterTargetMissingError, hit

NOW = 1_800_000_000
WINDOW = 900
LIMIT = 5
COUNTERS = CounterSpec(table="counters", key={"pk": {"S": "login#ip#192.0.2.1"}})
ON_USER = CounterSpec(
    table="users",
    key={"pk": {"S": "USER#01M8GN49WC2DNH9VMCRGZHGNES"}},
    count_attr="authFailures",
    reset_attr="authFailuresResetAt",
    ttl_attr=None,
    must_exist=True,
)


def _client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _failed(stubber: Stubber, found: dict[str, Any] | None) -> None:
    """The hit's condition failed; ``found``: the item returned with the failure (ALL_OLD)."""
    stubber.add_client_error(
        "update_item",
        service_error_code="ConditionalCheckFailedException",
        http_status_code=400,
        modeled_fields={"Item": found} if found is not None else None,
    )


def _counted(stubber: Stubber, spec: CounterSpec, count: int) -> None:
    attributes = {spec.count_attr: {"N": str(count)}, spec.reset_attr: {"N": str(NOW + WINDOW)}}
    stubber.add_response("update_item", {"Attributes": {**spec.key, **attributes}})


def _found(spec: CounterSpec, count: int, reset_at: int) -> dict[str, Any]:
    return {**spec.key, spec.count_attr: {"N": str(count)}, spec.reset_attr: {"N": str(reset_at)}}


def test_a_counter_found_full_in_its_window_refuses_without_another_call() -> None:
    client = _client()
    with Stubber(client) as stubber:
        _failed(stubber, _found(COUNTERS, LIMIT, NOW + 60))
        state = hit(client, COUNTERS, limit=LIMIT, window=WINDOW, now=NOW)
        stubber.assert_no_pending_responses()

    assert (state.allowed, state.count, state.reset_at) == (False, LIMIT, NOW + 60)


@pytest.mark.parametrize(
    "found",
    [_found(COUNTERS, LIMIT - 1, NOW + 60), _found(COUNTERS, LIMIT, NOW), None],
    ids=["room left", "window over", "no counter"],
)
def test_a_failure_whose_item_refuses_nobody_is_counted_again(found: dict[str, Any] | None) -> None:
    client = _client()
    with Stubber(client) as stubber:
        _failed(stubber, found)
        _counted(stubber, COUNTERS, 1)
        state = hit(client, COUNTERS, limit=LIMIT, window=WINDOW, now=NOW)
        stubber.assert_no_pending_responses()

    assert state.allowed


def test_a_counter_on_a_record_that_is_gone_says_so() -> None:
    client = _client()
    with Stubber(client) as stubber:
        _failed(stubber, None)
        with pytest.raises(CounterTargetMissingError):
            hit(client, ON_USER, limit=LIMIT, window=WINDOW, now=NOW)


def test_a_counter_on_a_record_found_with_room_is_counted_again() -> None:
    client = _client()
    with Stubber(client) as stubber:
        _failed(stubber, _found(ON_USER, 2, NOW + 60))
        _counted(stubber, ON_USER, 3)
        state = hit(client, ON_USER, limit=LIMIT, window=WINDOW, now=NOW)
        stubber.assert_no_pending_responses()

    assert (state.allowed, state.count) == (True, 3)
