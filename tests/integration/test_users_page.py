"""A page of users queries every list partition side by side; when one Query fails, the page fails
at once, and the Queries that had not started are never sent (a throttled index is not asked 33
times over)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

import pytest
from botocore.exceptions import ClientError

from nimbus_core.adapters.user_items import list_partitions
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.errors import DependencyError
from tests.integration.conftest import Stack

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

THROTTLED: Any = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}


class _OnePartitionThrottled:
    """The stack's DynamoDB client, on which the first list partition's Query is throttled at once
    and every other Query takes a while, as calls across the network do."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.queried: list[str] = []

    def query(self, **kwargs: Any) -> Any:
        partition = kwargs["ExpressionAttributeValues"][":p"]["S"]
        self.queried.append(partition)
        if partition == list_partitions()[0]:
            raise ClientError(THROTTLED, "Query")
        time.sleep(0.2)
        return self._client.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_throttled_list_partition_fails_the_page_without_asking_the_rest(stack: Stack) -> None:
    client = _OnePartitionThrottled(stack.dynamodb)

    with pytest.raises(DependencyError, match="ThrottlingException"):
        DynamoUsers(cast("DynamoDBClient", client), stack.table("UsersTable")).newest_page(limit=50, offset=0)

    assert list_partitions()[0] in client.queried
    assert len(client.queried) < len(list_partitions())
