"""Listing and counting users: many users in one read, the newest first a page at a time, and the
exact count kept in shards by the transactions that create and delete users."""

from __future__ import annotations

import heapq
import sys
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
BATCH_GET_KEYS = 100  # DynamoDB's BatchGetItem limit
# The most keys one Query of the list index asks for: about what one 1 MB page of that keys-only
# index holds, so no real page is cut shorter, and a Limit DynamoDB takes (a 32-bit integer) for
# any offset a client sends (an offset past every user is an empty page, not an error).
QUERY_PAGE_KEYS = 10_000


def count_batches() -> list[list[dict[str, Any]]]:
    """The keys of every count shard, in BatchGetItems' worth."""
    keys = [count_key(n) for n in range(COUNT_SHARDS)]
    return [keys[start : start + BATCH_GET_KEYS] for start in range(0, len(keys), BATCH_GET_KEYS)]


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
        per list partition (keys only; a further page per MB, about 10,000 keys) and a BatchGetItem
        per 100 count shards, all run side by side, then one BatchGetItem for the page's users."""
        # DynamoDB has no Query across partition key values: one per partition, in threads (the
        # client is thread-safe), so the page waits for a few round trips rather than their sum.
        # Each runs in a copy of the request's context, so what it holds (log keys) goes along.
        # A failed read fails the page: the reads not yet started are not sent.
        # At most as many as a list can hold (islice's bound), for an offset of any size.
        wanted = min(limit + offset, sys.maxsize) if limit > 0 else 0
        pool = ThreadPoolExecutor(max_workers=QUERY_THREADS)
        try:
            counts = [pool.submit(copy_context().run, self._count_in, keys) for keys in count_batches()]
            if offset >= QUERY_PAGE_KEYS:
                # A deep offset: the count first, so that one past every user reads no user's key
                # (else it would read them all, in pages, to find nothing).
                count = sum(part.result() for part in counts)
                if offset >= count:
                    return count, []
            queries = [pool.submit(copy_context().run, self._newest_in, p, wanted) for p in list_partitions()]
            newest = [query.result() for query in queries]
            count = sum(part.result() for part in counts)
        finally:
            pool.shutdown(cancel_futures=True)
        ids = [user_id for _, user_id in islice(heapq.merge(*newest, reverse=True), wanted)][offset:]
        users = {user.id: user for user in self.get_many(ids)}
        # A user deleted between the Query and the read is simply not on the page.
        return count, [users[u] for u in ids if u in users]

    def _count_in(self, keys: list[dict[str, Any]]) -> int:
        """The users counted in the shards of ``keys``."""
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        return sum(int(item.get("users", {}).get("N", "0")) for item in found.get(self._table, []))

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
                result = self._client.query(**request, Limit=min(wanted - len(found), QUERY_PAGE_KEYS))
            found += [
                (item["listOrder"]["S"], item["pk"]["S"].removeprefix(USER_KEY_PREFIX))
                for item in result.get("Items", [])
            ]
            if "LastEvaluatedKey" not in result:
                break
            request["ExclusiveStartKey"] = result["LastEvaluatedKey"]
        return found
