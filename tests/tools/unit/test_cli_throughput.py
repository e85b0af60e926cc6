"""`nimbus ssm-throughput show|enable`: Parameter Store's higher-throughput account setting.

moto (the pinned version) implements neither GetServiceSetting nor UpdateServiceSetting, so these
tests hold the command to the exact requests with botocore's Stubber, answered as SSM documents
them (docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetServiceSetting.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber

from nimbus_tools.cli import throughput
from nimbus_tools.cli.main import main
from nimbus_tools.cli.target import CliError, Target

if TYPE_CHECKING:
    from types_boto3_ssm import SSMClient

REGION = "eu-west-1"
SETTING_ID = "/ssm/parameter-store/high-throughput-enabled"
ARN = f"arn:aws:ssm:{REGION}:123456789012:servicesetting{SETTING_ID}"


def setting(value: str, status: str = "Default") -> dict[str, object]:
    return {
        "ServiceSetting": {
            "SettingId": SETTING_ID,
            "SettingValue": value,
            "LastModifiedDate": datetime(2026, 11, 26, 12, 0, tzinfo=UTC),
            "LastModifiedUser": "System",
            "ARN": ARN,
            "Status": status,
        }
    }


@pytest.fixture
def ssm() -> Iterator[tuple[SSMClient, Stubber]]:
    client = boto3.client(
        "ssm", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_show_reads_the_setting_and_names_the_quota_it_gives(ssm: tuple[SSMClient, Stubber]) -> None:
    client, stubber = ssm
    stubber.add_response("get_service_setting", setting("false"), {"SettingId": SETTING_ID})

    shown = throughput.show(client)

    assert "higher throughput: off" in shown
    assert "40" in shown  # the standard quota that applies
    assert "nimbus ssm-throughput enable" in shown


def test_enable_updates_the_setting_then_reads_it_back(ssm: tuple[SSMClient, Stubber]) -> None:
    client, stubber = ssm
    stubber.add_response("update_service_setting", {}, {"SettingId": SETTING_ID, "SettingValue": "true"})
    stubber.add_response("get_service_setting", setting("true", "Customized"), {"SettingId": SETTING_ID})

    shown = throughput.enable(client)

    assert "higher throughput: on" in shown
    assert "charged" in shown


def test_enable_when_already_on_still_asks_ssm_and_says_so(ssm: tuple[SSMClient, Stubber]) -> None:
    client, stubber = ssm
    stubber.add_response("update_service_setting", {}, {"SettingId": SETTING_ID, "SettingValue": "true"})
    stubber.add_response("get_service_setting", setting("true", "Customized"), {"SettingId": SETTING_ID})

    assert "higher throughput: on" in throughput.enable(client)


def test_a_denied_update_is_the_aws_error_not_a_claim_of_success(ssm: tuple[SSMClient, Stubber]) -> None:
    client, stubber = ssm
    stubber.add_client_error(
        "update_service_setting",
        service_error_code="AccessDeniedException",
        service_message="not authorized to perform: ssm:UpdateServiceSetting",
        http_status_code=400,
        expected_params={"SettingId": SETTING_ID, "SettingValue": "true"},
    )

    with pytest.raises(Exception, match="AccessDenied"):
        throughput.enable(client)


def test_the_local_api_has_no_such_setting() -> None:
    local = Target(
        description="the local API (http://127.0.0.1:1)",
        session=boto3.Session(region_name=REGION),
        tables={},
        parameters={},
        endpoint_url="http://127.0.0.1:1",
    )

    with pytest.raises(CliError, match="deployed stack"):
        throughput.command("show", lambda: local)


def test_the_command_line_routes_show_and_enable(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["ssm-throughput", "show", "--help"], ["ssm-throughput", "enable", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0
    assert "higher throughput" in capsys.readouterr().out
