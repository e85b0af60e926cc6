"""The capacity model (bench/capacity/): units as DynamoDB counts them, ceilings from spreads and
limits, the stack as the template deploys it, and mixes that add up."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench.capacity import limits
from bench.capacity.costs import MAIL, RECOVERY, SWEEP, Access, RequestCost, item_size, key_class
from bench.capacity.deploy import Deployment, Limit, deployment
from bench.capacity.mixes import load_mixes, run
from bench.capacity.model import model
from bench.capacity.prices import cognito_price
from bench.capacity.recorder import Recorder, installed
from bench.capacity.report import flood_bounds, render_report, what_it_takes
from nimbus_core.adapters import user_items
from nimbus_tools.template import load_template

REGION = "us-east-1"


def test_an_items_size_counts_its_names_and_values() -> None:
    item = {"pk": {"S": "USER#1"}, "n": {"N": "12345"}, "ok": {"BOOL": True}, "m": {"M": {"a": {"S": "xy"}}}}
    assert item_size(item) == (2 + 6) + (1 + 3) + (2 + 1) + (1 + 3 + 1 + 2)


def test_a_key_no_rule_names_is_classed_by_its_table_and_prefix_and_named() -> None:
    assert key_class("UsersTable USERCOUNT#3")[0] == "user count shard"
    assert key_class("UsersTable/UsernameKeyIndex abc") == ("username/email index entry", "accounts")
    assert key_class("UsersTable DATAKEY#v2") == ("UsersTable DATAKEY# (no rule)", "accounts")
    assert key_class("SessionsTable/ByDevice x") == ("SessionsTable/ByDevice (no rule)", "accounts")
    mix = _mix(accounts=1_000)
    cost = _cost({"UsersTable DATAKEY# (no rule)": Access(reads=1)})
    figures = model("m", mix, {"s": cost}, _deploy(), 10)
    report = render_report([figures], {"s": cost}, _deploy())
    assert report.startswith("Keys no rule of bench/capacity/costs.CLASSES names")
    assert "UsersTable DATAKEY# (no rule)" in report.splitlines()[0]


def test_the_mixes_add_up_and_name_their_populations(tmp_path: Path) -> None:
    for mix in load_mixes().values():
        assert mix["goal_rps"] > 0
        assert mix["accounts"] > 0
        assert mix["addresses"] > 0
    broken = tmp_path / "mixes.toml"
    broken.write_text('[mixes.x]\ntitle = "x"\ngoal_rps = 1\nrequests = [{ scenario = "a", share = 0.5 }]\n')
    with pytest.raises(ValueError, match=r"add up to 0\.5"):
        load_mixes(broken)


TEMPLATE = load_template()


def _deploy(**changes: Any) -> Deployment:
    """A stack that caps nothing but what ``changes`` set: one full vCPU per function."""
    values: dict[str, Any] = {
        "memory_mb": {"AuthFunction": 1769, "AccountsFunction": 1769},
        "reserved": {},
        "routes": {},
        "default_route": Limit(1e12, ""),
        "route_limits": {},
        "warm": {},
        "batch_size": {},
        "traced": False,
    }
    return Deployment(**(values | changes))


def _cost(classes: dict[str, Access], **values: Any) -> RequestCost:
    cost = RequestCost("s", values.pop("function", "AuthFunction"), **values)
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

    figures = model("m", mix, {"s": cost}, _deploy(), 10)

    [hot] = [c for c in figures.ceilings if c.resource.startswith("user list partition")]
    shards = getattr(user_items, "LIST_SHARDS", 1)
    assert hot.at_rps == pytest.approx(limits.KEY_WCU * shards)  # one write per request
    assert not [c for c in figures.ceilings if c.resource.startswith("user item")]
    [table] = [c for c in figures.ceilings if c.resource == "UsersTable: writes"]
    assert table.at_rps == pytest.approx(limits.TABLE_UNITS / 2)


def test_concurrency_and_ssm_reads_follow_the_requests_durations() -> None:
    mix = _mix(accounts=10)
    cost = _cost({}, round_trips=4, own_ms=34.0)  # 34 ms + 4 x 4 ms = 50 ms

    figures = model("m", mix, {"s": cost}, _deploy(), 10)

    assert figures.concurrency == {"AuthFunction": pytest.approx(50)}
    # Every warm instance rereads, every 8.75 s on average: more instances than the mean busy ones.
    assert figures.warm_instances == {"AuthFunction": 72}  # 50 + 3 x sqrt(50), rounded up
    assert figures.ssm_tps == pytest.approx(72 / 8.75)


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
        client.create_table(
            TableName="SessionsTable",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "n")],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "n", "KeyType": "RANGE"},
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

    figures = model("m", mix, {"s": cost}, _deploy(), 10)

    [conflicts] = [c for c in figures.ceilings if c.resource == "user count shard: hottest key, transactions"]
    assert conflicts.at_rps == pytest.approx(limits.KEY_TRANSACTIONS * user_items.COUNT_SHARDS)


def _one_scenario_mix(scenario: str, goal: float = 1_000, **values: Any) -> dict[str, Any]:
    return {
        "title": "t",
        "goal_rps": goal,
        "accounts": 1_000_000,
        "addresses": 1_000,
        "requests": [{"scenario": scenario, "share": 1}],
    } | values


def test_handler_cpu_time_is_stretched_by_the_vcpu_share_of_the_functions_memory() -> None:
    mix = _one_scenario_mix("s")
    cost = _cost({}, own_ms=10.0)  # on a whole core, no round trip

    whole = model("m", mix, {"s": cost}, _deploy(), 10)
    quarter = model("m", mix, {"s": cost}, _deploy(memory_mb={"AuthFunction": 442}), 10)

    assert whole.concurrency["AuthFunction"] == pytest.approx(10)  # 1,000/s x 10 ms
    assert quarter.concurrency["AuthFunction"] == pytest.approx(10 * 1769 / 442)


def test_the_templates_route_throttles_cap_each_route_and_a_lower_one_moves_the_first_ceiling() -> None:
    mix = _one_scenario_mix("GET /users/me (usedAt recent)", goal=20_000)
    costs = {"GET /users/me (usedAt recent)": _cost({}, function="AccountsFunction", own_ms=1.0)}

    default = model("m", mix, costs, deployment(TEMPLATE), 10)
    lowered = model("m", mix, costs, deployment(TEMPLATE, {"MeRateLimit": "5000"}), 10)

    # By default the account's throttle comes first (10,000 req/s); the route's own is at 70,000.
    assert default.ceilings[0].resource == "API Gateway account throttle"
    assert default.first_deployed is not None
    assert default.first_deployed.at_rps == pytest.approx(70_000)
    first = lowered.ceilings[0]
    assert (first.resource, first.lifted_by) == ("API route throttle GET /users/me", "MeRateLimit")
    assert first.at_rps == pytest.approx(5_000)


def test_reserved_concurrency_and_warm_throughput_are_read_from_the_template_with_their_parameters() -> None:
    default = deployment(TEMPLATE)
    raised = deployment(TEMPLATE, {"MailReservedConcurrency": "5", "WarmWriteUnits": "90000"})

    assert default.reserved["AuthFunction"].parameter == "AuthReservedConcurrency"
    assert "MailFunction" not in default.reserved  # 0: none
    assert raised.reserved["MailFunction"] == Limit(5, "MailReservedConcurrency")
    assert default.warm["UsersTable"] == (Limit(12_000, "WarmReadUnits"), Limit(4_000, "WarmWriteUnits"))
    assert raised.warm["UsersTable"][1].value == 90_000
    assert raised.warm["UsersTable/CreatedIndex"][1].value == 90_000
    assert default.cpu_share("AuthFunction") == pytest.approx(1024 / 1769)
    assert default.route_of("DELETE /users/me/sessions/:sid") == "DELETE /users/me/sessions/{sid}"
    assert default.route_of("DELETE /users/me/sessions/all (3 others)") == "DELETE /users/me/sessions/all"
    assert default.route_of("MailFunction: a message sent") is None


def test_a_sudden_mix_meets_the_tables_warm_throughput_and_a_growing_one_does_not() -> None:
    cost = _cost({"user item": Access(writes=5)})
    warm = {"UsersTable": (Limit(12_000, "WarmReadUnits"), Limit(4_000, "WarmWriteUnits"))}

    day = model("m", _one_scenario_mix("s"), {"s": cost}, _deploy(warm=warm), 10)
    launch = model("m", _one_scenario_mix("s", sudden=True), {"s": cost}, _deploy(warm=warm), 10)

    assert not [c for c in day.ceilings if "warm" in c.resource]
    [writes] = [c for c in launch.ceilings if c.resource == "UsersTable: writes, warm throughput"]
    assert writes.at_rps == pytest.approx(800)  # 4,000 write units / 5 per request
    assert (writes.kind, writes.lifted_by) == ("template", "WarmWriteUnits")


def _flood_costs() -> dict[str, RequestCost]:
    known = _cost({}, own_ms=0.5)
    asked = _cost({"per-address counter": Access(writes=1)}, own_ms=1.0, round_trips=1)
    return {"refused": known, "refused, unknown here": asked}


def _flood(addresses: int) -> dict[str, Any]:
    return _one_scenario_mix("refused", goal=20_000, addresses=addresses) | {
        "requests": [{"scenario": "refused", "share": 1, "memo_miss": "refused, unknown here"}]
    }


def test_flooding_addresses_beyond_the_refusal_memo_cost_a_counter_write_each() -> None:
    many = model("m", _flood(100_000), _flood_costs(), _deploy(), 10)
    few = model("m", _flood(1_000), _flood_costs(), _deploy(), 10)

    # 100,000 addresses overflow the 4,096 an instance keeps: about 4 % of refusals are answered
    # from memory, and the rest each cost DynamoDB a write.
    assert many.memo_hits == pytest.approx(1 - math.exp(-limits.MEMO_SIZE / 100_000), rel=1e-3)
    assert many.classes["per-address counter"][1] > 0.95 * 20_000
    assert few.memo_hits is not None
    assert few.memo_hits > 0.9
    assert few.classes["per-address counter"][1] < 0.1 * 20_000


def test_an_attack_is_held_to_its_routes_throttle_and_counted_whole_by_the_account_throttle() -> None:
    mix = _one_scenario_mix("POST /login wrong password", goal=20_000, attack=True)
    costs = {"POST /login wrong password": _cost({"user item": Access(writes=2)}, own_ms=1.0)}
    deploy = deployment(TEMPLATE, {"LoginRateLimit": "8000"})

    figures = model("m", mix, costs, deploy, 10)

    assert figures.carried_rps == pytest.approx(8_000)
    assert figures.classes["user item"][1] == pytest.approx(16_000)  # what passed the gateway only
    [account] = [c for c in figures.ceilings if c.resource == "API Gateway account throttle"]
    assert account.load == "20,000.0 req/s"
    assert not [c for c in figures.ceilings if c.resource.startswith("API route throttle")]


def test_stream_records_bring_the_stream_functions_work_and_its_units() -> None:
    mix = _one_scenario_mix("s")
    costs = {
        "s": _cost({}, mails=1, user_changes=2),
        MAIL: _cost({"outbox message": Access(writes=2)}, function="MailFunction", ses=1),
        SWEEP: _cost({"a user's sessions": Access(reads=1)}, function="SweepFunction"),
        RECOVERY: _cost({}, function="RecoveryFunction"),
    }

    figures = model("m", mix, costs, _deploy(), 10)

    assert figures.endpoints[MAIL] == pytest.approx(1_000)
    assert figures.endpoints[SWEEP] == pytest.approx(2_000)
    assert figures.ses_rate == pytest.approx(1_000)
    assert figures.classes["a user's sessions"][0] == pytest.approx(2_000)
    [daily] = [c for c in figures.ceilings if c.resource.startswith("SES daily quota")]
    assert daily.at_rps == pytest.approx(limits.SES_DAILY / 86_400)


def test_a_query_is_counted_by_the_items_it_reads_not_the_ones_its_filter_returns(dynamodb: Any) -> None:
    for n in range(3):  # 3 KB each, 9 KB read: 3 units of 4 KB, eventually consistent
        item = {"pk": {"S": "USER#1"}, "n": {"S": str(n)}, "blob": {"S": "x" * 3000}}
        dynamodb.put_item(TableName="SessionsTable", Item=item)
    recorder = Recorder(boto3.client("dynamodb", region_name=REGION))
    with installed(recorder), recorder.recording(RequestCost("s", "")) as cost:
        found = dynamodb.query(
            TableName="SessionsTable",
            KeyConditionExpression="pk = :p",
            FilterExpression="#n = :none",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":p": {"S": "USER#1"}, ":none": {"S": "nothing"}},
        )

    assert found["Items"] == []
    assert cost.classes["a user's sessions"] == Access(reads=1.5)


def test_a_changed_user_item_is_a_sweep_and_a_new_outbox_message_a_mail(dynamodb: Any) -> None:
    recorder = Recorder(boto3.client("dynamodb", region_name=REGION), users_table="UsersTable")
    dynamodb.put_item(TableName="UsersTable", Item={"pk": {"S": "USER#1"}, "failed": {"N": "0"}})
    with installed(recorder), recorder.recording(RequestCost("s", "")) as cost:
        for _ in range(2):  # the second leaves the item as it was: no stream record
            dynamodb.update_item(
                TableName="UsersTable",
                Key={"pk": {"S": "USER#1"}},
                UpdateExpression="SET failed = :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )

    assert cost.user_changes == 1
    assert cost.stored_bytes == 0  # "0" and "1" are the same size


def test_cognito_bills_each_monthly_active_user_past_its_free_ones_by_band() -> None:
    assert cognito_price(10_000, limits.COGNITO["Essentials"]) == 0
    assert cognito_price(110_000, limits.COGNITO["Essentials"]) == pytest.approx(1_500)
    lite = cognito_price(1_000_000, limits.COGNITO["Lite"])
    assert lite == pytest.approx(90_000 * 0.0055 + 900_000 * 0.0046)


@pytest.mark.long  # the capacity model over every traffic mix
def test_a_default_deploy_carries_the_normal_mix_and_the_report_names_what_launch_and_attack_need() -> None:
    """The whole model on the real handlers (one run: it measures every scenario on moto)."""
    report = run(TEMPLATE, 1)
    figures, users = report.data
    by_name = {f.name: f for f in figures}
    normal, launch, attack = by_name["normal"], by_name["launch"], by_name["attack"]

    # Only AWS's account quotas (each named with its lift) stand below the normal day's goal.
    below = [c for c in normal.ceilings if c.at_rps < normal.goal_rps]
    assert below
    assert {c.kind for c in below} == {"account"}
    # The stream functions' work is part of the day.
    for function in ("MailFunction", "SweepFunction", "RecoveryFunction"):
        assert normal.concurrency[function] > 0
    # A launch needs pre-warmed tables and a wider registration route, and says so.
    parameters = " ".join(what_it_takes(launch)[0])
    assert "WarmWriteUnits=" in parameters
    assert "RegisterRateLimit=" in parameters
    # The attack: the login route's throttle holds it, and most refusals reach the counters.
    assert attack.carried_rps < attack.goal_rps
    assert attack.memo_hits is not None
    assert attack.memo_hits < 0.1
    assert attack.classes["per-address counter"][1] > 0.8 * attack.carried_rps
    assert [u.users for u in users] == [10_000, 100_000, 1_000_000, 10_000_000]
    assert "Cognito Essentials" in report.table


def test_the_concurrency_quota_to_ask_for_holds_the_reserved_executions_beside_the_rest() -> None:
    mix = _one_scenario_mix("s", goal=1_000)
    cost = _cost({}, function="AccountsFunction", own_ms=300.0)  # 300 concurrent executions
    deploy = _deploy(reserved={"AuthFunction": Limit(800, "AuthReservedConcurrency")})

    figures = model("m", mix, {"s": cost}, deploy, 10)

    [pool] = [c for c in figures.ceilings if c.resource.startswith("Lambda concurrent executions")]
    assert pool.at_rps == pytest.approx(1_000 * 200 / 300)  # 1,000 - 800 reserved left
    _, _, quotas = what_it_takes(figures)
    assert "Lambda concurrent executions: 1,400, 800 reserved among them" in " ".join(quotas)  # 2 x 300 + 800


def test_a_flood_of_every_sign_in_route_at_its_throttle_is_held_to_the_functions_reservation() -> None:
    deploy = deployment(TEMPLATE, {"LoginRateLimit": "1000", "AuthReservedConcurrency": "50"})
    slow = RequestCost("POST /login wrong password", "AuthFunction", own_ms=0.0, round_trips=25)  # 100 ms

    [line] = flood_bounds({slow.scenario: slow}, deploy)

    assert "100 concurrent executions, capped by its reservation (AuthReservedConcurrency=50)" in line
    assert "not measured: POST /login/passkey" in line
