"""The users table's items: their keys, the stored form of a user, and the table each part of
:class:`nimbus_core.adapters.users.DynamoUsers` works on.

One table holds the user items (``USER#<id>``), the uniqueness claims of usernames and addresses
(``USERNAME#<key>``, ``EMAIL#<key>``), the marks imported accounts leave (``IMPORTED#<id>``) and the
shards of the user count (``USERCOUNT#<n>``).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nimbus_core.adapters.items import record_item
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import User, iso_to_epoch

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

NOT_EXISTS = "attribute_not_exists(pk)"
USER_KEY_PREFIX = "USER#"  # the key of a user item; claims are USERNAME#... and EMAIL#...
# An account imported from upstream leaves IMPORTED#<id> behind, which its deletion keeps.
IMPORTED_KEY_PREFIX = "IMPORTED#"
# GET /users: every user item carries its list shard in ``listPartition`` and its creation time in
# ``listOrder``, so CreatedIndex (keys only) lists the newest first with a Query per shard and no
# Scan, the accounts imported from upstream (whose ids are not time-ordered) among the others.
LIST_INDEX = "CreatedIndex"
# One partition key value takes about 1,000 writes per second, and every creation and deletion
# writes one index entry (keys only, under 1 KB: one write unit). The launch goal is 5,000
# registrations per second; with deletions as fast (a clean-up during it) that is 10,000 entries per
# second, and 32 shards (``USERS#<n>``, n from the user id) take about 310 each: over 3x headroom.
# Each shard costs GET /users one Query, so there are no more of them than that needs.
LIST_SHARDS = 32
# Releases before the shards listed every user under this one value. Those items keep it (a change
# to a user never rewrites its index keys), take no new entries, and are listed as one more shard.
LEGACY_LIST_PARTITION = "USERS"
# The number of users is kept exact by the transactions that create and delete them, spread over
# COUNT_SHARDS counter items (USERCOUNT#<n>, n from the user id) so that no single item takes every
# registration. The binding limit is not write units (a transactional ADD costs 2 of the 1,000 one
# item takes per second) but transactions: two that hold one item at once conflict, and the capacity
# model (docs/scale.md) allows one item 100 a second. The launch's 5,000 registrations per second
# are about 39 on each of 128 shards, over 2.5x headroom (78, still under, with deletions as fast).
# GET /users reads them in two BatchGetItems (100 keys each at most), beside its Queries.
# Raising it later is safe (new shards start at 0 and the count is their sum, so a deletion may
# move a different shard than its creation did); lowering it would drop counts.
COUNT_SHARDS = 128
COUNT_KEY_PREFIX = "USERCOUNT#"


class UsersTable:
    """The client and the name of the users table, shared by every part of ``DynamoUsers``."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table


def user_key(user_id: str) -> dict[str, Any]:
    """The primary key of a user item."""
    return {"pk": {"S": f"USER#{user_id}"}}


def user_id_from_key(keys: Mapping[str, Any]) -> str | None:
    """The user id of a users-table key in DynamoDB's JSON (a stream record's ``Keys``); None for a
    claim item (``USERNAME#``/``EMAIL#``) or anything else."""
    pk = keys.get("pk")
    value = pk.get("S") if isinstance(pk, Mapping) else None
    if not isinstance(value, str) or not value.startswith(USER_KEY_PREFIX):
        return None
    return value.removeprefix(USER_KEY_PREFIX) or None


def user_item(user: User) -> dict[str, Any]:
    """The stored form of a user, with the index keys login and the staff listing look it up by."""
    return record_item(
        user,
        pk=f"USER#{user.id}",
        usernameKey=username_key(user.username),
        emailKey=email_key(user.email),
        listPartition=list_partition(user.id),
        listOrder=list_order(user),
    )


def list_order(user: User) -> str:
    """Where ``user`` sorts in the list: creation time (milliseconds, fixed width), then id."""
    return f"{round(iso_to_epoch(user.created_at) * 1000):015d}#{user.id}"


def list_partition(user_id: str) -> str:
    """The list shard a user is listed in (fixed by the id, as its count shard)."""
    return f"{LEGACY_LIST_PARTITION}#{zlib.crc32(user_id.encode()) % LIST_SHARDS}"


def list_partitions() -> list[str]:
    """Every partition of CreatedIndex that may hold users: the shards and the one of old."""
    return [f"{LEGACY_LIST_PARTITION}#{n}" for n in range(LIST_SHARDS)] + [LEGACY_LIST_PARTITION]


def count_key(shard: int) -> dict[str, Any]:
    """The primary key of one shard of the user count."""
    return {"pk": {"S": f"{COUNT_KEY_PREFIX}{shard}"}}


def count_shard(user_id: str) -> int:
    """The count shard a user is counted in (fixed by the id, so a deletion undoes its creation)."""
    return zlib.crc32(user_id.encode()) % COUNT_SHARDS


def username_claim(user: User) -> str:
    """The key of the item that claims ``user``'s username."""
    return f"USERNAME#{username_key(user.username)}"


def email_claim(user: User) -> str:
    """The key of the item that claims ``user``'s address."""
    return f"EMAIL#{email_key(user.email)}"


def credential_claim(credential_id: str) -> str:
    """The key of the item that claims a WebAuthn credential id (base64url) for the one account
    that enrolled it: the SHA-256 of the id (ids are up to 1,023 bytes; keys stay short)."""
    return f"CREDENTIAL#{hashlib.sha256(credential_id.encode()).hexdigest()}"


def number(value: int) -> dict[str, str]:
    """An integer as a DynamoDB number value."""
    return {"N": str(value)}
