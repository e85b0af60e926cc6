"""Create the stack's data resources in an AWS emulator, from template.yaml.

Used by ``nimbus-local serve`` (against the in-process moto server) and by tests under moto's
``mock_aws`` (a plain ``boto3.Session`` with no endpoint), so both see the same tables, TTLs,
parameters, SES identity and default domain as a deployed stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import ClientError

from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.platform import clock
from nimbus_tools.template import (
    Template,
    parameter_values,
    queue_definitions,
    queue_url,
    ssm_parameter_definitions,
    table_definitions,
)

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_sesv2 import SESV2Client
    from types_boto3_sqs import SQSClient
    from types_boto3_ssm import SSMClient

DOMAINS_TABLE = "DomainsTable"


@dataclass(frozen=True)
class AwsClients:
    """The clients provisioning needs. ``ses`` is SES v1 (no type stubs are installed for it)."""

    dynamodb: DynamoDBClient
    ssm: SSMClient
    sesv2: SESV2Client
    ses: Any
    sqs: SQSClient | None = None  # without it, no queue is created


def clients_from_session(session: boto3.Session, endpoint_url: str | None = None) -> AwsClients:
    """Clients from ``session``, pointed at ``endpoint_url`` when given (the local emulator)."""
    return AwsClients(
        dynamodb=session.client("dynamodb", endpoint_url=endpoint_url),
        ssm=session.client("ssm", endpoint_url=endpoint_url),
        sesv2=session.client("sesv2", endpoint_url=endpoint_url),
        ses=session.client("ses", endpoint_url=endpoint_url),
        sqs=session.client("sqs", endpoint_url=endpoint_url),
    )


@dataclass(frozen=True)
class ProvisionedStack:
    """What was provisioned: logical id -> physical name."""

    tables: dict[str, str]
    parameters: dict[str, str]
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL


def provision(
    target: boto3.Session | AwsClients, template: Template, params: Mapping[str, str] | None = None
) -> ProvisionedStack:
    """Create every table (TTL and stream where the template says), SQS queue, SSM parameter, SES
    identity and the default domain.

    Safe to call twice: existing tables, identities and the domain item are left as they are,
    parameters are reset to their template value.
    """
    clients = target if isinstance(target, AwsClients) else clients_from_session(target)
    values = parameter_values(template, params)
    tables = create_tables(clients.dynamodb, template)
    queues = create_queues(clients.sqs, template) if clients.sqs is not None else {}
    parameters = put_parameters(clients.ssm, template, params)
    if "SenderEmail" in values:
        verify_sender(clients, values["SenderEmail"])
    if "DefaultDomain" in values and DOMAINS_TABLE in tables:
        put_default_domain(clients.dynamodb, tables[DOMAINS_TABLE], values["DefaultDomain"])
    return ProvisionedStack(tables=tables, parameters=parameters, queues=queues)


def create_tables(dynamodb: DynamoDBClient, template: Template) -> dict[str, str]:
    """Create every table of the template and enable its TTL; logical id -> table name."""
    names: dict[str, str] = {}
    for logical_id, definition in table_definitions(template).items():
        kwargs = definition["create_table"]
        try:
            dynamodb.create_table(**kwargs)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceInUseException":
                raise
        dynamodb.get_waiter("table_exists").wait(
            TableName=kwargs["TableName"], WaiterConfig={"Delay": 1, "MaxAttempts": 30}
        )
        if definition["ttl_attribute"]:
            _enable_ttl(dynamodb, kwargs["TableName"], definition["ttl_attribute"])
        names[logical_id] = kwargs["TableName"]
    return names


def create_queues(sqs: SQSClient, template: Template) -> dict[str, str]:
    """Create every SQS queue of the template (again: no-op); logical id -> the URL functions use.

    The URL is the one the template's ``!Ref`` resolves to locally, so it matches the functions'
    environment whatever host the emulator answers with.
    """
    urls: dict[str, str] = {}
    for logical_id, definition in queue_definitions(template).items():
        sqs.create_queue(QueueName=definition["QueueName"], Attributes=definition["Attributes"])  # type: ignore[arg-type]
        urls[logical_id] = queue_url(definition["QueueName"])
    return urls


def _enable_ttl(dynamodb: DynamoDBClient, table: str, attribute: str) -> None:
    current = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        return
    dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"AttributeName": attribute, "Enabled": True}
    )


def put_parameters(
    ssm: SSMClient, template: Template, params: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Put every SSM parameter with its template Value; logical id -> parameter name."""
    names: dict[str, str] = {}
    for definition in ssm_parameter_definitions(template, params):
        kwargs: dict[str, Any] = {
            "Name": definition["name"],
            "Value": definition["value"],
            "Type": definition["type"],
            "Overwrite": True,
        }
        if "description" in definition:
            kwargs["Description"] = definition["description"]
        if "allowed_pattern" in definition:
            kwargs["AllowedPattern"] = definition["allowed_pattern"]
        ssm.put_parameter(**kwargs)
        names[definition["logical_id"]] = definition["name"]
    return names


def verify_sender(clients: AwsClients, sender: str) -> None:
    """Make ``sender`` a verified identity for SES v2 and v1 SendEmail."""
    try:
        clients.sesv2.create_email_identity(EmailIdentity=sender)
    except ClientError as error:
        if error.response["Error"]["Code"] != "AlreadyExistsException":
            raise
    clients.ses.verify_email_identity(EmailAddress=sender)


def put_default_domain(dynamodb: DynamoDBClient, table: str, domain: str) -> None:
    """Offer ``domain`` (lower-cased, subdomains allowed) unless it is offered already."""
    domains = DynamoDomains(dynamodb, table)
    name = domain.strip().lower()
    if domains.get(name) is None:
        domains.put(name, subdomains=True, now=clock.iso(clock.now()))
