"""Multi-item writes as one DynamoDB transaction, with condition failures mapped to domain errors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.clients import dynamodb
from nimbus_core.errors import NimbusError


@dataclass(frozen=True, slots=True)
class TransactOp:
    """One element of TransactWriteItems (``{"Put": {...}}`` etc.) and the error its condition means."""

    op: dict[str, Any]
    on_condition_failed: NimbusError | None = field(default=None)


class ConditionFailedError(Exception):
    """A transaction was cancelled by a condition that has no domain error attached."""

    def __init__(self, index: int) -> None:
        super().__init__(f"condition failed on transaction item {index}")
        self.index = index


def transact_write(ops: Sequence[TransactOp]) -> None:
    """Write ``ops`` atomically: all of them or none.

    Raises the first failed item's ``on_condition_failed`` error, or :class:`ConditionFailedError`.
    Any other failure (throttling, service errors) propagates and becomes a 500 with nothing written.
    """
    try:
        dynamodb().transact_write_items(TransactItems=[o.op for o in ops])  # type: ignore[misc]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        reasons = exc.response.get("CancellationReasons") or []
        for index, reason in enumerate(reasons):
            if reason.get("Code") == "ConditionalCheckFailed":
                error = ops[index].on_condition_failed
                if error is not None:
                    raise error from exc
                raise ConditionFailedError(index) from exc
        raise
