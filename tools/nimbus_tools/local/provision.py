"""Create the stack's data resources in an AWS emulator, as template.yaml defines them: for
``nimbus-local serve`` (its moto server) and tests under ``mock_aws``, so both see a deployed
stack's tables, TTLs, streams, queues, parameters, SES identity and default domain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import boto3
from botocore.exceptions import ClientError

from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.platform import clock
from nimbus_tools.template import (
    KMS_ALIAS_TYPE,
    KMS_KEY_TYPE,
    LOCAL_ACCOUNT_ID,
    LOCAL_REGION,
    QUEUE_TYPE,
    SSM_PARAMETER_TYPE,
    TABLE_TYPE,
    Template,
    TemplateError,
    local_key_id,
    parameter_string,
    parameter_values,
    queue_url,
    resolver,
    resources_of_type,
)

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient


# Queue properties that are also SQS queue attributes of the same name (the rest do not matter locally).
_QUEUE_ATTRIBUTES: tuple[str, ...] = ("DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod")
_QUEUE_ATTRIBUTES += ("ReceiveMessageWaitTimeSeconds", "VisibilityTimeout", "SqsManagedSseEnabled")


class TableDefinition(TypedDict):
    """How to create one table locally: ``create_table`` kwargs and the TTL attribute, if any."""

    create_table: dict[str, Any]
    ttl_attribute: str | None


def table_definitions(template: Template) -> dict[str, TableDefinition]:
    """Every DynamoDB table, by logical id, as kwargs for ``create_table`` plus its TTL attribute
    (named as the functions' environment names it, ``!Ref UsersTable``)."""
    names = resolver(template)
    definitions: dict[str, TableDefinition] = {}
    for logical_id, resource in resources_of_type(template, TABLE_TYPE).items():
        properties = names.resolve(resource.get("Properties") or {})
        if properties.get("BillingMode") != "PAY_PER_REQUEST":
            raise TemplateError(f"{logical_id}: only PAY_PER_REQUEST tables are supported locally")
        keys = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "LocalSecondaryIndexes")
        kwargs = {"TableName": names.resolve({"Ref": logical_id}), "BillingMode": "PAY_PER_REQUEST"}
        kwargs |= {key: properties[key] for key in keys if properties.get(key)}
        if properties.get("DeletionProtectionEnabled") in (True, "true"):  # as the deployed table
            kwargs["DeletionProtectionEnabled"] = True
        view = (properties.get("StreamSpecification") or {}).get("StreamViewType")
        if view:
            kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
        ttl = properties.get("TimeToLiveSpecification") or {}
        enabled = ttl.get("Enabled") in (True, "true", "True")
        definitions[logical_id] = {
            "create_table": kwargs,
            "ttl_attribute": ttl.get("AttributeName") if enabled else None,
        }
    return definitions


def queue_definitions(template: Template) -> dict[str, dict[str, Any]]:
    """Every SQS queue, by logical id, as kwargs for ``create_queue`` (QueueName, Attributes)."""
    names = resolver(template)
    definitions: dict[str, dict[str, Any]] = {}
    for logical_id, resource in resources_of_type(template, QUEUE_TYPE).items():
        properties = names.resolve(resource.get("Properties") or {})
        attributes = {
            key: parameter_string(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties
        }
        definitions[logical_id] = {
            "QueueName": names.physical_name(logical_id, resource),
            "Attributes": attributes,
        }
    return definitions


def ssm_parameter_definitions(
    template: Template, params: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Every AWS::SSM::Parameter, by logical id, as kwargs for ``put_parameter`` (Name, Value, Type,
    and Description and AllowedPattern where the template gives them)."""
    names = resolver(template, params)
    definitions: dict[str, dict[str, str]] = {}
    for logical_id, resource in resources_of_type(template, SSM_PARAMETER_TYPE).items():
        properties = {"Value": "", "Type": "String"} | (resource.get("Properties") or {})
        definition = {"Name": names.resolve_string({"Ref": logical_id}, logical_id)}
        for key in ("Value", "Type", "Description", "AllowedPattern"):
            if key in properties:
                definition[key] = names.resolve_string(properties[key], f"{logical_id}.{key}")
        definitions[logical_id] = definition
    return definitions


@dataclass(frozen=True)
class ProvisionedStack:
    """What was provisioned: logical id -> physical name."""

    tables: dict[str, str]
    parameters: dict[str, str]
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    keys: dict[str, str] = field(default_factory=dict)  # logical id -> KMS key ARN


def provision(
    session: boto3.Session,
    template: Template,
    params: Mapping[str, str] | None = None,
    *,
    endpoint_url: str | None = None,
) -> ProvisionedStack:
    """Create every table (TTL and stream where the template says), KMS key (and alias), SQS
    queue, SSM parameter, SES identity and the default domain with ``session``'s clients (at
    ``endpoint_url`` if given). Safe to call twice: what exists is left as it is, parameters are
    reset to their template value."""
    values = parameter_values(template, params)
    dynamodb = session.client("dynamodb", endpoint_url=endpoint_url)
    tables = create_tables(dynamodb, template)
    keys = create_keys(session.client("kms", endpoint_url=endpoint_url), template, params)
    sqs = session.client("sqs", endpoint_url=endpoint_url)
    queues = {}
    for logical_id, definition in queue_definitions(template).items():
        sqs.create_queue(**definition)
        # The URL the template's !Ref resolves to, whatever host the emulator answers with.
        queues[logical_id] = queue_url(definition["QueueName"])
    ssm = session.client("ssm", endpoint_url=endpoint_url)
    parameters = {}
    for logical_id, kwargs in ssm_parameter_definitions(template, params).items():
        ssm.put_parameter(**kwargs, Overwrite=True)  # type: ignore[arg-type]
        parameters[logical_id] = kwargs["Name"]
    if "SenderEmail" in values:  # a verified identity for SES v2 and v1 SendEmail
        try:
            session.client("sesv2", endpoint_url=endpoint_url).create_email_identity(
                EmailIdentity=values["SenderEmail"]
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "AlreadyExistsException":
                raise
        session.client("ses", endpoint_url=endpoint_url).verify_email_identity(
            EmailAddress=values["SenderEmail"]
        )
    if "DefaultDomain" in values and "DomainsTable" in tables:
        put_default_domain(dynamodb, tables["DomainsTable"], values["DefaultDomain"])
    return ProvisionedStack(tables=tables, parameters=parameters, queues=queues, keys=keys)


def create_keys(kms: Any, template: Template, params: Mapping[str, str] | None = None) -> dict[str, str]:
    """Create every KMS key of the template under its local id (rotation and key policy as the
    template says) and every alias; logical id -> key ARN. Keys that exist are left as they are."""
    from nimbus_tools.moto_internals import pin_kms_key_id  # moto's KMS models: imported late

    names = resolver(template, params)
    arns: dict[str, str] = {}
    for logical_id, resource in resources_of_type(template, KMS_KEY_TYPE).items():
        properties = names.resolve(resource.get("Properties") or {})
        wanted = local_key_id(logical_id)
        try:
            arns[logical_id] = kms.describe_key(KeyId=wanted)["KeyMetadata"]["Arn"]
            continue
        except ClientError as error:
            if error.response["Error"]["Code"] != "NotFoundException":
                raise
        created = kms.create_key(
            Description=str(properties.get("Description", "")),
            KeySpec=str(properties.get("KeySpec", "SYMMETRIC_DEFAULT")),
            KeyUsage=str(properties.get("KeyUsage", "ENCRYPT_DECRYPT")),
        )["KeyMetadata"]
        pin_kms_key_id(LOCAL_ACCOUNT_ID, LOCAL_REGION, created["KeyId"], wanted)
        if properties.get("EnableKeyRotation") in (True, "true"):
            kms.enable_key_rotation(KeyId=wanted)
        arns[logical_id] = kms.describe_key(KeyId=wanted)["KeyMetadata"]["Arn"]
    for resource in resources_of_type(template, KMS_ALIAS_TYPE).values():
        properties = names.resolve(resource.get("Properties") or {})
        try:
            kms.create_alias(AliasName=properties["AliasName"], TargetKeyId=properties["TargetKeyId"])
        except ClientError as error:
            if error.response["Error"]["Code"] != "AlreadyExistsException":
                raise
    return arns


def create_tables(dynamodb: DynamoDBClient, template: Template) -> dict[str, str]:
    """Create every table of the template and enable its TTL; logical id -> table name."""
    names: dict[str, str] = {}
    for logical_id, definition in table_definitions(template).items():
        name = names[logical_id] = definition["create_table"]["TableName"]
        try:
            dynamodb.create_table(**definition["create_table"])
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceInUseException":
                raise
        dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        ttl = definition["ttl_attribute"]
        if ttl and dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"].get(
            "TimeToLiveStatus"
        ) not in ("ENABLED", "ENABLING"):
            dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"AttributeName": ttl, "Enabled": True}
            )
    return names


def put_default_domain(dynamodb: DynamoDBClient, table: str, domain: str) -> None:
    """Offer ``domain`` (lower-cased, subdomains allowed) unless it is offered already."""
    domains = DynamoDomains(dynamodb, table)
    name = domain.strip().lower()
    if domains.get(name) is None:
        domains.put(name, subdomains=True, now=clock.iso(clock.now()))
