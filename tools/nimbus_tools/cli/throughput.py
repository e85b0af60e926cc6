"""``nimbus ssm-throughput show|enable``: SSM Parameter Store's higher-throughput setting.

Every function instance reads the kill switches and log level with GetParameters; the account's
standard Parameter Store throughput is shared by all of them and by everything else in the account
and region. Higher throughput is an account-and-region setting (``ssm:GetServiceSetting``,
``ssm:UpdateServiceSetting``) changed with the operator's own credentials, never a function's;
it is charged per API interaction (docs/operations.md quotes the quotas and price with sources).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_tools.cli.target import EXIT_USAGE, CliError, Target

if TYPE_CHECKING:
    from collections.abc import Callable

    from types_boto3_ssm import SSMClient

SETTING_ID = "/ssm/parameter-store/high-throughput-enabled"
STANDARD_TPS = 40  # GetParameter, GetParameters and GetParametersByPath together, per account and region


def command(action: str, target: Callable[[], Target]) -> str:
    """``ssm-throughput show`` or ``ssm-throughput enable`` on a deployed stack's account and region."""
    resolved = target()
    if resolved.endpoint_url is not None:
        raise CliError(
            "Parameter Store throughput is a setting of an AWS account and region: "
            "use it on a deployed stack (--stack NAME)",
            EXIT_USAGE,
        )
    client = resolved.ssm()
    return enable(client) if action == "enable" else show(client)


def show(client: SSMClient) -> str:
    """The setting as SSM reports it, and what it means for the runtime configuration's reads."""
    found = client.get_service_setting(SettingId=SETTING_ID)["ServiceSetting"]
    on = str(found.get("SettingValue", "")).lower() == "true"
    changed = found.get("LastModifiedDate")
    lines = [
        f"Parameter Store higher throughput: {'on' if on else 'off'} ({SETTING_ID} = "
        f"{found.get('SettingValue')}, {found.get('Status', '?')}"
        + (
            f", changed {changed:%Y-%m-%d %H:%M} UTC by {found.get('LastModifiedUser', '?')})"
            if changed
            else ")"
        ),
    ]
    if on:
        lines.append("GetParameters runs at the higher-throughput quota; every API interaction is charged.")
    else:
        lines.append(
            f"GetParameters shares the standard {STANDARD_TPS} TPS with every reader in this account and "
            "region; turn higher throughput on with `nimbus ssm-throughput enable` (charged)."
        )
    return "\n".join(lines)


def enable(client: SSMClient) -> str:
    """Turn higher throughput on (asked of SSM even when it already is), then show the setting."""
    client.update_service_setting(SettingId=SETTING_ID, SettingValue="true")
    return show(client)
