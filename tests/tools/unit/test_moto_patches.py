"""The project environment's moto carries patches/ and answers as stock moto does, only cheaper.

Stock moto is the environment's moto with every patch reversed, in a copy first on PYTHONPATH;
tests/tools/unit/moto_play.py plays the same operations on each, in its own process, and the
answers are compared. The copy cannot be made if the environment's moto lacks a patch, and the
cost test below fails on stock moto: either way an unpatched environment fails here.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from moto import mock_aws

from tests.tools.unit import moto_play
from tests.tools.unit.moto_play import REGION, calls, s, tables

pytestmark = pytest.mark.long  # two moto processes play every script

ROOT = Path(__file__).resolve().parents[3]
PATCHES = sorted((ROOT / "patches").glob("moto-*.patch"))
SITE = Path(moto.__file__).parents[1]  # the project environment's site-packages


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What moto_play.py wrote on the environment's moto ("patched") and on stock moto."""
    stock = tmp_path_factory.mktemp("stock-moto")
    shutil.copytree(SITE / "moto", stock / "moto", ignore=shutil.ignore_patterns("__pycache__"))
    for patch in PATCHES:
        with patch.open() as diff:  # refused unless the environment's moto carries the patch
            subprocess.run(
                ["patch", "--reverse", "--force", "--quiet", "--no-backup-if-mismatch", "-p1", "-d", stock],
                stdin=diff,
                check=True,
            )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONPATH"}
    runs = {
        name: (out, subprocess.Popen([sys.executable, moto_play.__file__, out], env=env | extra))
        for name, out, extra in (
            ("patched", stock / "patched.txt", {}),
            ("stock", stock / "stock.txt", {"PYTHONPATH": str(stock)}),
        )
    }
    answers = {}
    for name, (out, run) in runs.items():
        assert run.wait() == 0, name
        answers[name] = ast.literal_eval(out.read_text())
    assert Path(answers["patched"]["moto"]).is_relative_to(SITE)
    assert Path(answers["stock"]["moto"]).is_relative_to(stock)
    return answers


def test_patched_moto_answers_and_streams_exactly_as_stock_moto(played: dict[str, Any]) -> None:
    """Every seed's script (one test: the module's fixture runs once per test worker)."""
    for seed in moto_play.SEEDS:
        stock = played["stock"]["scripts"][seed]
        assert any(answer == "committed" for answer in stock)  # the scripts do commit and cancel
        assert any(isinstance(a, tuple) and a[0] == "TransactionCanceledException" for a in stock)

        assert played["patched"]["scripts"][seed] == stock, f"seed {seed}"


def test_patched_moto_answers_items_of_every_attribute_type_byte_for_byte_as_stock_moto(
    played: dict[str, Any],
) -> None:
    stock = played["stock"]["rich"]
    answered = b"".join(body for body in stock if isinstance(body, bytes))
    assert answered.count(b'"empty": {"S": ""}') >= 6  # each read answers the empty string

    assert played["patched"]["rich"] == stock


def test_patched_moto_answers_update_and_condition_expressions_as_stock_moto_every_time(
    played: dict[str, Any],
) -> None:
    """Valid and refused expressions, each asked twice (patched moto answers the second from what
    it parsed of the first): the same items, and the same refusal, found by the same first check."""
    stock = played["stock"]["expressions"]
    assert stock[::2] == stock[1::2]
    refusals = " ".join(answer[1] for answer in stock if isinstance(answer, tuple))
    for refused in ('"SET" section can only be used once', "paths overlap", "Syntax error", "Bad comparison"):
        assert refused in refusals

    assert played["patched"]["expressions"] == stock


def test_the_patched_serializer_answers_an_item_in_under_two_thirds_of_the_calls(
    played: dict[str, Any],
) -> None:
    patched, stock = played["patched"]["get_item_calls"], played["stock"]["get_item_calls"]
    assert patched < stock * 2 / 3, (patched, stock)


def _query_calls(client: Any, table: str, index: str | None, attribute: str, value: str) -> int:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#h = :h",
        "ExpressionAttributeNames": {"#h": attribute},
        "ExpressionAttributeValues": {":h": s(value)},
    }
    if index:
        request["IndexName"] = index
    assert client.query(**request)["Count"] == 1  # warm: first-use caches are no part of the cost
    return calls(lambda: client.query(**request))


def _transaction_calls(client: Any, table: str) -> int:
    def put(n: int) -> None:
        item = {"TableName": table, "Item": {"pk": s(f"new{n}"), "name": s(f"new{n}")}}
        client.transact_write_items(TransactItems=[{"Put": item}])

    put(0)
    return calls(lambda: put(1))


def test_a_query_and_a_transaction_cost_what_they_touch_not_the_table() -> None:
    """On the environment's moto (this process's), from 20 items to 4,000 (and their stream
    records) a GSI query, a base-table query and a transaction do about the same work; stock
    moto's walk and table copies do tens of times more."""
    with mock_aws():  # nested in a worker's session mock, possibly: its own tables, deleted after
        client = boto3.client("dynamodb", region_name=REGION)
        users, _ = names = tables(client, "scale")
        try:
            figures = []
            for first, last in ((0, 20), (20, 4000)):
                for start in range(first, last, 25):
                    batch = range(start, min(last, start + 25))
                    puts: list[Any] = [
                        {"PutRequest": {"Item": {"pk": s(f"u{i}"), "name": s(f"n{i}")}}} for i in batch
                    ]
                    client.batch_write_item(RequestItems={users: puts})
                figures.append(
                    (
                        _query_calls(client, users, "Name", "name", "n7"),
                        _query_calls(client, users, None, "pk", "u7"),
                        _transaction_calls(client, users),
                    )
                )
                for n in range(2):
                    client.delete_item(TableName=users, Key={"pk": s(f"new{n}")})
        finally:
            for name in names:
                client.delete_table(TableName=name)
    small, large = figures
    ratios = [round(b / a, 1) for a, b in zip(small, large, strict=True)]
    assert all(ratio < 3 for ratio in ratios), f"GSI query, base query, transaction: {ratios}"


def test_parallel_queries_of_an_index_never_see_its_value_index_half_built() -> None:
    """The first queries of an index keyed on another attribute build the patch's value index; a
    client's parallel queries (the user list's, one per partition) each see every item."""
    items, threads = 3000, 8
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName="grouped",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "group", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "ByGroup",
                    "KeySchema": [{"AttributeName": "group", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for start in range(0, items, 25):
            puts: list[Any] = [
                {"PutRequest": {"Item": {"pk": s(f"u{i}"), "group": s("all")}}}
                for i in range(start, start + 25)
            ]
            client.batch_write_item(RequestItems={"grouped": puts})
        start_together = threading.Barrier(threads)

        def count() -> int:
            start_together.wait()
            answer = client.query(
                TableName="grouped",
                IndexName="ByGroup",
                KeyConditionExpression="#g = :g",
                ExpressionAttributeNames={"#g": "group"},
                ExpressionAttributeValues={":g": s("all")},
                Select="COUNT",
            )
            return int(answer["Count"])

        with ThreadPoolExecutor(threads) as pool:
            counts = list(pool.map(lambda _: count(), range(threads)))
    assert counts == [items] * threads


def test_moto_ssm_loads_without_ec2_and_still_finds_ec2_instances_for_run_command_targets() -> None:
    """moto-ssm-import.patch: SSM's import leaves EC2's models out (every local API and test worker
    loads SSM); the one SSM call that needs EC2 (Run Command by instance tag) imports it itself."""
    check = "import sys, moto.ssm.models; assert 'moto.ec2' not in sys.modules, 'EC2 loaded'"
    imported = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert imported.returncode == 0, imported.stderr

    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        image = ec2.describe_images()["Images"][0]["ImageId"]
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "role", "Value": "worker"}]}]
        started = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=tags)
        [instance] = started["Instances"]
        command = boto3.client("ssm", region_name=REGION).send_command(
            DocumentName="AWS-RunShellScript",
            Targets=[{"Key": "tag:role", "Values": ["worker"]}],
            Parameters={"commands": ["true"]},
        )["Command"]
    assert command["InstanceIds"] == [instance["InstanceId"]]
