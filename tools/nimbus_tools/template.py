"""Read template.yaml (the SAM template), the one source of tables, parameters, functions and
routes, and resolve what local tools need from it. Only the features it uses are read (Ref, Fn::Sub
in its string form, Fn::GetAtt .Arn, Fn::Join, Fn::If on the template's Conditions (Fn::Equals,
Fn::Not, Fn::And, Fn::Or, Condition), AWS::NoValue, the pseudo parameters it names);
anything else raises :class:`TemplateError`, so a template change cannot be silently misread."""

from __future__ import annotations

import copy
import hashlib
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
KMS_KEY_TYPE = "AWS::KMS::Key"
KMS_ALIAS_TYPE = "AWS::KMS::Alias"
# Resource type -> (the property naming it, its ARN's service and resource part).
_NAMED = {
    TABLE_TYPE: ("TableName", "dynamodb", "table/{}"),
    QUEUE_TYPE: ("QueueName", "sqs", "{}"),
    SSM_PARAMETER_TYPE: ("Name", "ssm", "parameter{}"),
}
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")

Template = dict[str, Any]


class TemplateError(ValueError):
    """The template (or a parameter override) cannot be read or resolved for local use."""


# libyaml's parser where PyYAML was built with it (its wheels are): the pure-Python one takes eight
# times as long over template.yaml, which the tools, the local API and many tests read.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CloudFormationLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A SafeLoader that reads CloudFormation short-form tags (``!Ref X``) as long-form dicts."""


def _construct_intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = tag_suffix.lstrip("!")
    key = name if name in ("Ref", "Condition") else f"Fn::{name}"  # no "Fn::" prefix for these two
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if key == "Fn::GetAtt" and isinstance(value, str):  # "Resource.Attribute": a two-item list
            value = list(value.partition(".")[::2])
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {key: value}


# Every short-form tag goes through one constructor, so one the resolver does not support still
# loads and fails with a clear message later.
CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


# Templates parsed in this process, by their text's digest: a process reads template.yaml many
# times (every tool and test that resolves something of it).
_parsed: dict[bytes, Template] = {}
_parsed_lock = threading.Lock()
_PARSED_KEPT = 16  # the oldest is forgotten past this (tests write templates of their own)


def load_template(path: Path | str | None = None) -> Template:
    """Load a SAM/CloudFormation template; ``path`` defaults to the repository's template.yaml.

    Each call returns a template of its own (a caller may change it); a text parsed before is not
    parsed again."""
    template_path = Path(path) if path is not None else DEFAULT_TEMPLATE_PATH
    text = template_path.read_bytes()
    digest = hashlib.sha256(text).digest()
    with _parsed_lock:
        parsed = _parsed.get(digest)
    if parsed is None:
        parsed = yaml.load(text.decode("utf-8"), Loader=CloudFormationLoader)  # noqa: S506 - SafeLoader subclass
        if not isinstance(parsed, dict) or not isinstance(parsed.get("Resources"), dict):
            raise TemplateError(f"{template_path}: not a CloudFormation template (no Resources)")
        with _parsed_lock:
            while len(_parsed) >= _PARSED_KEPT:
                del _parsed[next(iter(_parsed))]
            _parsed[digest] = parsed
    return copy.deepcopy(parsed)


def resources_of_type(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    """The resources of one type, by logical id, in template order."""
    resources: dict[str, dict[str, Any]] = template["Resources"]
    return {lid: res for lid, res in resources.items() if res.get("Type") == resource_type}


def parameter_values(template: Template, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every template parameter's value as a string: its Default, replaced by ``overrides``, which
    are checked as CloudFormation checks them (an unknown name, AllowedValues, AllowedPattern)."""
    declared: dict[str, dict[str, Any]] = template.get("Parameters") or {}
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise TemplateError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(declared)}")
    values: dict[str, str] = {}
    for name, spec in declared.items():
        if name in overrides:
            value = values[name] = overrides[name]
            allowed, pattern = spec.get("AllowedValues"), spec.get("AllowedPattern")
            if allowed is not None and value not in [parameter_string(v) for v in allowed]:
                raise TemplateError(f"parameter {name}={value!r} is not one of {allowed}")
            if pattern is not None and re.fullmatch(pattern, value) is None:
                raise TemplateError(f"parameter {name}={value!r} does not match {pattern}")
        elif "Default" in spec:
            values[name] = parameter_string(spec["Default"])
    return values


def parameter_string(value: object) -> str:
    """A value as CloudFormation passes it, a string (YAML reads ``Default: 24`` as an int)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(parameter_string(v) for v in value)
    return str(value)


# ``!Ref AWS::NoValue``: the key or list item holding it disappears, as in CloudFormation.
NO_VALUE = object()


@dataclass
class Resolver:
    """Resolves intrinsic functions the way the local stack names things: tables and queues by
    their name property or logical id, SSM parameters by their Name, ARNs in moto's account."""

    template: Template
    parameters: dict[str, str]
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
                handlers = {"Ref": self._ref, "Fn::Sub": self._sub, "Fn::GetAtt": self._get_att}
                handler = (handlers | {"Fn::Join": self._join, "Fn::If": self._if}).get(key)
                if handler is None:
                    raise TemplateError(f"intrinsic function {key} is not supported locally")
                return handler(arg)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def resolve_string(self, value: Any, where: str) -> str:
        """Resolve ``value`` and require a scalar, returned as a string (environment variables)."""
        resolved = self.resolve(value)
        if isinstance(resolved, (dict, list)):
            raise TemplateError(f"{where}: expected a string, got {resolved!r}")
        return parameter_string(resolved)

    def _ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise TemplateError(f"Ref needs a name, got {name!r}")
        pseudo: dict[str, Any] = {"AWS::Region": LOCAL_REGION, "AWS::AccountId": LOCAL_ACCOUNT_ID}
        pseudo |= {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": NO_VALUE}
        if name in pseudo:
            return pseudo[name]
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
        return self._resource_ref(name, resource)

    def _resource_ref(self, name: str, resource: Mapping[str, Any]) -> str:
        if resource.get("Type") == QUEUE_TYPE:
            # An SQS queue's Ref is its URL; the emulator finds the queue by the URL's last part.
            return queue_url(self.physical_name(name, resource))
        if resource.get("Type") == KMS_KEY_TYPE:
            return local_key_id(name)
        if resource.get("Type") == KMS_ALIAS_TYPE:
            return self.resolve_string((resource.get("Properties") or {}).get("AliasName"), f"{name} alias")
        return self.physical_name(name, resource)

    def physical_name(self, logical_id: str, resource: Mapping[str, Any]) -> str:
        """The name a resource gets locally: its template name, else its logical id."""
        resource_type = resource.get("Type")
        if resource_type not in _NAMED:
            raise TemplateError(f"Ref to {logical_id} ({resource_type}) is not supported locally")
        name = (resource.get("Properties") or {}).get(_NAMED[str(resource_type)][0])
        if name is None and resource_type == SSM_PARAMETER_TYPE:
            raise TemplateError(f"{logical_id}: an SSM parameter needs a Name to be used locally")
        if name is None:
            return logical_id
        if logical_id in self._resolving:  # a Name that refers back to itself through Sub
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
        resource_type = resource.get("Type")
        if resource_type == "AWS::Logs::LogGroup":
            return f"arn:aws:logs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:log-group:{logical_id}:*"
        if resource_type == KMS_KEY_TYPE:
            return local_key_arn(logical_id)
        if resource_type not in _NAMED:
            raise TemplateError(f"Fn::GetAtt {logical_id}.Arn ({resource_type}) is not supported locally")
        _, service, part = _NAMED[resource_type]
        name = self.physical_name(logical_id, resource)
        return f"arn:aws:{service}:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:{part.format(name)}"

    def _sub(self, arg: Any) -> str:
        if not isinstance(arg, str):
            raise TemplateError(f"Fn::Sub with variables is not supported locally, got {arg!r}")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if "." in name and not name.startswith("AWS::"):
                return self._get_att(list(name.partition(".")[::2]))
            value = self._ref(name)
            if isinstance(value, list):
                raise TemplateError(f"Fn::Sub cannot substitute list parameter {name}")
            return parameter_string(value)

        return _SUB_VARIABLE.sub(replace, arg)

    def _if(self, arg: Any) -> Any:
        if not (isinstance(arg, list) and len(arg) == 3 and isinstance(arg[0], str)):
            raise TemplateError(f"Fn::If needs [condition, if true, if false], got {arg!r}")
        return self.resolve(arg[1] if self.condition(arg[0]) else arg[2])

    def condition(self, name: str) -> bool:
        """The value of the template's condition ``name`` under the parameters."""
        conditions = self.template.get("Conditions") or {}
        if name not in conditions:
            raise TemplateError(f"unknown condition {name!r}")
        if name in self._resolving:
            raise TemplateError(f"condition {name}: circular reference")
        self._resolving.add(name)
        try:
            return self._truth(conditions[name])
        finally:
            self._resolving.discard(name)

    def _truth(self, value: Any) -> bool:
        """A condition function's value (the functions CloudFormation allows in Conditions)."""
        ((key, arg),) = value.items() if isinstance(value, dict) and len(value) == 1 else ((None, None),)
        if key == "Condition" and isinstance(arg, str):
            return self.condition(arg)
        if key == "Fn::Equals" and isinstance(arg, list) and len(arg) == 2:
            left, right = (parameter_string(self.resolve(v)) for v in arg)
            return left == right
        if key == "Fn::Not" and isinstance(arg, list) and len(arg) == 1:
            return not self._truth(arg[0])
        if key in ("Fn::And", "Fn::Or") and isinstance(arg, list):
            found = [self._truth(v) for v in arg]
            return all(found) if key == "Fn::And" else any(found)
        raise TemplateError(f"condition function {value!r} is not supported locally")

    def _join(self, arg: Any) -> str:
        if not (isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str)):
            raise TemplateError(f"Fn::Join needs [delimiter, [values]], got {arg!r}")
        values = self.resolve(arg[1])
        if not isinstance(values, list):
            raise TemplateError(f"Fn::Join needs a list of values, got {values!r}")
        return arg[0].join(parameter_string(v) for v in values)


def local_key_id(logical_id: str) -> str:
    """The id a template's KMS key has locally: fixed by its logical id (AWS and moto draw one at
    random), so the functions' environment and the IAM statements name it before it exists."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"nimbus-local:{logical_id}"))


def local_key_arn(logical_id: str) -> str:
    """The ARN of a template's KMS key locally (see :func:`local_key_id`)."""
    return f"arn:aws:kms:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:key/{local_key_id(logical_id)}"


def resolver(template: Template, params: Mapping[str, str] | None = None) -> Resolver:
    """A :class:`Resolver` over the template's parameter defaults with ``params`` overriding them."""
    return Resolver(template, parameter_values(template, params))


def queue_url(name: str) -> str:
    """The URL of local queue ``name`` as SQS spells it (moto finds a queue by the URL's last part)."""
    return f"https://sqs.{LOCAL_REGION}.amazonaws.com/{LOCAL_ACCOUNT_ID}/{name}"


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
    """Every AWS::Serverless::Function with its handler, code, resolved environment and routes,
    Globals.Function supplying defaults as SAM does (environments merged, the function's winning)."""
    names = resolver(template, params)
    globals_ = (template.get("Globals") or {}).get("Function") or {}
    return [
        _function_spec(names, logical_id, globals_, resource.get("Properties") or {})
        for logical_id, resource in resources_of_type(template, FUNCTION_TYPE).items()
    ]


def _function_spec(
    names: Resolver, logical_id: str, globals_: Mapping[str, Any], properties: Mapping[str, Any]
) -> FunctionSpec:
    def setting(key: str, default: Any) -> str:
        return names.resolve_string(properties.get(key, globals_.get(key, default)), f"{logical_id}.{key}")

    handler = setting("Handler", None)
    if "." not in handler:
        raise TemplateError(f"{logical_id}: Handler {handler!r} is not module.function")
    own, inherited = ((p.get("Environment") or {}).get("Variables") or {} for p in (properties, globals_))
    environment = {  # resolving the merged variables drops those set to AWS::NoValue
        key: names.resolve_string(value, f"{logical_id} environment {key}")
        for key, value in names.resolve({**inherited, **own}).items()
    }
    routes = []
    for event_name, event in (properties.get("Events") or {}).items():
        if event.get("Type") == "HttpApi":  # without Method and Path: SAM's catch-all, ANY $default
            where, route = f"{logical_id}.{event_name}", event.get("Properties") or {}
            method = names.resolve_string(route.get("Method", "ANY"), where).upper()
            routes.append(HttpRoute(method, names.resolve_string(route.get("Path", "$default"), where)))
    return FunctionSpec(
        logical_id=logical_id,
        handler=handler,
        code_uri=setting("CodeUri", "."),
        environment=environment,
        routes=tuple(routes),
        memory_size=int(setting("MemorySize", 128)),
        timeout=int(setting("Timeout", 3)),
    )
