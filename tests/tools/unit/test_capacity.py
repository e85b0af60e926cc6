"""The capacity model (bench/capacity.py): units as DynamoDB counts them, ceilings from spreads and
limits, and mixes that add up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench import capacity
from bench.capacity import Access, Recorder, RequestCost, installed, item_size, key_class, load_mixes, model
from nimbus_core.adapters import user_items

REGION = "us-east-1"


def test_an_items_size_counts_its_names_and_values() -> None:
    item = {"pk": {"S": "USER#1"}, "n": {"N": "12345"}, "ok": {"BOOL": True}, "m": {"M": {"a": {"S": "xy"}}}}
    assert item_size(item) == (2 + 6) + (1 + 3) + (2 + 1) + (1 + 3 + 1 + 2)


def test_a_key_no_rule_names_stops_the_model() -> None:
    assert key_class("UsersTable USERCOUNT#3")[0] == "user count shard"
    with pytest.raises(ValueError, match="no key class"):
        key_class("UsersTable SOMETHING#new")


def test_the_mixes_add_up_and_name_their_populations(tmp_path: Path) -> None:
    for mix in load_mixes().values():
        assert mix["goal_rps"] > 0
        assert mix["accounts"] > 0
        assert mix["addresses"] > 0
    broken = tmp_path / "mixes.toml"
    broken.write_text('[mixes.x]\ntitle = "x"\ngoal_rps = 1\nrequests = [{ scenario = "a", share = 0.5 }]\n')
    with pytest.raises(ValueError, match=r"add up to 0\.5"):
        load_mixes(broken)


def _cost(classes: dict[str, Access], **values: Any) -> RequestCost:
    cost = RequestCost("s", "AuthFunction", **values)
    for name, access in classes.items():
        cost.classes[name] = access
        cost.tables["UsersTable"].reads += access.reads
        cost.tables["UsersTable"].writes += access.writes
    return cost


def _mix(*, accounts: int) -> dict[str, Any]:
    """A mix of one scenario ("s") at 1,000 requests/s."""
    return {
        "title": "t",
        "goal_rps": 1_000,
        "accounts": accounts,
        "addresses": 10,
        "requests": [{"scenario": "s", "share": 1}],
    }


def test_a_class_on_few_keys_meets_its_key_limit_and_one_spread_over_accounts_does_not() -> None:
    mix = _mix(accounts=1_000_000)
    cost = _cost({"user list partition": Access(writes=1), "user item": Access(writes=1)}, round_trips=1)

    figures = model("m", mix, {"s": cost}, {"AuthFunction": 1024}, 10)

    [hot] = [c for c in figures.ceilings if c.resource.startswith("user list partition")]
    shards = getattr(user_items, "LIST_SHARDS", 1)
    assert hot.at_rps == pytest.approx(capacity.KEY_WCU * shards)  # one write per request
    assert not [c for c in figures.ceilings if c.resource.startswith("user item")]
    [table] = [c for c in figures.ceilings if c.resource == "UsersTable: writes"]
    assert table.at_rps == pytest.approx(capacity.TABLE_UNITS / 2)


def test_concurrency_and_ssm_reads_follow_the_requests_durations() -> None:
    mix = _mix(accounts=10)
    cost = _cost({}, round_trips=4, own_ms=34.0)  # 34 ms + 4 x 4 ms = 50 ms

    figures = model("m", mix, {"s": cost}, {"AuthFunction": 1024}, 10)

    assert figures.concurrency == pytest.approx(50)
    assert figures.ssm_tps == pytest.approx(50 / 8.75)  # 50 instances, each every 8.75 s on average


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws() as mocked:
        mocked.reset()
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName="UsersTable",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "usernameKey")],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "UsernameIndex",
                    "KeySchema": [{"AttributeName": "usernameKey", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        yield client
        mocked.reset()


def test_a_transactional_put_costs_twice_its_kilobytes_and_its_index_entry_is_written_too(
    dynamodb: Any,
) -> None:
    item = {"pk": {"S": "USER#1"}, "usernameKey": {"S": "alice"}, "blob": {"S": "x" * 1500}}
    recorder = Recorder(boto3.client("dynamodb", region_name=REGION))
    with installed(recorder), recorder.recording(RequestCost("s", "")) as cost:
        dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": "UsersTable", "Item": item}}])
        dynamodb.get_item(TableName="UsersTable", Key={"pk": {"S": "USER#1"}}, ConsistentRead=True)

    assert cost.round_trips == 2
    # 2 KB, transactional; then one read
    assert cost.classes["user item"] == Access(reads=1, writes=4, transactions=1)
    assert cost.classes["username/email index entry"] == Access(writes=2)
    assert cost.tables["UsersTable/UsernameIndex"] == Access(writes=2)


def test_transactions_on_a_class_of_few_keys_meet_the_conflict_ceiling() -> None:
    mix = _mix(accounts=10)
    cost = _cost({"user count shard": Access(writes=2, transactions=1)}, round_trips=1)

    figures = model("m", mix, {"s": cost}, {"AuthFunction": 1024}, 10)

    [conflicts] = [c for c in figures.ceilings if c.resource == "user count shard: hottest key, transactions"]
    assert conflicts.at_rps == pytest.approx(capacity.KEY_TRANSACTIONS * user_items.COUNT_SHARDS)
