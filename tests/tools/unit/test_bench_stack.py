"""bench.stack's moto stack inside a process that mocks AWS already (a test worker's session stack):
it starts from nothing and leaves nothing, so the outer stack is provisioned again, whole, rather
than found with the streams the bench turned off or the environment it set."""

from __future__ import annotations

import os

import boto3
from moto import mock_aws

from bench.stack import moto_stack
from nimbus_tools.template import load_template

REGION = "us-east-1"


def test_a_bench_stack_inside_another_mock_leaves_no_table_and_the_environment_as_it_was() -> None:
    environment = dict(os.environ)
    with mock_aws():
        outer = boto3.client("dynamodb", region_name=REGION)
        outer.create_table(
            TableName="outer",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )

        with moto_stack(load_template(), handlers=[], streams=()):
            pass

        # Gone, its own and the outer ones: whoever mocked AWS provisions again, streams on.
        assert outer.list_tables()["TableNames"] == []
    assert dict(os.environ) == environment
