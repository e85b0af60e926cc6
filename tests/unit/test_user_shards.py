"""The shards that spread the users' hot keys: the list index's partition of each user and the count
shard each creation and deletion moves, against the launch goal of 5,000 registrations per second."""

from __future__ import annotations

from collections import Counter

from nimbus_core.adapters.user_items import COUNT_SHARDS, LIST_SHARDS, count_shard, list_partition
from nimbus_core.platform.ids import new_id

# The launch goal, with deletions as fast as registrations (a clean-up of spam accounts during it).
REGISTRATIONS = DELETIONS = 5_000
KEY_WCU = 1_000  # what DynamoDB allows one partition key value (base table or index) per second
HEADROOM = 2
PAGE_LIMIT = 50  # GET /users's largest page: read in one BatchGetItem with the count shards


def test_a_users_list_partition_is_fixed_by_its_id_and_one_of_the_shards() -> None:
    user_id = new_id()

    assert list_partition(user_id) == list_partition(user_id)
    assert list_partition(user_id) in {f"USERS#{n}" for n in range(LIST_SHARDS)}


def test_new_users_spread_evenly_over_the_list_shards() -> None:
    per_shard = Counter(list_partition(new_id()) for _ in range(LIST_SHARDS * 1_000))

    assert len(per_shard) == LIST_SHARDS
    assert max(per_shard.values()) < 1_000 * 1.2  # six standard deviations above the mean


def test_each_list_shard_takes_its_part_of_the_launch_with_headroom() -> None:
    # One index entry per creation or deletion (keys only, under 1 KB: one write unit).
    per_shard = (REGISTRATIONS + DELETIONS) / LIST_SHARDS

    assert per_shard * HEADROOM <= KEY_WCU


def test_each_count_shard_takes_its_part_of_the_launch_with_headroom() -> None:
    # One transactional ADD per creation or deletion: two write units.
    per_shard = 2 * (REGISTRATIONS + DELETIONS) / COUNT_SHARDS

    assert per_shard * HEADROOM <= KEY_WCU
    assert len({count_shard(new_id()) for _ in range(COUNT_SHARDS * 50)}) == COUNT_SHARDS


def test_a_full_page_and_the_count_shards_fit_one_batch_get() -> None:
    assert PAGE_LIMIT + COUNT_SHARDS <= 100  # BatchGetItem's limit
