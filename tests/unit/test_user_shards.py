"""The shards that spread the users' hot keys: the list index's partition of each user and the count
shard each creation and deletion moves, against the launch goal of 5,000 registrations per second."""

from __future__ import annotations

from collections import Counter

from nimbus_core.adapters.user_items import COUNT_SHARDS, LIST_SHARDS, count_shard, list_partition
from nimbus_core.adapters.user_listing import BATCH_GET_KEYS, count_batches
from nimbus_core.platform.ids import new_id

# The launch goal, with deletions as fast as registrations (a clean-up of spam accounts during it).
REGISTRATIONS = DELETIONS = 5_000
KEY_WCU = 1_000  # what DynamoDB allows one partition key value (base table or index) per second
HEADROOM = 2
# Transactions that hold one item at once conflict; AWS publishes no rate, and the capacity model
# (bench/capacity/limits.py, KEY_TRANSACTIONS) allows one item this many a second.
KEY_TRANSACTIONS = 100


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
    # One transactional ADD per creation or deletion: two write units, and one transaction.
    per_shard = (REGISTRATIONS + DELETIONS) / COUNT_SHARDS

    assert 2 * per_shard * HEADROOM <= KEY_WCU
    assert REGISTRATIONS / COUNT_SHARDS * HEADROOM <= KEY_TRANSACTIONS
    assert per_shard <= KEY_TRANSACTIONS  # a clean-up as fast as the launch still fits
    assert len({count_shard(new_id()) for _ in range(COUNT_SHARDS * 50)}) == COUNT_SHARDS


def test_the_count_shards_are_read_in_batches_a_batch_get_takes() -> None:
    batches = count_batches()

    assert all(len(batch) <= BATCH_GET_KEYS for batch in batches)
    assert sum(len(batch) for batch in batches) == COUNT_SHARDS
    assert len({str(key) for batch in batches for key in batch}) == COUNT_SHARDS
