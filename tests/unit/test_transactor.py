"""The DynamoDB transactor: conditions become domain errors, conflicts are retried (botocore Stubber)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from nimbus_core.adapters.transactions import DynamoTransactor, TransactOp, fails_with
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from tests.contract.builders import a_user

PUT = {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}}}}
CLAIM = {
    "Put": {"TableName": "t", "Item": {"pk": {"S": "b"}}, "ConditionExpression": "attribute_not_exists(pk)"}
}


def _client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _cancelled(stubber: Stubber, *codes: str) -> None:
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        http_status_code=400,
        response_meta={},
        modeled_fields={"CancellationReasons": [{"Code": c} for c in codes]},
    )


def test_a_transaction_conflict_is_retried_and_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    client = _client()
    with Stubber(client) as stubber:
        _cancelled(stubber, "None", "TransactionConflict")
        stubber.add_response("transact_write_items", {})
        DynamoTransactor(client).commit([TransactOp(PUT), TransactOp(CLAIM)])
        stubber.assert_no_pending_responses()


def test_a_conflict_that_persists_is_a_dependency_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    client = _client()
    with Stubber(client) as stubber:
        for _ in range(3):
            _cancelled(stubber, "TransactionConflict", "None")
        with pytest.raises(DependencyError):
            DynamoTransactor(client).commit([TransactOp(PUT), TransactOp(CLAIM)])


def test_a_failed_condition_raises_the_error_its_op_carries() -> None:
    client = _client()
    with Stubber(client) as stubber:
        _cancelled(stubber, "None", "ConditionalCheckFailed")
        with pytest.raises(NimbusError) as raised:
            DynamoTransactor(client).commit(
                [TransactOp(PUT), TransactOp(CLAIM, fails_with(ErrorCode.USER_EXISTS_ERROR))]
            )
    assert raised.value.code is ErrorCode.USER_EXISTS_ERROR


@pytest.mark.parametrize("claim", [1, 2], ids=["username", "email"])
def test_a_deletion_whose_claim_moved_on_is_built_again_on_a_fresh_read(claim: int) -> None:
    """A claim of the deleted user that another user holds means the user's names moved on since
    the read: a UserChangedError (the deletion is built again on the stored user), never a 500."""
    client = _client()
    ops = DynamoUsers(client, "users").delete_ops(a_user())
    codes = ["None"] * len(ops)
    codes[claim] = "ConditionalCheckFailed"
    with Stubber(client) as stubber:
        _cancelled(stubber, *codes)
        with pytest.raises(UserChangedError):
            DynamoTransactor(client).commit(ops)
