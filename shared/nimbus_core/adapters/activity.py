"""The activity table: ``userId`` (partition) and ``id`` (sort key, a ULID) per event, removed by
TTL 90 days after it happened. The hourly failure counts that bound an account's log share each
account's partition under sort keys beginning with ``~`` (after every ULID), so a listing reads the
events alone (``id < "~"``) and the counts expire with the hour's events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nimbus_core.adapters.activity_items import event_from_values, event_values
from nimbus_core.adapters.batch import batch_delete, batch_put
from nimbus_core.adapters.errors import aws_errors
from nimbus_core.adapters.items import from_item, to_item
from nimbus_core.domain.activity import KEEP_SECONDS, ActivityEvent
from nimbus_core.domain.models import iso_to_epoch

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_COUNTS = "~"  # sort keys of the failure counts: after every event id


def _expires(event: ActivityEvent) -> int:
    return int(iso_to_epoch(event.at)) + KEEP_SECONDS


class DynamoActivity:
    """The :class:`nimbus_core.domain.user_ports.ActivityStore` on DynamoDB."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def _events(self, user_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "KeyConditionExpression": "userId = :u AND id < :counts",
            "ExpressionAttributeValues": {":u": {"S": user_id}, ":counts": {"S": _COUNTS}},
            **extra,
        }

    def page(self, user_id: str, *, limit: int, offset: int) -> tuple[int, list[ActivityEvent]]:
        """A COUNT Query for the total, then the newest ``offset + limit`` events (one Query per
        MB) with the first ``offset`` skipped."""
        total = 0
        request = self._events(user_id, Select="COUNT")
        while True:
            with aws_errors("Query (count activity)"):
                counted = self._client.query(**request)
            total += counted.get("Count", 0)
            if "LastEvaluatedKey" not in counted:
                break
            request["ExclusiveStartKey"] = counted["LastEvaluatedKey"]
        items: list[dict[str, Any]] = []
        request = self._events(user_id, ScanIndexForward=False, Limit=offset + limit)
        while len(items) < offset + limit and total:
            with aws_errors("Query (activity)"):
                found = self._client.query(**request)
            items += found.get("Items", [])
            if "LastEvaluatedKey" not in found:
                break
            request["ExclusiveStartKey"] = found["LastEvaluatedKey"]
        return total, [event_from_values(from_item(i)) for i in items[offset : offset + limit]]

    def put_many(self, events: Sequence[ActivityEvent]) -> None:
        """BatchWriteItem, 25 a call; an event delivered twice is put twice, as the same item."""
        unique = {e.id: e for e in events}
        items = [to_item({**event_values(e), "expiresAt": _expires(e)}) for e in unique.values()]
        batch_put(self._client, self._table, items)

    def count_failure(self, user_id: str, hour: int) -> int:
        """One UpdateItem (ADD) on the hour's count, which expires with the hour's events."""
        with aws_errors("UpdateItem (activity failures)"):
            result = self._client.update_item(
                TableName=self._table,
                Key={"userId": {"S": user_id}, "id": {"S": f"{_COUNTS}failures#{hour}"}},
                UpdateExpression="ADD #n :one SET expiresAt = if_not_exists(expiresAt, :expires)",
                ExpressionAttributeNames={"#n": "count"},
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":expires": {"N": str((hour + 1) * 3600 + KEEP_SECONDS)},
                },
                ReturnValues="UPDATED_NEW",
            )
        return int(result["Attributes"]["count"]["N"])

    def add_to_summary(self, summary: ActivityEvent) -> None:
        """One UpdateItem: the summary made by the first failure it counts, then ADD 1 and the
        latest failure's time and details."""
        values = event_values(summary)
        values.pop("id")
        values.pop("userId")
        values.pop("count")
        names = {f"#{n}": n for n in values}
        assignments = ", ".join(f"#{n} = :{n}" for n in values)
        with aws_errors("UpdateItem (activity summary)"):
            self._client.update_item(
                TableName=self._table,
                Key={"userId": {"S": summary.user_id}, "id": {"S": summary.id}},
                UpdateExpression=f"SET {assignments}, expiresAt = :expires ADD #count :one",
                ExpressionAttributeNames={**names, "#count": "count"},
                ExpressionAttributeValues={
                    **{f":{n}": v for n, v in to_item(values).items()},
                    ":expires": {"N": str(_expires(summary))},
                    ":one": {"N": "1"},
                },
            )

    def delete_all(self, user_id: str) -> int:
        """A keys-only Query per MB of the partition, one BatchWriteItem per 25 items."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "userId = :u",
            "ExpressionAttributeValues": {":u": {"S": user_id}},
            "ProjectionExpression": "userId, id",
        }
        keys: list[dict[str, Any]] = []
        while True:
            with aws_errors("Query (activity keys)"):
                found = self._client.query(**request)
            keys += found.get("Items", [])
            if "LastEvaluatedKey" not in found:
                break
            request["ExclusiveStartKey"] = found["LastEvaluatedKey"]
        batch_delete(self._client, self._table, keys)
        return len(keys)
