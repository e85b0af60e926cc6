"""Multi-item writes as one DynamoDB transaction, with condition failures mapped to domain errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.adapters.errors import error_code
from nimbus_core.adapters.items import from_item
from nimbus_core.errors import DependencyError, ErrorCode, NimbusError
from nimbus_core.ports import WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_CONFLICT_ATTEMPTS = 3

# What a failed condition means, given the item as it was (None if it did not exist).
Explain = Callable[[dict[str, Any] | None], Exception]


@dataclass(frozen=True, slots=True)
class TransactOp(WriteOp):
    """One element of TransactWriteItems (``{"Put": {...}}`` etc.) and the error its condition means."""

    op: dict[str, Any]
    on_condition_failed: Explain | None = field(default=None)


def fails_with(code: ErrorCode) -> Explain:
    """An explanation that is always the same contract error, whatever the old item was."""
    return lambda _old: NimbusError(code)


class ConditionFailedError(DependencyError):
    """A transaction was cancelled by a condition that has no domain error attached (a bug)."""


class DynamoTransactor:
    """The :class:`nimbus_core.ports.Transactor` on DynamoDB ``TransactWriteItems``."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._client = client

    def commit(self, ops: Sequence[WriteOp]) -> None:
        """Write ``ops`` atomically; raise the first failed condition's domain error.

        Any other failure (throttling, service errors) is a DependencyError with nothing written.
        """
        items = [_transact_op(o) for o in ops]
        if not items:
            return
        request = [_with_old_item(o.op) if o.on_condition_failed else o.op for o in items]
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                self._client.transact_write_items(TransactItems=request)  # type: ignore[arg-type]
                return
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise DependencyError(f"TransactWriteItems failed: {exc}") from exc
                reasons: list[dict[str, Any]] = exc.response.get("CancellationReasons") or []  # type: ignore[assignment]
                for index, reason in enumerate(reasons):
                    if reason.get("Code") == "ConditionalCheckFailed":
                        raise _explain(items[index], reason.get("Item")) from exc
                conflict = any(r.get("Code") == "TransactionConflict" for r in reasons)
                if not conflict or attempt == _CONFLICT_ATTEMPTS - 1:
                    raise DependencyError(f"TransactWriteItems cancelled: {exc}") from exc
            except BotoCoreError as exc:
                raise DependencyError(f"TransactWriteItems failed: {exc}") from exc
            # A concurrent transaction held one of our items: try again; its conditions then decide.
            time.sleep(random.uniform(0.01, 0.05) * 2**attempt)  # noqa: S311 - jitter, not a secret


def _transact_op(op: WriteOp) -> TransactOp:
    if not isinstance(op, TransactOp):
        raise TypeError(f"DynamoTransactor cannot commit {type(op).__name__}")
    return op


def _with_old_item(op: dict[str, Any]) -> dict[str, Any]:
    (kind, body), *_ = op.items()
    return {kind: {**body, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def _explain(op: TransactOp, old: dict[str, Any] | None) -> Exception:
    if op.on_condition_failed is None:
        return ConditionFailedError(f"condition failed on {next(iter(op.op))}")
    return op.on_condition_failed(from_item(old) if old else None)
