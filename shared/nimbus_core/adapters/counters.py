"""Atomic fixed-window counters in DynamoDB.

A window starts at the first counted request and lasts ``window`` seconds. Every decision is a
conditional UpdateItem, so N concurrent requests let exactly ``limit`` through. The common cases
(new key, open window, exhausted window) take one round trip; a stale expired window (TTL deletes
lazily) takes two: the increment that notices it, then a reset guarded by the old window's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.ports import CounterState, CounterThrottledError, CounterWindowMovedError, WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """Where a counter lives: table, key, and the attribute names of its count and window end."""

    table: str
    key: dict[str, Any]
    count_attr: str = "count"
    reset_attr: str = "resetAt"
    # Counter items of their own carry a TTL; counters on another record (the user item) do not,
    # and must never create that record if it was deleted meanwhile.
    ttl_attr: str | None = "expiresAt"
    must_exist: bool = False


# DynamoDB's answers when one item's partition is over its capacity (a flooded counter); the SDK
# has already retried them by the time they reach us.
_THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException"})


class CounterTargetMissingError(Exception):
    """The record a ``must_exist`` counter lives on is gone."""


class DynamoCounters:
    """The :class:`nimbus_core.domain.deployment_ports.CounterStore` on a counters table keyed by ``pk``."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def _spec(self, key: str) -> CounterSpec:
        return CounterSpec(table=self._table, key={"pk": {"S": key}})

    def hit(self, key: str, *, limit: int, window: int, now: float) -> CounterState:
        """Count one request under ``key`` if the window has room."""
        return hit(self._client, self._spec(key), limit=limit, window=window, now=now)

    def release(self, key: str, *, reset_at: int) -> None:
        """Give one hit back within the same window."""
        release(self._client, self._spec(key), reset_at=reset_at)

    def release_op(self, key: str, *, reset_at: int) -> WriteOp:
        """The give-back of :meth:`release` as a transaction element."""
        spec = self._spec(key)
        return TransactOp(
            {"Update": {"TableName": spec.table, "Key": spec.key, **_release_update(spec, reset_at)}},
            _window_moved,
        )


def _window_moved(_old: dict[str, Any] | None) -> Exception:
    return CounterWindowMovedError()


def _release_update(spec: CounterSpec, reset_at: int) -> dict[str, Any]:
    """The update that gives one hit back, only in the window that ends at ``reset_at``."""
    return {
        "UpdateExpression": "ADD #c :minus",
        "ConditionExpression": "#r = :reset AND #c > :zero",
        "ExpressionAttributeNames": {"#c": spec.count_attr, "#r": spec.reset_attr},
        "ExpressionAttributeValues": {
            ":minus": {"N": "-1"},
            ":reset": {"N": str(reset_at)},
            ":zero": {"N": "0"},
        },
    }


def hit_on_record(
    client: DynamoDBClient,
    table: str,
    key: dict[str, Any],
    attrs: tuple[str, str],
    *,
    limit: int,
    window: int,
    now: float,
) -> CounterState | None:
    """Count one failure on a record of its own (a user, a session, a known device), in its
    ``attrs`` (count, window end): one conditional UpdateItem that never creates the record nor
    touches its TTL; None when the record is gone."""
    spec = CounterSpec(table, key, count_attr=attrs[0], reset_attr=attrs[1], ttl_attr=None, must_exist=True)
    try:
        return hit(client, spec, limit=limit, window=window, now=now)
    except CounterTargetMissingError:
        return None


def hit(client: DynamoDBClient, spec: CounterSpec, *, limit: int, window: int, now: float) -> CounterState:
    """Count one request if the window has room; report the state either way."""
    names = {"#c": spec.count_attr, "#r": spec.reset_attr}
    now_s = int(now)
    update = "SET #r = if_not_exists(#r, :reset) ADD #c :one"
    if spec.ttl_attr:
        names["#t"] = spec.ttl_attr
        update = "SET #r = if_not_exists(#r, :reset), #t = if_not_exists(#t, :reset) ADD #c :one"
    condition = "attribute_not_exists(#c) OR #c < :limit OR #r <= :now"
    if spec.must_exist:
        condition = f"attribute_exists({next(iter(spec.key))}) AND ({condition})"
    values: dict[str, Any] = {
        ":one": {"N": "1"},
        ":limit": {"N": str(limit)},
        ":now": {"N": str(now_s)},
        ":reset": {"N": str(now_s + window)},
    }
    for _ in range(5):
        with aws_errors("UpdateItem (counter)"):
            try:
                result = client.update_item(
                    TableName=spec.table,
                    Key=spec.key,
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if error_code(exc) in _THROTTLED:
                    raise CounterThrottledError(f"UpdateItem (counter) throttled: {exc}") from exc
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                old = from_item(dict(exc.response.get("Item") or {}))  # type: ignore[call-overload]
                if not old and spec.must_exist:
                    raise CounterTargetMissingError(spec.table) from exc
                if _full(old, spec, limit=limit, now=now_s):
                    return CounterState(False, int(old[spec.count_attr]), limit, int(old[spec.reset_attr]))
                # A refusal is decided on the item returned with the failure, never on the failure
                # alone: one that shows room (or no counter at all) refuses nobody, so count again.
                continue
        new = from_item(result["Attributes"])
        reset_at = int(new[spec.reset_attr])
        if reset_at > now_s:
            return CounterState(True, int(new[spec.count_attr]), limit, reset_at)
        if _restart_window(client, spec, old_reset=reset_at, window=window, now=now_s):
            return CounterState(True, 1, limit, now_s + window)
        # Another request restarted the window first: count again inside the new window.
    raise DependencyError(f"UpdateItem (counter) on {spec.table}: contention did not settle")


def _full(old: dict[str, Any], spec: CounterSpec, *, limit: int, now: int) -> bool:
    """Whether the counter as found refuses a hit at ``now``: counted up to ``limit`` in a window
    still open (the negation of the hit's condition, decided on the item DynamoDB returned)."""
    count, reset_at = old.get(spec.count_attr), old.get(spec.reset_attr)
    return count is not None and int(count) >= limit and reset_at is not None and int(reset_at) > now


def _restart_window(
    client: DynamoDBClient, spec: CounterSpec, *, old_reset: int, window: int, now: int
) -> bool:
    names = {"#c": spec.count_attr, "#r": spec.reset_attr}
    values = {":one": {"N": "1"}, ":old": {"N": str(old_reset)}, ":reset": {"N": str(now + window)}}
    update = "SET #c = :one, #r = :reset"
    if spec.ttl_attr:
        names["#t"] = spec.ttl_attr
        update += ", #t = :reset"
    with aws_errors("UpdateItem (counter restart)"):
        try:
            client.update_item(
                TableName=spec.table,
                Key=spec.key,
                UpdateExpression=update,
                ConditionExpression="#r = :old",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
    return True


def release(client: DynamoDBClient, spec: CounterSpec, *, reset_at: int) -> None:
    """Give back one hit (a response the endpoint does not count), only within the same window."""
    with aws_errors("UpdateItem (counter release)"):
        try:
            client.update_item(TableName=spec.table, Key=spec.key, **_release_update(spec, reset_at))
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
