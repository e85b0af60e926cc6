"""Multi-item writes as one DynamoDB transaction, with condition failures mapped to domain errors."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.adapters.errors import error_code
from nimbus_core.adapters.items import from_item
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.ports import WriteOp

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
    """The :class:`nimbus_core.domain.ports.Transactor` on DynamoDB ``TransactWriteItems``."""

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

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """Write ``first`` and ``then`` in one TransactWriteItems, merging two writes of one item
        (DynamoDB refuses a transaction that names an item twice).

        Updates merge into one update (their conditions ANDed) unless they write overlapping paths;
        a delete absorbs an update's condition (the item goes anyway). A put that shares its item, or
        overlapping paths, cannot merge: then ``first`` and ``then`` are committed one after the
        other. So they are when a merged write's condition fails, so the error is the one the
        failing write carries.
        """
        joined = join_ops([_transact_op(o) for o in first], [_transact_op(o) for o in then])
        if joined is not None:
            try:
                self.commit(joined)
                return
            except _JoinedConditionFailedError:
                pass  # which of the merged conditions failed: the writes answer one by one
        self.commit(first)
        try:
            self.commit(then)
        except UserChangedError as stale:
            raise UserChangedError(first_landed=True) from stale


class _JoinedConditionFailedError(Exception):
    """A merged write's condition failed; the transactor then commits the parts one by one."""


_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b")
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def join_ops(first: Sequence[TransactOp], then: Sequence[TransactOp]) -> list[TransactOp] | None:
    """The elements of one transaction writing ``first`` and ``then``, two writes of one item merged
    into one; None when some cannot be merged."""
    joined = list(then)
    for n, op in enumerate(first):
        index = next((i for i, other in enumerate(joined) if _same_item(op.op, other.op)), None)
        if index is None:
            joined.append(op)
            continue
        merged = _merge(_renamed(op.op, f"_j{n}"), joined[index].op)
        if merged is None:
            return None
        joined[index] = TransactOp(merged, lambda _old: _JoinedConditionFailedError())
    return joined


def _body(op: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (kind, body), *_ = op.items()
    return kind, body


def _same_item(a: dict[str, Any], b: dict[str, Any]) -> bool:
    (kind_a, body_a), (kind_b, body_b) = _body(a), _body(b)
    if body_a["TableName"] != body_b["TableName"]:
        return False
    key_a, key_b = body_a.get("Key") or body_a.get("Item", {}), body_b.get("Key") or body_b.get("Item", {})
    if kind_a == "Put" and kind_b == "Put":
        return False  # two new items (a put of an existing key fails its own condition)
    if kind_a == "Put":
        return all(key_a.get(k) == v for k, v in key_b.items())
    if kind_b == "Put":
        return all(key_b.get(k) == v for k, v in key_a.items())
    return bool(key_a == key_b)


def _renamed(op: dict[str, Any], suffix: str) -> dict[str, Any]:
    """``op`` with every placeholder (``#name``, ``:value``) suffixed, so two ops' cannot collide."""
    kind, body = _body(op)
    out = dict(body)
    for field_name in ("UpdateExpression", "ConditionExpression"):
        if field_name in body:
            out[field_name] = _PLACEHOLDER.sub(lambda m: m.group(0) + suffix, body[field_name])
    for field_name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        if field_name in body:
            out[field_name] = {k + suffix: v for k, v in body[field_name].items()}
    return {kind: out}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """One write doing what ``a`` and ``b`` (same item, distinct placeholders) do, or None."""
    (kind_a, body_a), (kind_b, body_b) = _body(a), _body(b)
    kinds = {kind_a, kind_b}
    if "Put" in kinds or not kinds <= {"Update", "Delete", "ConditionCheck"}:
        return None
    conditions = [
        f"({c})" for c in (body_a.get("ConditionExpression"), body_b.get("ConditionExpression")) if c
    ]
    merged: dict[str, Any] = {"TableName": body_a["TableName"], "Key": body_a["Key"]}
    if conditions:
        merged["ConditionExpression"] = " AND ".join(conditions)
    names = {**body_a.get("ExpressionAttributeNames", {}), **body_b.get("ExpressionAttributeNames", {})}
    values = {**body_a.get("ExpressionAttributeValues", {}), **body_b.get("ExpressionAttributeValues", {})}
    if "Delete" in kinds:
        kind = "Delete"  # the item goes: an update's effects do not matter, its condition does
    elif "Update" in kinds:
        kind = "Update"
        expression = _merged_update([body.get("UpdateExpression", "") for body in (body_a, body_b)], names)
        if expression is None:
            return None
        merged["UpdateExpression"] = expression
    else:
        kind = "ConditionCheck"
    used = set(
        _PLACEHOLDER.findall(" ".join(merged.get(f, "") for f in ("UpdateExpression", "ConditionExpression")))
    )
    if names:
        merged["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in used}
    if values:
        merged["ExpressionAttributeValues"] = {k: v for k, v in values.items() if k in used}
    return {kind: {k: v for k, v in merged.items() if v != {}}}


def _merged_update(expressions: list[str], names: dict[str, str]) -> str | None:
    """SET/REMOVE/ADD/DELETE clauses of both expressions together; None if their paths overlap."""
    clauses: dict[str, list[str]] = {}
    paths_of: list[list[tuple[str, ...]]] = []
    for expression in expressions:
        paths: list[tuple[str, ...]] = []
        parts = _CLAUSE.split(expression)
        for keyword, text in zip(parts[1::2], parts[2::2], strict=True):
            for action in _split_top_level(text):
                clauses.setdefault(keyword, []).append(action)
                target = action.split("=", 1)[0] if keyword == "SET" else action.split()[0]
                paths.append(tuple(names.get(p, p) for p in re.split(r"[.\[]", target.strip())))
        paths_of.append(paths)
    for a in paths_of[0]:
        for b in paths_of[1]:
            if a[: len(b)] == b or b[: len(a)] == a:
                return None  # DynamoDB refuses overlapping paths in one update
    return " ".join(f"{keyword} {', '.join(actions)}" for keyword, actions in clauses.items())


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses (``if_not_exists(#a, :b)`` stays whole)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


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
