"""Listing and counting users: many users in one read, the newest first a page at a time, and the
exact count kept in shards by the transactions that create and delete users."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.errors import aws_errors
from nimbus_core.adapters.items import read_record
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.adapters.user_items import (
    COUNT_KEY_PREFIX,
    COUNT_SHARDS,
    LIST_INDEX,
    LIST_PARTITION,
    USER_KEY_PREFIX,
    UsersTable,
    count_key,
    count_shard,
    number,
    user_key,
)
from nimbus_core.domain.models import User


def count_op(table: str, user: User, delta: int) -> TransactOp:
    """Move the user count by ``delta``, in the transaction that creates or deletes ``user``."""
    # The count moves exactly when a user appears or disappears, whatever runs concurrently (ADD
    # needs no read).
    return TransactOp(
        {
            "Update": {
                "TableName": table,
                "Key": count_key(count_shard(user.id)),
                "UpdateExpression": "ADD #n :d",
                "ExpressionAttributeNames": {"#n": "users"},
                "ExpressionAttributeValues": {":d": number(delta)},
            }
        }
    )


class UserListing(UsersTable):
    """The reads of many users: by ids, and the newest first with the count."""

    def get_many(self, user_ids: Iterable[str]) -> list[User]:
        """The users among ``user_ids`` (at most 100) in one BatchGetItem, in no particular order."""
        keys = [user_key(u) for u in dict.fromkeys(user_ids)]
        if not keys:
            return []
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        return [read_record(User, item) for item in found.get(self._table, [])]

    def newest_page(self, *, limit: int, offset: int) -> tuple[int, list[User]]:
        """How many users there are, and one page of them, newest first: one Query of CreatedIndex
        (keys only; a further page per MB, about 10,000 keys) and one BatchGetItem for the page's
        users and the count's shards together."""
        ids = self._newest_ids(limit + offset)[offset:] if limit > 0 else []
        keys = [user_key(u) for u in ids] + [count_key(n) for n in range(COUNT_SHARDS)]
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        users: dict[str, User] = {}
        count = 0
        for item in found.get(self._table, []):
            if item["pk"]["S"].startswith(COUNT_KEY_PREFIX):
                count += int(item.get("users", {}).get("N", "0"))
            else:
                user = read_record(User, item)
                users[user.id] = user
        # A user deleted between the Query and the read is simply not on the page.
        return count, [users[u] for u in ids if u in users]

    def _newest_ids(self, wanted: int) -> list[str]:
        ids: list[str] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": LIST_INDEX,
            "KeyConditionExpression": "listPartition = :p",
            "ExpressionAttributeValues": {":p": {"S": LIST_PARTITION}},
            "ScanIndexForward": False,
        }
        while len(ids) < wanted:
            with aws_errors("Query (CreatedIndex)"):
                result = self._client.query(**request, Limit=wanted - len(ids))
            ids += [item["pk"]["S"].removeprefix(USER_KEY_PREFIX) for item in result.get("Items", [])]
            if "LastEvaluatedKey" not in result:
                break
            request["ExclusiveStartKey"] = result["LastEvaluatedKey"]
        return ids
