"""A prod stack cannot be created with development values: the template's Rules, evaluated as
CloudFormation evaluates them, and the deploy's own check for development hosts."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nimbus_tools.deploy_checks import (
    RuleError,
    deploy_refusals,
    main,
    rule_failures,
    samconfig_overrides,
)
from nimbus_tools.template import load_template, parameter_values

TEMPLATE = load_template()
PROD = {
    "Stage": "prod",
    "VerificationUrl": "https://files.acme.io/console/verify?token={token}",
    "RecoveryUrl": "https://files.acme.io/console/recover?token={token}",
    "SessionsUrl": "https://files.acme.io/console/sessions",
    "SenderEmail": "no-reply@acme.io",
    "CorsAllowedOrigins": "https://files.acme.io,https://acme.io",
    "WebAuthnOrigins": "https://files.acme.io",
    "WebAuthnRpId": "files.acme.io",
    "DefaultDomain": "acme.io",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:111122223333:nimbus-alarms",
}
DEVELOPMENT_PARAMETERS = {
    "VerificationUrl",
    "RecoveryUrl",
    "SessionsUrl",
    "SenderEmail",
    "CorsAllowedOrigins",
    "WebAuthnOrigins",
    "WebAuthnRpId",
    "DefaultDomain",
    "AlarmTopicArn",
}


def _named(refusals: list[str]) -> set[str]:
    """The parameter each refusal names first (every message starts with it)."""
    return {line.partition(":")[0] for line in refusals}


def test_a_prod_stack_with_the_template_defaults_is_refused_naming_each_parameter() -> None:
    failures = rule_failures(TEMPLATE, parameter_values(TEMPLATE, {"Stage": "prod"}))
    assert _named(failures) == DEVELOPMENT_PARAMETERS


def test_a_prod_stack_with_its_own_values_passes_the_rules_and_the_host_check() -> None:
    assert deploy_refusals(TEMPLATE, PROD) == []


def test_a_dev_stack_may_keep_the_development_defaults() -> None:
    assert deploy_refusals(TEMPLATE, {"Stage": "dev"}) == []
    assert deploy_refusals(TEMPLATE, {"Stage": "dev", "DeletionProtection": "false"}) == []


def test_prod_refuses_tables_without_deletion_protection() -> None:
    refusals = deploy_refusals(TEMPLATE, PROD | {"DeletionProtection": "false"})
    assert _named(refusals) == {"DeletionProtection"}


def test_prod_refuses_an_empty_alarm_topic_and_an_empty_sender() -> None:
    assert _named(rule_failures(TEMPLATE, parameter_values(TEMPLATE, PROD | {"AlarmTopicArn": ""}))) == {
        "AlarmTopicArn"
    }
    assert "SenderEmail" in _named(deploy_refusals(TEMPLATE, PROD | {"SenderEmail": ""}))


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("VerificationUrl", "http://localhost:8080/verify?token={token}"),
        ("RecoveryUrl", "https://auth.example.com/recover?token={token}"),
        ("RecoveryUrl", "http://files.acme.io/recover?token={token}"),  # not https
        ("SenderEmail", "mail@nimbus.test"),
        ("CorsAllowedOrigins", "https://files.acme.io,http://127.0.0.1:3000"),
        ("WebAuthnOrigins", "https://staging.files.example"),
        ("WebAuthnRpId", "localhost"),
        ("DefaultDomain", "users.example.org"),
    ],
)
def test_prod_refuses_any_value_naming_a_development_host(parameter: str, value: str) -> None:
    """What the rules' whole-string comparisons cannot see, the deploy's check does."""
    assert _named(deploy_refusals(TEMPLATE, PROD | {parameter: value})) == {parameter}


def test_the_committed_prod_environment_is_refused_until_the_operator_sets_its_values() -> None:
    overrides = samconfig_overrides("prod")
    assert overrides["Stage"] == "prod"
    assert _named(deploy_refusals(TEMPLATE, overrides)) == DEVELOPMENT_PARAMETERS


def test_the_deploy_check_exits_non_zero_with_a_line_per_parameter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--config-env", "prod"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert {line.removeprefix("deploy refused: ").partition(":")[0] for line in lines} == (
        DEVELOPMENT_PARAMETERS
    )
    assert main(["--config-env", "prod", *(f"{k}={v}" for k, v in PROD.items())]) == 0


def test_samconfig_overrides_are_read_as_sam_reads_them(tmp_path: Path) -> None:
    config = tmp_path / "samconfig.toml"
    config.write_text(
        'version = 0.1\n[prod.deploy.parameters]\nparameter_overrides = "Stage=prod '
        "SenderEmail=no-reply@acme.io 'VerificationUrl=https://acme.io/v?token={token}'\"\n"
    )
    assert samconfig_overrides("prod", config) == {
        "Stage": "prod",
        "SenderEmail": "no-reply@acme.io",
        "VerificationUrl": "https://acme.io/v?token={token}",
    }


def test_a_rule_function_the_evaluator_does_not_know_is_an_error_not_a_pass() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["Rules"]["Unknown"] = {"Assertions": [{"Assert": {"Fn::ValueOf": ["Stage", "Tags"]}}]}
    with pytest.raises(RuleError):
        rule_failures(template, parameter_values(template))


def test_every_table_that_holds_accounts_takes_the_deletion_protection_parameter() -> None:
    tables = {k: v for k, v in TEMPLATE["Resources"].items() if v["Type"] == "AWS::DynamoDB::Table"}
    protected = {
        name
        for name, table in tables.items()
        if table["Properties"].get("DeletionProtectionEnabled") == {"Ref": "DeletionProtection"}
    }
    retained = {name for name, table in tables.items() if table.get("DeletionPolicy") == "Retain"}
    assert (
        protected
        == retained
        == {"UsersTable", "SessionsTable", "TokensTable", "DomainsTable", "ActivityTable"}
    )
    assert TEMPLATE["Parameters"]["DeletionProtection"]["Default"] == "true"
