"""Read template.yaml (the SAM template) and resolve what local tools need from it.

The template is the single source of truth for tables, parameters, functions and routes; the local
API, the provisioning code and the tests all derive their view of the stack from here instead of
repeating names. Only the features the template actually uses are read (Ref, Fn::Sub in its string
form, Fn::GetAtt .Arn, Fn::Join, AWS::NoValue, the pseudo parameters it names); anything else raises
:class:`TemplateError` so a template change cannot be silently misread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE_PATH = REPO_ROOT / "template.yaml"

# moto's default account; local ARNs and the event's accountId use it so they look consistent.
LOCAL_ACCOUNT_ID = "123456789012"
LOCAL_REGION = "us-east-1"

TABLE_TYPE = "AWS::DynamoDB::Table"
SSM_PARAMETER_TYPE = "AWS::SSM::Parameter"
FUNCTION_TYPE = "AWS::Serverless::Function"
QUEUE_TYPE = "AWS::SQS::Queue"

Template = dict[str, Any]


class TemplateError(ValueError):
    """The template (or a parameter override) cannot be read or resolved for local use."""


# ---------------------------------------------------------------------------------------------- loading


class CloudFormationLoader(yaml.SafeLoader):
    """A SafeLoader that reads CloudFormation short-form tags (``!Ref X``) as long-form dicts."""


def _long_form_key(tag: str) -> str:
    name = tag.lstrip("!")
    # Ref and Condition have no "Fn::" prefix in the long form.
    return name if name in ("Ref", "Condition") else f"Fn::{name}"


def _construct_intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    key = _long_form_key(tag_suffix)
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        # The short GetAtt form is "Resource.Attribute"; the long form is a two-item list.
        if key == "Fn::GetAtt" and isinstance(value, str):
            resource, _, attribute = value.partition(".")
            value = [resource, attribute]
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:  # pragma: no cover - yaml has only these three node kinds
        raise TemplateError(f"cannot read tag {tag_suffix!r}")
    return {key: value}


# "!" prefix: every short-form tag (!Ref, !Sub, !GetAtt, !Join, !If, !Select, ...) goes through one
# constructor, so a tag the resolver does not support still loads and fails with a clear message later.
CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_template(path: Path | str | None = None) -> Template:
    """Load a SAM/CloudFormation template; ``path`` defaults to the repository's template.yaml."""
    template_path = Path(path) if path is not None else DEFAULT_TEMPLATE_PATH
    with template_path.open(encoding="utf-8") as stream:
        loaded = yaml.load(stream, Loader=CloudFormationLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(loaded, dict) or not isinstance(loaded.get("Resources"), dict):
        raise TemplateError(f"{template_path}: not a CloudFormation template (no Resources)")
    return loaded


def resources_of_type(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    """The resources of one type, by logical id, in template order."""
    resources: dict[str, dict[str, Any]] = template["Resources"]
    return {lid: res for lid, res in resources.items() if res.get("Type") == resource_type}


# ---------------------------------------------------------------------------------------------- parameters


def parameter_values(template: Template, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every template parameter's value as a string: its Default, replaced by ``overrides``.

    Overrides are checked like CloudFormation checks them (AllowedValues, AllowedPattern), and an
    unknown name is refused, because a mistyped ``--param`` would otherwise be silently ignored.
    """
    declared: dict[str, dict[str, Any]] = template.get("Parameters") or {}
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise TemplateError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(declared)}")
    values: dict[str, str] = {}
    for name, spec in declared.items():
        if name in overrides:
            value = overrides[name]
            _check_allowed(name, spec, value)
            values[name] = value
        elif "Default" in spec:
            values[name] = _parameter_string(spec["Default"])
    return values


def _parameter_string(value: object) -> str:
    # CloudFormation parameters are strings; YAML reads `Default: 24` as an int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_parameter_string(v) for v in value)
    return str(value)


def _check_allowed(name: str, spec: Mapping[str, Any], value: str) -> None:
    allowed = spec.get("AllowedValues")
    if allowed is not None and value not in [_parameter_string(v) for v in allowed]:
        raise TemplateError(f"parameter {name}={value!r} is not one of {allowed}")
    pattern = spec.get("AllowedPattern")
    if pattern is not None and re.fullmatch(pattern, value) is None:
        raise TemplateError(f"parameter {name}={value!r} does not match {pattern}")


# ---------------------------------------------------------------------------------------------- intrinsics

_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class _NoValue:
    """``!Ref AWS::NoValue``: the key or list item holding it disappears, as in CloudFormation."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()


@dataclass
class Resolver:
    """Resolves intrinsic functions the way the local stack names things.

    Tables are named by their logical id (or their TableName), SSM parameters by their resolved
    Name, and ARNs are fakes in moto's default account, which is all local tools need.
    """

    template: Template
    parameters: dict[str, str]
    region: str = LOCAL_REGION
    account_id: str = LOCAL_ACCOUNT_ID
    _resolving: set[str] = field(default_factory=set)

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function in it replaced by its local value."""
        if isinstance(value, list):
            return [r for r in (self.resolve(v) for v in value) if r is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key in {"Ref", "Condition"} or key.startswith("Fn::"):
                return self._intrinsic(key, arg)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def resolve_string(self, value: Any, where: str) -> str:
        """Resolve ``value`` and require a scalar, returned as a string (environment variables)."""
        resolved = self.resolve(value)
        if isinstance(resolved, (dict, list)):
            raise TemplateError(f"{where}: expected a string, got {resolved!r}")
        return _parameter_string(resolved)

    def _intrinsic(self, key: str, arg: Any) -> Any:
        handlers = {"Ref": self._ref, "Fn::Sub": self._sub, "Fn::GetAtt": self._get_att}
        handlers["Fn::Join"] = self._join
        handler = handlers.get(key)
        if handler is None:
            raise TemplateError(f"intrinsic function {key} is not supported locally")
        return handler(arg)

    # --- Ref / GetAtt

    def _ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise TemplateError(f"Ref needs a name, got {name!r}")
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        if name == "AWS::NoValue":
            return NO_VALUE
        declared = self.template.get("Parameters") or {}
        if name in declared:
            if name not in self.parameters:
                raise TemplateError(f"parameter {name} has no Default; pass it with --param {name}=...")
            if declared[name].get("Type") == "CommaDelimitedList":
                return [item.strip() for item in self.parameters[name].split(",")]
            return self.parameters[name]
        resource = self.template["Resources"].get(name)
        if resource is None:
            raise TemplateError(f"Ref to unknown parameter or resource {name!r}")
        if resource.get("Type") == QUEUE_TYPE:
            # An SQS queue's Ref is its URL; the emulator finds the queue by the URL's last part.
            return queue_url(self.physical_name(name, resource), self.region, self.account_id)
        return self.physical_name(name, resource)

    def physical_name(self, logical_id: str, resource: Mapping[str, Any]) -> str:
        """The name a resource gets locally: its template name, else one made from the stack's."""
        resource_type = resource.get("Type")
        properties = resource.get("Properties") or {}
        if resource_type == TABLE_TYPE:
            return self._named(logical_id, properties.get("TableName"), logical_id)
        if resource_type == QUEUE_TYPE:
            return self._named(logical_id, properties.get("QueueName"), logical_id)
        if resource_type == SSM_PARAMETER_TYPE:
            if "Name" not in properties:
                raise TemplateError(f"{logical_id}: an SSM parameter needs a Name to be used locally")
            return self._named(logical_id, properties["Name"], logical_id)
        raise TemplateError(f"Ref to {logical_id} ({resource_type}) is not supported locally")

    def _named(self, logical_id: str, name: Any, default: str) -> str:
        if name is None:
            return default
        # Guard against a Name that refers back to itself through Sub.
        if logical_id in self._resolving:
            raise TemplateError(f"{logical_id}: circular reference")
        self._resolving.add(logical_id)
        try:
            return self.resolve_string(name, f"{logical_id} name")
        finally:
            self._resolving.discard(logical_id)

    def _get_att(self, arg: Any) -> str:
        if not (isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg)):
            raise TemplateError(f"Fn::GetAtt needs [Resource, Attribute], got {arg!r}")
        logical_id, attribute = arg
        resource = self.template["Resources"].get(logical_id)
        if resource is None:
            raise TemplateError(f"Fn::GetAtt to unknown resource {logical_id!r}")
        if attribute != "Arn":
            raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute}: only .Arn is supported locally")
        return self._fake_arn(logical_id, resource)

    def _fake_arn(self, logical_id: str, resource: Mapping[str, Any]) -> str:
        prefix = f"arn:aws:{{}}:{self.region}:{self.account_id}"
        resource_type = resource.get("Type")
        if resource_type == TABLE_TYPE:
            return f"{prefix.format('dynamodb')}:table/{self.physical_name(logical_id, resource)}"
        if resource_type == SSM_PARAMETER_TYPE:
            return f"{prefix.format('ssm')}:parameter{self.physical_name(logical_id, resource)}"
        if resource_type == QUEUE_TYPE:
            return f"{prefix.format('sqs')}:{self.physical_name(logical_id, resource)}"
        if resource_type == "AWS::Logs::LogGroup":
            return f"{prefix.format('logs')}:log-group:{logical_id}:*"
        raise TemplateError(f"Fn::GetAtt {logical_id}.Arn ({resource_type}) is not supported locally")

    # --- Sub / Join

    def _sub(self, arg: Any) -> str:
        if not isinstance(arg, str):
            raise TemplateError(f"Fn::Sub with variables is not supported locally, got {arg!r}")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if "." in name and not name.startswith("AWS::"):
                resource, _, attribute = name.partition(".")
                return self._get_att([resource, attribute])
            value = self._ref(name)
            if isinstance(value, list):
                raise TemplateError(f"Fn::Sub cannot substitute list parameter {name}")
            return _parameter_string(value)

        return _SUB_VARIABLE.sub(replace, arg)

    def _join(self, arg: Any) -> str:
        if not (isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str)):
            raise TemplateError(f"Fn::Join needs [delimiter, [values]], got {arg!r}")
        values = self.resolve(arg[1])
        if not isinstance(values, list):
            raise TemplateError(f"Fn::Join needs a list of values, got {values!r}")
        return arg[0].join(_parameter_string(v) for v in values)


def resolver(template: Template, params: Mapping[str, str] | None = None) -> Resolver:
    """A :class:`Resolver` over the template's parameter defaults with ``params`` overriding them."""
    return Resolver(template, parameter_values(template, params))


# ---------------------------------------------------------------------------------------------- tables


class TableDefinition(TypedDict):
    """How to create one table locally: ``create_table`` kwargs and the TTL attribute, if any."""

    create_table: dict[str, Any]
    ttl_attribute: str | None


def table_definitions(template: Template) -> dict[str, TableDefinition]:
    """Every DynamoDB table, by logical id, as kwargs for ``create_table`` plus its TTL attribute.

    The local table name is the logical id (or the table's TableName, if the template sets one), so
    the names in the functions' environment (``!Ref UsersTable``) match the tables created.
    """
    names = Resolver(template, parameter_values(template))
    definitions: dict[str, TableDefinition] = {}
    for logical_id, resource in resources_of_type(template, TABLE_TYPE).items():
        properties = names.resolve(resource.get("Properties") or {})
        if properties.get("BillingMode") != "PAY_PER_REQUEST":
            raise TemplateError(f"{logical_id}: only PAY_PER_REQUEST tables are supported locally")
        kwargs: dict[str, Any] = {
            "TableName": names.resolve({"Ref": logical_id}),
            "AttributeDefinitions": properties["AttributeDefinitions"],
            "KeySchema": properties["KeySchema"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if properties.get(key):
                kwargs[key] = properties[key]
        stream = properties.get("StreamSpecification") or {}
        if stream.get("StreamViewType"):
            kwargs["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": stream["StreamViewType"],
            }
        ttl = properties.get("TimeToLiveSpecification") or {}
        ttl_enabled = ttl.get("Enabled") in (True, "true", "True")
        definitions[logical_id] = {
            "create_table": kwargs,
            "ttl_attribute": ttl.get("AttributeName") if ttl_enabled else None,
        }
    return definitions


# ---------------------------------------------------------------------------------------------- SQS


def queue_url(name: str, region: str = LOCAL_REGION, account_id: str = LOCAL_ACCOUNT_ID) -> str:
    """The URL of queue ``name`` as SQS spells it (moto finds a queue by the URL's last part)."""
    return f"https://sqs.{region}.amazonaws.com/{account_id}/{name}"


class QueueDefinition(TypedDict):
    """How to create one queue locally: ``create_queue`` kwargs."""

    QueueName: str
    Attributes: dict[str, str]


# Queue properties that are also SQS queue attributes of the same name (the rest do not matter locally).
_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "SqsManagedSseEnabled",
)


def queue_definitions(template: Template) -> dict[str, QueueDefinition]:
    """Every SQS queue, by logical id, as kwargs for ``create_queue``."""
    names = Resolver(template, parameter_values(template))
    definitions: dict[str, QueueDefinition] = {}
    for logical_id, resource in resources_of_type(template, QUEUE_TYPE).items():
        properties = names.resolve(resource.get("Properties") or {})
        definitions[logical_id] = {
            "QueueName": names.physical_name(logical_id, resource),
            "Attributes": {
                key: _parameter_string(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties
            },
        }
    return definitions


# ---------------------------------------------------------------------------------------------- SSM


class SsmParameterDefinition(TypedDict):
    """One AWS::SSM::Parameter resolved for local use."""

    logical_id: str
    name: str
    value: str
    type: str
    description: NotRequired[str]
    allowed_pattern: NotRequired[str]


def ssm_parameter_definitions(
    template: Template, params: Mapping[str, str] | None = None
) -> list[SsmParameterDefinition]:
    """Every AWS::SSM::Parameter with its resolved name, template value, type and description."""
    names = resolver(template, params)
    definitions: list[SsmParameterDefinition] = []
    for logical_id, resource in resources_of_type(template, SSM_PARAMETER_TYPE).items():
        properties = resource.get("Properties") or {}
        definition: SsmParameterDefinition = {
            "logical_id": logical_id,
            "name": names.resolve_string({"Ref": logical_id}, logical_id),
            "value": names.resolve_string(properties.get("Value", ""), f"{logical_id}.Value"),
            "type": names.resolve_string(properties.get("Type", "String"), f"{logical_id}.Type"),
        }
        if "Description" in properties:
            definition["description"] = names.resolve_string(properties["Description"], logical_id)
        if "AllowedPattern" in properties:
            definition["allowed_pattern"] = names.resolve_string(properties["AllowedPattern"], logical_id)
        definitions.append(definition)
    return definitions


def ssm_parameters(template: Template, params: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every SSM parameter's resolved name -> its template Value."""
    return {d["name"]: d["value"] for d in ssm_parameter_definitions(template, params)}


def ssm_parameter_names(template: Template, params: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every SSM parameter's logical id -> its resolved name (e.g. ``/nimbus/dev/killswitches``)."""
    return {d["logical_id"]: d["name"] for d in ssm_parameter_definitions(template, params)}


# ---------------------------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class HttpRoute:
    """One HttpApi event of a function: ``Method`` (upper-case, or ANY) and ``Path`` (or $default)."""

    method: str
    path: str

    @property
    def route_key(self) -> str:
        """The API Gateway route key: ``"POST /login"``, ``"ANY /x"`` or ``"$default"``."""
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class FunctionSpec:
    """A serverless function as the local API runs it."""

    logical_id: str
    handler: str
    code_uri: str
    environment: dict[str, str]
    routes: tuple[HttpRoute, ...]
    memory_size: int = 128
    timeout: int = 3

    @property
    def handler_module(self) -> str:
        """The module part of the handler string (``auth_api.handler``)."""
        return self.handler.rpartition(".")[0]

    @property
    def handler_function(self) -> str:
        """The function part of the handler string (``lambda_handler``)."""
        return self.handler.rpartition(".")[2]


def function_specs(template: Template, params: Mapping[str, str] | None = None) -> list[FunctionSpec]:
    """Every AWS::Serverless::Function with its handler, code, resolved environment and routes.

    Globals.Function supplies defaults (environment variables are merged, the function's winning),
    as SAM does.
    """
    names = resolver(template, params)
    globals_ = (template.get("Globals") or {}).get("Function") or {}
    global_env = ((globals_.get("Environment") or {}).get("Variables")) or {}
    specs: list[FunctionSpec] = []
    for logical_id, resource in resources_of_type(template, FUNCTION_TYPE).items():
        properties = resource.get("Properties") or {}

        def setting(key: str, default: Any, props: Mapping[str, Any] = properties) -> Any:
            return props.get(key, globals_.get(key, default))

        handler = names.resolve_string(setting("Handler", None), f"{logical_id}.Handler")
        if "." not in handler:
            raise TemplateError(f"{logical_id}: Handler {handler!r} is not module.function")
        own_env = ((properties.get("Environment") or {}).get("Variables")) or {}
        environment = {
            key: names.resolve_string(value, f"{logical_id} environment {key}")
            for key, value in {**global_env, **own_env}.items()
            if names.resolve(value) is not NO_VALUE
        }
        specs.append(
            FunctionSpec(
                logical_id=logical_id,
                handler=handler,
                code_uri=names.resolve_string(setting("CodeUri", "."), f"{logical_id}.CodeUri"),
                environment=environment,
                routes=tuple(_http_routes(logical_id, properties.get("Events") or {}, names)),
                memory_size=int(names.resolve_string(setting("MemorySize", 128), logical_id)),
                timeout=int(names.resolve_string(setting("Timeout", 3), logical_id)),
            )
        )
    return specs


def _http_routes(logical_id: str, events: Mapping[str, Any], names: Resolver) -> list[HttpRoute]:
    routes: list[HttpRoute] = []
    for event_name, event in events.items():
        if event.get("Type") != "HttpApi":
            continue
        properties = event.get("Properties") or {}
        # An HttpApi event without Method/Path is SAM's catch-all: ANY on $default.
        method = names.resolve_string(properties.get("Method", "ANY"), f"{logical_id}.{event_name}").upper()
        path = names.resolve_string(properties.get("Path", "$default"), f"{logical_id}.{event_name}")
        routes.append(HttpRoute(method=method, path=path))
    return routes


def http_api_cors(template: Template, params: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The resolved CorsConfiguration of the template's (first) HttpApi, or None without one."""
    for resource in resources_of_type(template, "AWS::Serverless::HttpApi").values():
        cors = (resource.get("Properties") or {}).get("CorsConfiguration")
        if cors:
            resolved: dict[str, Any] = resolver(template, params).resolve(cors)
            return resolved
    return None


# ---------------------------------------------------------------------------------------------- streams


@dataclass(frozen=True)
class StreamSubscription:
    """A function's DynamoDB event: the table whose stream feeds it and how Lambda polls it."""

    function: str
    event_name: str
    table: str  # logical id of the table
    batch_size: int = 100
    starting_position: str = "LATEST"
    filter_patterns: tuple[dict[str, Any], ...] = ()
    report_batch_item_failures: bool = False
    maximum_retry_attempts: int = -1  # -1: until the record expires, as Lambda's default
    bisect_on_error: bool = False
    on_failure_queue: str | None = None  # logical id of the OnFailure SQS destination


def _logical_id_of(value: Any, attribute: str, where: str) -> str:
    """``X`` from ``!GetAtt X.<attribute>`` (the only form the local stack can follow)."""
    arg = value.get("Fn::GetAtt") if isinstance(value, dict) else None
    if isinstance(arg, list) and len(arg) == 2 and arg[1] == attribute and isinstance(arg[0], str):
        return arg[0]
    raise TemplateError(f"{where}: only !GetAtt <Resource>.{attribute} is supported locally, got {value!r}")


def stream_subscriptions(template: Template) -> list[StreamSubscription]:
    """Every DynamoDB event of every function, in template order."""
    names = Resolver(template, parameter_values(template))
    subscriptions: list[StreamSubscription] = []
    for function, resource in resources_of_type(template, FUNCTION_TYPE).items():
        for event_name, event in ((resource.get("Properties") or {}).get("Events") or {}).items():
            if event.get("Type") != "DynamoDB":
                continue
            where = f"{function}.Events.{event_name}"
            raw = event.get("Properties") or {}
            table = _logical_id_of(raw.get("Stream"), "StreamArn", f"{where}.Stream")
            if table not in resources_of_type(template, TABLE_TYPE):
                raise TemplateError(f"{where}: {table} is not a DynamoDB table of this template")
            properties = names.resolve(
                {k: v for k, v in raw.items() if k not in ("Stream", "DestinationConfig")}
            )
            on_failure = ((raw.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            patterns = []
            for entry in (properties.get("FilterCriteria") or {}).get("Filters") or []:
                try:
                    patterns.append(json.loads(entry["Pattern"]))
                except (KeyError, TypeError, ValueError) as error:
                    raise TemplateError(f"{where}: unreadable filter pattern {entry!r}") from error
            subscriptions.append(
                StreamSubscription(
                    function=function,
                    event_name=event_name,
                    table=table,
                    batch_size=int(properties.get("BatchSize", 100)),
                    starting_position=str(properties.get("StartingPosition", "LATEST")),
                    filter_patterns=tuple(patterns),
                    report_batch_item_failures="ReportBatchItemFailures"
                    in (properties.get("FunctionResponseTypes") or []),
                    maximum_retry_attempts=int(properties.get("MaximumRetryAttempts", -1)),
                    bisect_on_error=properties.get("BisectBatchOnFunctionError") in (True, "true", "True"),
                    on_failure_queue=(
                        _logical_id_of(on_failure, "Arn", f"{where}.DestinationConfig")
                        if on_failure is not None
                        else None
                    ),
                )
            )
    return subscriptions
