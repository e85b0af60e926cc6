"""What a stack is refused for before CloudFormation creates anything: the template's ``Rules``
(evaluated here as CloudFormation evaluates them, so a test can prove them), and, for a prod stack,
values that name a development host, which the rules' functions cannot see.

CloudFormation's rule functions compare whole strings (``Fn::Equals``, ``Fn::Contains``): a rule can
refuse the template's development defaults, an empty value or a parameter left off, but not "any
link on localhost". ``python -m nimbus_tools.deploy_checks --config-env prod`` (run by ``make deploy``)
adds that check on the parameters the deploy will pass, from samconfig.toml and the template's
defaults, and refuses the deploy with one line per offending parameter.
"""

from __future__ import annotations

import argparse
import operator
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nimbus_tools.template import REPO_ROOT, Template, TemplateError, load_template, parameter_values

SAMCONFIG = REPO_ROOT / "samconfig.toml"
PRODUCTION_STAGE = "prod"
# The parameters whose values reach people (links, the sender, the browser origins, the passkeys'
# relying party, the domain users get): a prod stack must not point them at a development host.
PUBLIC_PARAMETERS = (
    "VerificationUrl",
    "RecoveryUrl",
    "SessionsUrl",
    "SenderEmail",
    "CorsAllowedOrigins",
    "WebAuthnOrigins",
    "WebAuthnRpId",
    "DefaultDomain",
)
# Hosts no production deployment serves: loopback, and the names reserved for documentation and
# testing (RFC 2606 and RFC 6761: example.com/.net/.org and the .example, .test, .invalid and
# .localhost top-level domains).
_DEVELOPMENT_HOST = re.compile(
    r"^(localhost|127(\.\d{1,3}){3}|\[?::1\]?|0\.0\.0\.0"
    r"|(.+\.)?example\.(com|net|org)|(.+\.)?(example|test|invalid|localhost))$",
    re.IGNORECASE,
)


class RuleError(ValueError):
    """A rule uses a function this evaluator does not know (teach it, do not skip it)."""


def rule_failures(template: Template, values: Mapping[str, str]) -> list[str]:
    """The ``AssertDescription`` of every assertion of the template's ``Rules`` that fails for
    these parameter values, in template order (CloudFormation refuses the stack on any)."""
    declared = template.get("Parameters") or {}
    failures: list[str] = []
    for name, rule in (template.get("Rules") or {}).items():
        if "RuleCondition" in rule and not _truth(rule["RuleCondition"], values, declared, name):
            continue
        for assertion in rule["Assertions"]:
            if not _truth(assertion["Assert"], values, declared, name):
                failures.append(str(assertion.get("AssertDescription") or f"rule {name} failed"))
    return failures


def _truth(expression: Any, values: Mapping[str, str], declared: Mapping[str, Any], rule: str) -> bool:
    result = _evaluate(expression, values, declared, rule)
    if not isinstance(result, bool):
        raise RuleError(f"rule {rule}: {expression!r} is not a condition")
    return result


def _evaluate(expression: Any, values: Mapping[str, str], declared: Mapping[str, Any], rule: str) -> Any:
    """One rule-specific intrinsic function, as the CloudFormation user guide defines it."""
    if isinstance(expression, str):
        return expression
    if isinstance(expression, list):
        return [_evaluate(item, values, declared, rule) for item in expression]
    if not (isinstance(expression, dict) and len(expression) == 1):
        raise RuleError(f"rule {rule}: cannot evaluate {expression!r}")
    ((function, argument),) = expression.items()
    if function == "Ref":
        return _parameter(argument, values, declared, rule)
    apply = _FUNCTIONS.get(function)
    if apply is None or not isinstance(argument, list):
        raise RuleError(f"rule {rule}: {function} with {argument!r} is not a rule function this knows")
    try:
        return apply([_evaluate(a, values, declared, rule) for a in argument])
    except (TypeError, ValueError) as error:
        raise RuleError(f"rule {rule}: {function} cannot take {argument!r}") from error


def _parameter(name: Any, values: Mapping[str, str], declared: Mapping[str, Any], rule: str) -> Any:
    if name not in declared:
        raise RuleError(f"rule {rule}: Ref to {name!r}, which is not a parameter")
    value = values.get(name, "")
    if declared[name].get("Type") == "CommaDelimitedList":
        return [item.strip() for item in value.split(",")] if value else []
    return value


def _conditions(args: list[Any], low: int, high: int) -> list[bool]:
    if not (low <= len(args) <= high and all(isinstance(a, bool) for a in args)):
        raise ValueError(f"expected {low} to {high} conditions, got {args!r}")
    return args


def _pair(args: list[Any]) -> tuple[Any, Any]:
    if len(args) != 2:
        raise ValueError(f"expected two arguments, got {args!r}")
    return args[0], args[1]


def _contains(args: list[Any]) -> bool:
    options, value = _pair(args)
    if not isinstance(options, list):
        raise TypeError("Fn::Contains takes a list of strings, then a string")
    return value in options  # the string matches one value of the list


_FUNCTIONS: dict[str, Callable[[list[Any]], bool]] = {
    "Fn::Equals": lambda args: operator.eq(*_pair(args)),
    "Fn::Not": lambda args: not _conditions(args, 1, 1)[0],
    "Fn::And": lambda args: all(_conditions(args, 2, 10)),
    "Fn::Or": lambda args: any(_conditions(args, 2, 10)),
    "Fn::Contains": _contains,
    "Fn::EachMemberIn": lambda args: all(m in _pair(args)[1] for m in _pair(args)[0]),
    "Fn::EachMemberEquals": lambda args: all(m == _pair(args)[1] for m in _pair(args)[0]),
}


def development_hosts(template: Template, values: Mapping[str, str]) -> list[str]:
    """For a prod stack, one line per public parameter whose value names a development host
    (loopback or a reserved documentation/testing domain), or is plain http."""
    if values.get("Stage") != PRODUCTION_STAGE:
        return []
    declared = template.get("Parameters") or {}
    found: list[str] = []
    for name in PUBLIC_PARAMETERS:
        raw = values.get(name, "")
        items = raw.split(",") if declared.get(name, {}).get("Type") == "CommaDelimitedList" else [raw]
        for item in (i.strip() for i in items):
            problem = _development_value(name, item)
            if problem:
                found.append(f"{name}: {problem} ({item!r}); a prod stack needs the real one")
    return found


def _development_value(name: str, value: str) -> str | None:
    if name == "SenderEmail":
        host = value.rpartition("@")[2]
    elif name in ("WebAuthnRpId", "DefaultDomain"):
        host = value
    else:
        parts = urlsplit(value)
        if parts.scheme != "https":
            return "not an https address"
        host = parts.hostname or ""
    return f"{host!r} is a development host" if _DEVELOPMENT_HOST.match(host) else None


def samconfig_overrides(config_env: str, path: Path = SAMCONFIG) -> dict[str, str]:
    """The ``parameter_overrides`` that ``sam deploy --config-env <env>`` passes, as a dict."""
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    deploy = ((config.get(config_env) or {}).get("deploy") or {}).get("parameters") or {}
    raw = deploy.get("parameter_overrides") or ""
    words = shlex.split(raw) if isinstance(raw, str) else [str(w) for w in raw]
    overrides: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals:
            raise TemplateError(f"samconfig.toml [{config_env}]: {word!r} is not Name=Value")
        overrides[key] = value
    return overrides


def deploy_refusals(template: Template, overrides: Mapping[str, str]) -> list[str]:
    """Everything that refuses a deploy with these parameter overrides: the template's rules, then
    development hosts in a prod stack."""
    values = parameter_values(template, overrides)
    return rule_failures(template, values) + development_hosts(template, values)


def main(argv: list[str] | None = None) -> int:
    """Check the parameters a ``sam deploy --config-env`` would pass; exit 1 with the reasons."""
    parser = argparse.ArgumentParser(prog="python -m nimbus_tools.deploy_checks", description=__doc__)
    parser.add_argument("--config-env", default="default", help="samconfig.toml environment")
    parser.add_argument(
        "overrides", nargs="*", metavar="Name=Value", help="parameter overrides on top of samconfig's"
    )
    args = parser.parse_args(argv)
    overrides = samconfig_overrides(args.config_env)
    for word in args.overrides:
        key, _, value = word.partition("=")
        overrides[key] = value
    try:
        refusals = deploy_refusals(load_template(), overrides)
    except TemplateError as error:
        print(f"deploy refused: {error}", file=sys.stderr)
        return 1
    for line in refusals:
        print(f"deploy refused: {line}", file=sys.stderr)
    return 1 if refusals else 0


if __name__ == "__main__":
    sys.exit(main())
