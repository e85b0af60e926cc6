"""BatchGetItem / BatchWriteItem with the retries of unprocessed keys that DynamoDB asks for."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from nimbus_core.adapters.errors import aws_errors
from nimbus_core.domain.errors import DependencyError

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_ATTEMPTS = 5
WRITE_BATCH = 25  # DynamoDB's BatchWriteItem limit


def batch_get(client: DynamoDBClient, request: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every item of ``request`` by table (strongly consistent where the request says so)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for attempt in range(_ATTEMPTS):
        with aws_errors("BatchGetItem"):
            result = client.batch_get_item(RequestItems=request)
        for table, items in result.get("Responses", {}).items():
            found.setdefault(table, []).extend(items)
        request = dict(result.get("UnprocessedKeys") or {})
        if not request:
            return found
        time.sleep(0.02 * 2**attempt)  # unprocessed keys mean throttling: back off briefly
    raise DependencyError("BatchGetItem left keys unprocessed")


def batch_delete(client: DynamoDBClient, table: str, keys: Iterable[dict[str, Any]]) -> None:
    """Delete ``keys`` in batches of 25 (idempotent: deleting a missing item is not an error)."""
    # A batch may not name one key twice (DynamoDB refuses it), and deleting twice changes nothing.
    unique = {json.dumps(key, sort_keys=True): key for key in keys}
    _batch_write(client, table, [{"DeleteRequest": {"Key": key}} for key in unique.values()])


def batch_put(client: DynamoDBClient, table: str, items: Iterable[dict[str, Any]]) -> None:
    """Put ``items`` in batches of 25, unconditionally: only for items that cannot exist yet."""
    _batch_write(client, table, [{"PutRequest": {"Item": item}} for item in items])


def _batch_write(client: DynamoDBClient, table: str, pending: list[dict[str, Any]]) -> None:
    for start in range(0, len(pending), WRITE_BATCH):
        request: dict[str, Any] = {table: pending[start : start + WRITE_BATCH]}
        for attempt in range(_ATTEMPTS):
            with aws_errors("BatchWriteItem"):
                result = client.batch_write_item(RequestItems=request)
            request = dict(result.get("UnprocessedItems") or {})
            if not request:
                break
            time.sleep(0.02 * 2**attempt)
        else:
            raise DependencyError("BatchWriteItem left items unprocessed")
