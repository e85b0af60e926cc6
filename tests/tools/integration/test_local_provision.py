"""Provisioning from template.yaml under moto: every table, TTL, parameter, SES identity, default domain."""

from __future__ import annotations

import re
from collections.abc import Iterator

import boto3
import pytest

from nimbus_core.domain.killswitches import KillSwitch
from nimbus_tools.local.provision import provision
from nimbus_tools.template import load_template, local_key_arn, local_key_id
from tests.integration.conftest import fresh_aws

pytestmark = pytest.mark.waits  # an emulator started per test

REGION = "us-east-1"
TEMPLATE = load_template()


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with fresh_aws():
        yield boto3.Session(region_name=REGION)


def test_every_table_is_created_with_its_keys_and_indexes(session: boto3.Session) -> None:
    stack = provision(session, TEMPLATE)
    dynamodb = session.client("dynamodb")
    assert sorted(dynamodb.list_tables()["TableNames"]) == sorted(stack.tables.values())
    users = dynamodb.describe_table(TableName="UsersTable")["Table"]
    assert users["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert sorted(i["IndexName"] for i in users.get("GlobalSecondaryIndexes", [])) == [
        "CreatedIndex",
        "EmailLookup",
        "UsernameLookup",
    ]
    assert users["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_the_totp_key_is_created_once_under_its_local_id_with_rotation_and_alias(
    session: boto3.Session,
) -> None:
    stack = provision(session, TEMPLATE, {"Stage": "qa"})
    provision(session, TEMPLATE, {"Stage": "qa"})  # twice: the key is kept, not made again
    kms = session.client("kms")
    assert stack.keys == {"TotpKey": local_key_arn("TotpKey")}
    assert [k["KeyArn"] for k in kms.list_keys()["Keys"]] == [local_key_arn("TotpKey")]
    assert kms.get_key_rotation_status(KeyId=local_key_id("TotpKey"))["KeyRotationEnabled"] is True
    aliases = {a["AliasName"]: a.get("TargetKeyId") for a in kms.list_aliases()["Aliases"]}
    assert aliases["alias/nimbus-qa-totp"] == local_key_id("TotpKey")
    # The data keys the functions ask for are made under it, for the stage's context only.
    context = {"purpose": "nimbus-totp", "stage": "qa"}
    made = kms.generate_data_key(KeyId="alias/nimbus-qa-totp", KeySpec="AES_256", EncryptionContext=context)
    assert made["KeyId"] == local_key_arn("TotpKey")


def test_tables_that_hold_accounts_refuse_deletion_as_deployed(session: boto3.Session) -> None:
    provision(session, TEMPLATE)
    dynamodb = session.client("dynamodb")
    for name in ("UsersTable", "SessionsTable", "TokensTable", "DomainsTable"):
        with pytest.raises(dynamodb.exceptions.ClientError, match="DeletionProtectionEnabled"):
            dynamodb.delete_table(TableName=name)
    dynamodb.delete_table(TableName="CountersTable")  # rate counters only: TTL-expired, rebuilt empty


def test_ttl_is_enabled_exactly_where_the_template_says(session: boto3.Session) -> None:
    provision(session, TEMPLATE)
    dynamodb = session.client("dynamodb")
    ttl = {
        name: dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        for name in ("UsersTable", "SessionsTable", "CountersTable", "TokensTable", "DomainsTable")
    }
    for name in ("SessionsTable", "CountersTable", "TokensTable"):
        assert ttl[name] == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}
    for name in ("UsersTable", "DomainsTable"):
        assert ttl[name]["TimeToLiveStatus"] == "DISABLED"


def test_ssm_parameters_hold_their_template_values_under_the_stage_path(session: boto3.Session) -> None:
    stack = provision(session, TEMPLATE, {"Stage": "qa"})
    assert stack.parameters == {
        **{
            f"KillSwitch{s.name.title().replace('_', '')}": f"/nimbus/qa/killswitches/{s.name}"
            for s in KillSwitch
        },
        "LogLevelParameter": "/nimbus/qa/loglevel",
    }
    ssm = session.client("ssm")
    for switch in KillSwitch:
        assert ssm.get_parameter(Name=f"/nimbus/qa/killswitches/{switch.name}")["Parameter"]["Value"] == "off"
    assert ssm.get_parameter(Name="/nimbus/qa/loglevel")["Parameter"]["Value"] == "INFO"


def test_sender_identity_is_verified_for_ses_v1_and_v2(session: boto3.Session) -> None:
    provision(session, TEMPLATE, {"SenderEmail": "mailer@nimbus.test"})
    assert (
        "mailer@nimbus.test"
        in session.client("ses").list_verified_email_addresses()["VerifiedEmailAddresses"]
    )
    session.client("sesv2").get_email_identity(EmailIdentity="mailer@nimbus.test")  # raises if missing
    sent = session.client("sesv2").send_email(
        FromEmailAddress="mailer@nimbus.test",
        Destination={"ToAddresses": ["a@example.com"]},
        Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}},
    )
    assert sent["MessageId"]


def test_default_domain_is_offered_lower_cased_with_subdomains(session: boto3.Session) -> None:
    provision(session, TEMPLATE, {"DefaultDomain": "Nimbus.Test"})
    items = session.client("dynamodb").scan(TableName="DomainsTable")["Items"]
    assert len(items) == 1
    assert items[0]["id"] == {"S": "nimbus.test"}
    assert items[0]["subdomains"] == {"BOOL": True}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", items[0]["createdAt"]["S"])


def test_provisioning_twice_keeps_data_and_resets_parameters(session: boto3.Session) -> None:
    provision(session, TEMPLATE)
    dynamodb, ssm = session.client("dynamodb"), session.client("ssm")
    first = dynamodb.scan(TableName="DomainsTable")["Items"]
    dynamodb.put_item(TableName="UsersTable", Item={"pk": {"S": "USER#1"}})
    ssm.put_parameter(Name="/nimbus/dev/loglevel", Value="DEBUG", Type="String", Overwrite=True)
    provision(session, TEMPLATE)
    assert dynamodb.scan(TableName="DomainsTable")["Items"] == first
    assert dynamodb.get_item(TableName="UsersTable", Key={"pk": {"S": "USER#1"}}).get("Item")
    assert ssm.get_parameter(Name="/nimbus/dev/loglevel")["Parameter"]["Value"] == "INFO"
