"""AWS access of the CLI: one small function per read or write, no formatting here."""

from __future__ import annotations

from dataclasses import dataclass

from botocore.exceptions import ClientError

from nimbus_core import clock
from nimbus_core.killswitches import KillSwitch, parse_enabled, serialize_enabled
from nimbus_tools.cli.target import Target


def find_user_id(target: Target, username: str) -> str | None:
    """The userId claimed by ``username`` (case-insensitive), or None if nobody has it."""
    item = (
        target.dynamodb()
        .get_item(
            TableName=target.table("UsersTable"),
            Key={"pk": {"S": f"USERNAME#{username.lower()}"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    user_id = (item or {}).get("userId", {}).get("S")
    return user_id or None


def set_staff(target: Target, user_id: str, staff: bool) -> bool:
    """Set the user's staff flag; False if the user item does not exist."""
    try:
        target.dynamodb().update_item(
            TableName=target.table("UsersTable"),
            Key={"pk": {"S": f"USER#{user_id}"}},
            UpdateExpression="SET staff = :staff, updatedAt = :now",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":staff": {"BOOL": staff}, ":now": {"S": clock.iso(clock.now())}},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def read_parameter(target: Target, logical_id: str) -> str:
    """The current value of an SSM parameter of the stack."""
    return target.ssm().get_parameter(Name=target.parameter(logical_id))["Parameter"]["Value"]


def write_parameter(target: Target, logical_id: str, value: str) -> None:
    """Replace the value of an SSM parameter of the stack."""
    target.ssm().put_parameter(Name=target.parameter(logical_id), Value=value, Type="String", Overwrite=True)


def enabled_killswitches(target: Target) -> frozenset[KillSwitch]:
    """The kill switches currently on."""
    return parse_enabled(read_parameter(target, "KillSwitchParameter"))


def write_killswitches(target: Target, enabled: frozenset[KillSwitch]) -> None:
    """Store the set of enabled kill switches."""
    write_parameter(target, "KillSwitchParameter", serialize_enabled(enabled))


@dataclass(frozen=True)
class Domain:
    """A DomainsTable item."""

    domain: str
    allows_subdomains: bool
    created_at: str


def list_domains(target: Target) -> list[Domain]:
    """Every offered domain, sorted by name."""
    paginator = target.dynamodb().get_paginator("scan")
    domains: list[Domain] = []
    for page in paginator.paginate(TableName=target.table("DomainsTable"), ConsistentRead=True):
        for item in page.get("Items", []):
            domains.append(
                Domain(
                    domain=item["domain"]["S"],
                    allows_subdomains=bool(item.get("allowsSubdomains", {}).get("BOOL", False)),
                    created_at=item.get("createdAt", {}).get("S", ""),
                )
            )
    return sorted(domains, key=lambda d: d.domain)


def upsert_domain(target: Target, domain: str, allows_subdomains: bool) -> bool:
    """Offer ``domain`` (or update allowsSubdomains of an existing one); True if it was new."""
    result = target.dynamodb().update_item(
        TableName=target.table("DomainsTable"),
        Key={"domain": {"S": domain}},
        # One atomic write: createdAt is kept if the domain already existed.
        UpdateExpression="SET allowsSubdomains = :sub, createdAt = if_not_exists(createdAt, :now)",
        ExpressionAttributeValues={
            ":sub": {"BOOL": allows_subdomains},
            ":now": {"S": clock.iso(clock.now())},
        },
        ReturnValues="ALL_OLD",
    )
    return not result.get("Attributes")


def delete_domain(target: Target, domain: str) -> bool:
    """Stop offering ``domain``; False if it was not offered."""
    try:
        target.dynamodb().delete_item(
            TableName=target.table("DomainsTable"),
            Key={"domain": {"S": domain}},
            ConditionExpression="attribute_exists(#d)",
            ExpressionAttributeNames={"#d": "domain"},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True
