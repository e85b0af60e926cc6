"""What IAM authorizes: SDK calls as IAM (action, resource) requests, and the template's statements.

``requests_of(service, operation, params)`` turns one AWS SDK call into the IAM requests that AWS
evaluates for it (a transaction is authorized per item, on each item's table, with the item's own
action; a Query on an index is authorized on the index ARN). ``function_statements`` reads each
function's ``Policies`` from template.yaml, resolved as the local stack names things, and
``allows`` evaluates them as IAM does (explicit Deny wins; ``*`` and ``?`` wildcards; actions
case-insensitive). Anything this module does not understand raises, so a template or code change can
never be silently misjudged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nimbus_tools.template import (
    FUNCTION_TYPE,
    LOCAL_ACCOUNT_ID,
    LOCAL_REGION,
    Template,
    resolver,
    resources_of_type,
)

_PREFIX = f"{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}"


class IamModelError(ValueError):
    """A call or a policy this model does not know how to judge (teach it, do not skip it)."""


@dataclass(frozen=True, order=True, slots=True)
class IamRequest:
    """One action on one resource, as IAM authorizes it, with the condition keys the call sets."""

    action: str  # "dynamodb:PutItem"
    resource: str  # an ARN
    context: tuple[tuple[str, str], ...] = ()  # e.g. (("ses:FromAddress", "no-reply@..."),)


def table_arn(table: str) -> str:
    """The ARN of a DynamoDB table in the local account and region."""
    return f"arn:aws:dynamodb:{_PREFIX}:table/{table}"


def queue_arn(url: str) -> str:
    """The ARN of an SQS queue from its URL (``.../<account>/<name>``)."""
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{LOCAL_REGION}:{account}:{name}"


def identity_arn(identity: str) -> str:
    """The ARN of an SES identity (an email address or a domain)."""
    return f"arn:aws:ses:{_PREFIX}:identity/{identity}"


def parameter_arn(name: str) -> str:
    """The ARN of an SSM parameter (``/a/b`` -> ``parameter/a/b``, ``a`` -> ``parameter/a``)."""
    return f"arn:aws:ssm:{_PREFIX}:parameter{name if name.startswith('/') else '/' + name}"


# Operations on one table (or one of its indexes) named by TableName.
_SINGLE_TABLE = {
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "DescribeTable",
    "DescribeTimeToLive",
}
_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def requests_of(service: str, operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    """The IAM requests one SDK call makes."""
    if service == "dynamodb":
        return _dynamodb(operation, params)
    if service == "ssm":
        return _ssm(operation, params)
    if service in {"dynamodb-streams", "dynamodbstreams"}:  # botocore events spell it with the hyphen
        return _dynamodb_streams(operation, params)
    if service == "sesv2" and operation == "SendEmail":
        # SES authorizes sending on the identity that sends (the sender's address: the template
        # creates that email identity), with the sender as a condition key.
        sender = str(params["FromEmailAddress"])
        return [IamRequest("ses:SendEmail", identity_arn(sender), (("ses:FromAddress", sender),))]
    if service == "sqs" and operation == "SendMessage":
        return [IamRequest("sqs:SendMessage", queue_arn(str(params["QueueUrl"])))]
    if service == "kms":
        return _kms(operation, params)
    raise IamModelError(f"no IAM mapping for {service}:{operation}; add one to tests/iam.py")


def _dynamodb(operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    if operation in _SINGLE_TABLE:
        arn = table_arn(params["TableName"])
        if params.get("IndexName"):
            arn += f"/index/{params['IndexName']}"
        return [IamRequest(f"dynamodb:{operation}", arn)]
    if operation in {"BatchGetItem", "BatchWriteItem"}:
        return [IamRequest(f"dynamodb:{operation}", table_arn(t)) for t in params["RequestItems"]]
    if operation == "TransactWriteItems":
        found: list[IamRequest] = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            found.append(IamRequest(f"dynamodb:{_TRANSACT_WRITE[kind]}", table_arn(body["TableName"])))
        return found
    if operation == "TransactGetItems":
        return [
            IamRequest("dynamodb:GetItem", table_arn(i["Get"]["TableName"])) for i in params["TransactItems"]
        ]
    raise IamModelError(f"no IAM mapping for dynamodb:{operation}; add one to tests/iam.py")


def _dynamodb_streams(operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    """Stream reads (an event source mapping's, with its function's role), authorized on the stream
    under the ``dynamodb:`` prefix."""
    if operation in {"DescribeStream", "GetShardIterator"}:
        return [IamRequest(f"dynamodb:{operation}", str(params["StreamArn"]))]
    if operation == "GetRecords":
        # GetRecords names only its iterator. Real iterators are opaque; moto's begin with the
        # stream's ARN ("<stream arn>|1|<id>"), which is what IAM authorizes the call on.
        arn = str(params["ShardIterator"]).split("|", 1)[0]
        if not re.fullmatch(r"arn:aws:dynamodb:[^:]+:\d{12}:table/[^/]+/stream/[^/|]+", arn):
            raise IamModelError(f"cannot tell the stream of shard iterator {params['ShardIterator']!r}")
        return [IamRequest("dynamodb:GetRecords", arn)]
    raise IamModelError(f"no IAM mapping for dynamodbstreams:{operation}; add one to tests/iam.py")


def key_arn(key_id: str) -> str:
    """The ARN of a KMS key named by its ARN or its id (an alias names no key IAM can tell)."""
    if key_id.startswith("arn:") and ":key/" in key_id:
        return key_id
    if key_id.startswith("alias/") or ":alias/" in key_id:
        raise IamModelError(f"KMS call names alias {key_id!r}: IAM authorizes it on the key, name the key")
    return f"arn:aws:kms:{_PREFIX}:key/{key_id}"


def _kms(operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    """Data keys made and opened: authorized on the key, with the call's encryption context as the
    ``kms:EncryptionContext:<key>`` condition keys."""
    if operation not in {"GenerateDataKey", "Decrypt"}:
        raise IamModelError(f"no IAM mapping for kms:{operation}; add one to tests/iam.py")
    if not params.get("KeyId"):
        raise IamModelError(f"kms:{operation} without KeyId: name the key, so IAM can be judged on it")
    context = tuple(
        sorted(
            (f"kms:EncryptionContext:{k}", str(v)) for k, v in (params.get("EncryptionContext") or {}).items()
        )
    )
    return [IamRequest(f"kms:{operation}", key_arn(str(params["KeyId"])), context)]


def _ssm(operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    if operation == "GetParameters":
        return [IamRequest("ssm:GetParameters", parameter_arn(n)) for n in params["Names"]]
    if operation in {"GetParameter", "PutParameter"}:
        return [IamRequest(f"ssm:{operation}", parameter_arn(params["Name"]))]
    if operation == "GetParametersByPath":
        return [IamRequest("ssm:GetParametersByPath", parameter_arn(params["Path"]))]
    raise IamModelError(f"no IAM mapping for ssm:{operation}; add one to tests/iam.py")


# ---------------------------------------------------------------------------------------------- policies


@dataclass(frozen=True, slots=True)
class Statement:
    """One resolved IAM statement of a function."""

    sid: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    # StringEquals conditions: every key must be set by the request, to one of the values.
    conditions: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def matches(self, request: IamRequest) -> bool:
        """Whether this statement names ``request`` (whatever its effect)."""
        context = dict(request.context)
        return (
            any(_glob(a, request.action, case=False) for a in self.actions)
            and any(_glob(r, request.resource, case=True) for r in self.resources)
            and all(context.get(key) in values for key, values in self.conditions)
        )

    def grants(self) -> list[tuple[str, str]]:
        """Every (action, resource pattern) pair this statement names."""
        return [(a, r) for a in self.actions for r in self.resources]


def _glob(pattern: str, value: str, *, case: bool) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def glob_matches(pattern: str, value: str) -> bool:
    """IAM's resource matching: ``*`` any run of characters, ``?`` one character, case-sensitive."""
    return _glob(pattern, value, case=True)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise IamModelError(f"{where}: expected strings, got {value!r}")
    return tuple(values)


def function_statements(
    template: Template, params: Mapping[str, str] | None = None
) -> dict[str, list[Statement]]:
    """Each function's inline policy statements, by logical id, resolved to local ARNs."""
    names = resolver(template, params)
    found: dict[str, list[Statement]] = {}
    for logical_id, resource in resources_of_type(template, FUNCTION_TYPE).items():
        properties = resource.get("Properties") or {}
        if "Role" in properties:
            if "Policies" in properties:
                raise IamModelError(f"{logical_id}: SAM ignores Policies beside a Role")
            policies = _role_policies(template, logical_id, properties["Role"])
        else:
            policies = properties.get("Policies") or []
        statements: list[Statement] = []
        for index, policy in enumerate(names.resolve(policies)):
            if not (isinstance(policy, dict) and set(policy) == {"Statement"}):
                raise IamModelError(f"{logical_id} policy {index}: only inline Statement lists are modelled")
            for number, raw in enumerate(policy["Statement"]):
                where = f"{logical_id} statement {raw.get('Sid', number)}"
                unknown = set(raw) - {"Sid", "Effect", "Action", "Resource", "Condition"}
                if unknown:
                    raise IamModelError(f"{where}: {sorted(unknown)} not modelled")
                statements.append(
                    Statement(
                        sid=str(raw.get("Sid", number)),
                        effect=raw["Effect"],
                        actions=_strings(raw["Action"], where),
                        resources=_strings(raw["Resource"], where),
                        conditions=_conditions(raw.get("Condition") or {}, where),
                    )
                )
        found[logical_id] = statements
    return found


def _role_policies(template: Template, function: str, role: Any) -> list[dict[str, Any]]:
    """The inline policies of a hand-written role (``Role: !GetAtt <X>.Arn``), as SAM ``Policies``:
    a role that Lambda alone may assume, with no managed policy (whose contents this model cannot
    see) and only inline ``Allow``/``Deny`` statements."""
    arg = role.get("Fn::GetAtt") if isinstance(role, dict) else None
    if not (isinstance(arg, list) and len(arg) == 2 and arg[1] == "Arn"):
        raise IamModelError(f"{function}: only Role: !GetAtt <role>.Arn is modelled, got {role!r}")
    resource = template["Resources"].get(arg[0]) or {}
    if resource.get("Type") != "AWS::IAM::Role":
        raise IamModelError(f"{function}: {arg[0]} is not an AWS::IAM::Role of this template")
    properties = resource.get("Properties") or {}
    unknown = set(properties) - {"Description", "AssumeRolePolicyDocument", "Policies"}
    if unknown:  # ManagedPolicyArns, PermissionsBoundary, ...: grants this model cannot read
        raise IamModelError(f"{arg[0]}: {sorted(unknown)} not modelled")
    lambda_only = {
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": "sts:AssumeRole",
    }
    if properties["AssumeRolePolicyDocument"]["Statement"] != [lambda_only]:
        raise IamModelError(f"{arg[0]}: only a role that Lambda alone assumes is modelled")
    policies = properties.get("Policies") or []
    return [{"Statement": policy["PolicyDocument"]["Statement"]} for policy in policies]


_KNOWN_CONDITION_KEYS = frozenset(
    {"ses:FromAddress", "kms:EncryptionContext:purpose", "kms:EncryptionContext:stage"}
)


def _conditions(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if set(raw) - {"StringEquals"}:
        raise IamModelError(
            f"{where}: condition operators {sorted(set(raw) - {'StringEquals'})} not modelled"
        )
    equals = raw.get("StringEquals") or {}
    unknown = set(equals) - _KNOWN_CONDITION_KEYS
    if unknown:
        raise IamModelError(f"{where}: condition keys {sorted(unknown)} not modelled")
    return tuple((key, _strings(value, where)) for key, value in sorted(equals.items()))


def allows(statements: list[Statement], request: IamRequest) -> bool:
    """IAM's decision for ``request`` under ``statements``: an Allow names it and no Deny does."""
    named = [s for s in statements if s.matches(request)]
    return any(s.effect == "Allow" for s in named) and not any(s.effect == "Deny" for s in named)
