"""Listing and counting users: many users in one read, the newest first a page at a time, and the
exact count kept in shards by the transactions that create and delete users."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from itertools import islice
from typing import Any

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.errors import aws_errors
from nimbus_core.adapters.items import read_record
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.adapters.user_items import (
    COUNT_KEY_PREFIX,
    COUNT_SHARDS,
    LIST_INDEX,
    USER_KEY_PREFIX,
    UsersTable,
    count_key,
    count_shard,
    list_partitions,
    number,
    user_key,
)
from nimbus_core.domain.models import User

# At most botocore's connection pool per client (``max_pool_connections``, 10 by default): a thread
# beyond it would open a connection for one Query and drop it.
QUERY_THREADS = 10


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
        """How many users there are, and one page of them, newest first: a Query of CreatedIndex
        per list partition (keys only; a further page per MB, about 10,000 keys), run side by side,
        and one BatchGetItem for the page's users and the count's shards together."""
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
        """The ids of the ``wanted`` newest users: the ``wanted`` newest of each partition (all of
        them may be in one), merged by ``listOrder``."""
        # DynamoDB has no Query across partition key values: one per partition, in threads (the
        # client is thread-safe), so the page waits for a few round trips rather than their sum.
        # Each runs in a copy of the request's context, so what it holds (log keys) goes along.
        # A failed Query fails the page: the Queries not yet started are not sent.
        pool = ThreadPoolExecutor(max_workers=QUERY_THREADS)
        try:
            queries = [pool.submit(copy_context().run, self._newest_in, p, wanted) for p in list_partitions()]
            newest = [query.result() for query in queries]
        finally:
            pool.shutdown(cancel_futures=True)
        return [user_id for _, user_id in islice(heapq.merge(*newest, reverse=True), wanted)]

    def _newest_in(self, partition: str, wanted: int) -> list[tuple[str, str]]:
        """The ``wanted`` newest (listOrder, user id) of one partition, newest first."""
        found: list[tuple[str, str]] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": LIST_INDEX,
            "KeyConditionExpression": "listPartition = :p",
            "ExpressionAttributeValues": {":p": {"S": partition}},
            "ScanIndexForward": False,
        }
        while len(found) < wanted:
            with aws_errors("Query (CreatedIndex)"):
                result = self._client.query(**request, Limit=wanted - len(found))
            found += [
                (item["listOrder"]["S"], item["pk"]["S"].removeprefix(USER_KEY_PREFIX))
                for item in result.get("Items", [])
            ]
            if "LastEvaluatedKey" not in result:
                break
            request["ExclusiveStartKey"] = result["LastEvaluatedKey"]
        return found
