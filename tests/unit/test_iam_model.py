"""The IAM model the IAM test judges the template with (tests/iam.py)."""

from __future__ import annotations

from typing import Any

import pytest

from nimbus_tools.template import load_template
from tests.iam import (
    IamModelError,
    IamRequest,
    Statement,
    allows,
    function_statements,
    parameter_arn,
    requests_of,
    table_arn,
)

USERS, SESSIONS = table_arn("UsersTable"), table_arn("SessionsTable")


def test_a_transaction_is_authorized_per_item_with_the_items_own_action() -> None:
    items = [
        {"Put": {"TableName": "UsersTable"}},
        {"Update": {"TableName": "UsersTable"}},
        {"Delete": {"TableName": "SessionsTable"}},
        {"ConditionCheck": {"TableName": "DomainsTable"}},
    ]
    assert requests_of("dynamodb", "TransactWriteItems", {"TransactItems": items}) == [
        IamRequest("dynamodb:PutItem", USERS),
        IamRequest("dynamodb:UpdateItem", USERS),
        IamRequest("dynamodb:DeleteItem", SESSIONS),
        IamRequest("dynamodb:ConditionCheckItem", table_arn("DomainsTable")),
    ]


def test_a_query_on_an_index_is_authorized_on_the_index() -> None:
    params = {"TableName": "UsersTable", "IndexName": "EmailLookup"}
    assert requests_of("dynamodb", "Query", params) == [
        IamRequest("dynamodb:Query", f"{USERS}/index/EmailLookup")
    ]
    assert requests_of("dynamodb", "Query", {"TableName": "UsersTable"}) == [
        IamRequest("dynamodb:Query", USERS)
    ]


def test_batches_are_authorized_per_table_and_parameters_per_name() -> None:
    batch: dict[str, Any] = {"RequestItems": {"UsersTable": {}, "SessionsTable": {}}}
    assert requests_of("dynamodb", "BatchGetItem", batch) == [
        IamRequest("dynamodb:BatchGetItem", USERS),
        IamRequest("dynamodb:BatchGetItem", SESSIONS),
    ]
    assert requests_of("ssm", "GetParameters", {"Names": ["/a/b", "c"]}) == [
        IamRequest("ssm:GetParameters", "arn:aws:ssm:us-east-1:123456789012:parameter/a/b"),
        IamRequest("ssm:GetParameters", "arn:aws:ssm:us-east-1:123456789012:parameter/c"),
    ]


@pytest.mark.parametrize(
    ("service", "operation"),
    [("dynamodb", "ExecuteStatement"), ("sesv2", "CreateEmailIdentity"), ("s3", "GetObject")],
)
def test_an_unmodelled_call_raises(service: str, operation: str) -> None:
    with pytest.raises(IamModelError):
        requests_of(service, operation, {})


def test_wildcards_match_like_iam_and_an_explicit_deny_wins() -> None:
    allow = Statement("A", "Allow", ("DynamoDB:Get*",), (f"{USERS}/index/*",))
    assert allows([allow], IamRequest("dynamodb:GetItem", f"{USERS}/index/EmailLookup"))
    assert not allows([allow], IamRequest("dynamodb:GetItem", USERS))  # the table is not its index
    assert not allows([allow], IamRequest("dynamodb:PutItem", f"{USERS}/index/EmailLookup"))
    deny = Statement("D", "Deny", ("dynamodb:*",), ("*",))
    assert not allows([allow, deny], IamRequest("dynamodb:GetItem", f"{USERS}/index/EmailLookup"))
    assert not allows([], IamRequest("dynamodb:GetItem", USERS))


def test_template_statements_resolve_to_local_arns() -> None:
    statements = function_statements(load_template())
    assert set(statements) == {
        "AuthFunction",
        "AccountsFunction",
        "SessionsFunction",
        "SecondFactorsFunction",
        "StaffFunction",
        "AdminFunction",
        "MailFunction",
        "SweepFunction",
        "RecoveryFunction",
        "ActivityFunction",
    }
    config = parameter_arn("/nimbus/dev/killswitches/GLOBAL")
    for logical_id, found in statements.items():
        assert allows(found, IamRequest("ssm:GetParameters", config)), logical_id


def test_the_ses_grant_holds_only_for_the_deployment_sender() -> None:
    mail = function_statements(load_template())["MailFunction"]
    sender = requests_of("sesv2", "SendEmail", {"FromEmailAddress": "no-reply@nimbus.example"})
    other = requests_of("sesv2", "SendEmail", {"FromEmailAddress": "attacker@evil.example"})
    assert all(allows(mail, r) for r in sender)
    assert not any(allows(mail, r) for r in other)


def test_a_queue_url_becomes_the_queue_arn_the_template_grants() -> None:
    mail = function_statements(load_template())["MailFunction"]
    url = "http://127.0.0.1:5000/123456789012/MailDeadLetterQueue"
    assert all(allows(mail, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": url}))
    other = "http://127.0.0.1:5000/123456789012/SomethingElse"
    assert not any(allows(mail, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": other}))


STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/UsersTable/stream/2027-01-15T08:00:00.250"


def test_stream_reads_are_authorized_on_the_stream_named_by_the_arn_or_moto_iterator() -> None:
    assert requests_of("dynamodb-streams", "DescribeStream", {"StreamArn": STREAM}) == [
        IamRequest("dynamodb:DescribeStream", STREAM)
    ]
    assert requests_of("dynamodb-streams", "GetShardIterator", {"StreamArn": STREAM, "ShardId": "s"}) == [
        IamRequest("dynamodb:GetShardIterator", STREAM)
    ]
    assert requests_of("dynamodb-streams", "GetRecords", {"ShardIterator": f"{STREAM}|1|abc=="}) == [
        IamRequest("dynamodb:GetRecords", STREAM)
    ]
    with pytest.raises(IamModelError):
        requests_of("dynamodb-streams", "GetRecords", {"ShardIterator": "opaque-real-iterator"})
    with pytest.raises(IamModelError):
        requests_of("dynamodb-streams", "ListStreams", {})


def test_the_sweeper_reads_only_the_users_stream_and_sends_only_to_its_own_queue() -> None:
    sweep = function_statements(load_template())["SweepFunction"]
    outbox_stream = STREAM.replace("UsersTable", "OutboxTable")
    for action in ("DescribeStream", "GetShardIterator", "GetRecords"):
        assert allows(sweep, IamRequest(f"dynamodb:{action}", STREAM))
        assert not allows(sweep, IamRequest(f"dynamodb:{action}", outbox_stream))
    own = "http://127.0.0.1:5000/123456789012/SweepDeadLetterQueue"
    mail = "http://127.0.0.1:5000/123456789012/MailDeadLetterQueue"
    assert all(allows(sweep, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": own}))
    assert not any(allows(sweep, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": mail}))
    assert not allows(sweep, IamRequest("dynamodb:PutItem", SESSIONS))
    assert not allows(sweep, IamRequest("dynamodb:Query", USERS))


def test_the_recovery_function_reads_only_the_outbox_stream_and_never_sends_mail_or_makes_sessions() -> None:
    recovery = function_statements(load_template())["RecoveryFunction"]
    outbox_stream = STREAM.replace("UsersTable", "OutboxTable")
    for action in ("DescribeStream", "GetShardIterator", "GetRecords"):
        assert allows(recovery, IamRequest(f"dynamodb:{action}", outbox_stream))
        assert not allows(recovery, IamRequest(f"dynamodb:{action}", STREAM))
    own = "http://127.0.0.1:5000/123456789012/RecoveryDeadLetterQueue"
    mail = "http://127.0.0.1:5000/123456789012/MailDeadLetterQueue"
    assert all(allows(recovery, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": own}))
    assert not any(allows(recovery, r) for r in requests_of("sqs", "SendMessage", {"QueueUrl": mail}))
    sender = requests_of("sesv2", "SendEmail", {"FromEmailAddress": "no-reply@nimbus.example"})
    assert not any(allows(recovery, r) for r in sender)
    assert not allows(recovery, IamRequest("dynamodb:PutItem", SESSIONS))
    assert not allows(recovery, IamRequest("dynamodb:PutItem", USERS))  # changes users, never makes one


@pytest.mark.parametrize(
    "policy",
    [
        "AmazonDynamoDBFullAccess",
        {"DynamoDBCrudPolicy": {"TableName": "UsersTable"}},
        {"Statement": [{"Effect": "Allow", "Action": "s3:*", "NotResource": "x"}]},
    ],
)
def test_policies_the_model_cannot_judge_are_refused(policy: Any) -> None:
    template = load_template()
    template["Resources"]["AdminFunction"]["Properties"]["Policies"] = [policy]
    with pytest.raises(IamModelError):
        function_statements(template)
