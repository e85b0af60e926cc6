"""template.yaml as the local tools read it: short tags, parameters, intrinsics, tables, functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from nimbus_core.domain.killswitches import KillSwitch, parameter_names
from nimbus_tools.local.gateway import http_api_cors
from nimbus_tools.local.provision import (
    queue_definitions,
    ssm_parameter_definitions,
    table_definitions,
)
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import (
    TemplateError,
    function_specs,
    load_template,
    local_key_arn,
    local_key_id,
    parameter_values,
    resolver,
    resources_of_type,
)

TEMPLATE = load_template()


def test_short_form_tags_load_as_long_form_intrinsics() -> None:
    auth = TEMPLATE["Resources"]["AuthFunction"]["Properties"]
    resources = [s["Resource"] for s in auth["Policies"][0]["Statement"]]
    listed = [r for rs in resources for r in (rs if isinstance(rs, list) else [rs])]
    assert {"Fn::GetAtt": ["UsersTable", "Arn"]} in listed
    assert {"Fn::Sub": "${UsersTable.Arn}/index/*"} in listed
    assert TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["STAGE"] == {"Ref": "Stage"}


def test_parameters_default_to_their_template_defaults_as_strings() -> None:
    values = parameter_values(TEMPLATE)
    assert values["Stage"] == "dev"
    assert values["SessionHours"] == "24"
    assert values["StaffRequireSecondFactor"] == "true"


def test_parameter_overrides_are_checked_like_cloudformation_checks_them() -> None:
    assert parameter_values(TEMPLATE, {"Stage": "prod"})["Stage"] == "prod"
    with pytest.raises(TemplateError, match="does not match"):
        parameter_values(TEMPLATE, {"Stage": "Not Valid"})
    with pytest.raises(TemplateError, match="not one of"):
        parameter_values(TEMPLATE, {"StaffRequireSecondFactor": "maybe"})
    with pytest.raises(TemplateError, match="unknown parameter"):
        parameter_values(TEMPLATE, {"Stag": "prod"})


def test_ssm_parameter_names_are_resolved_from_sub_with_the_stage() -> None:
    prod = ssm_parameter_definitions(TEMPLATE, {"Stage": "prod"}).values()
    assert {d["Name"]: d["Value"] for d in prod} == {
        **{f"/nimbus/prod/killswitches/{s.name}": "off" for s in KillSwitch},
        "/nimbus/prod/loglevel": "INFO",
    }
    names = {logical_id: d["Name"] for logical_id, d in ssm_parameter_definitions(TEMPLATE).items()}
    assert names["LogLevelParameter"] == "/nimbus/dev/loglevel"
    # One parameter per switch, named as the functions derive them from KILLSWITCH_PATH.
    switch_names = {v for k, v in names.items() if k.startswith("KillSwitch")}
    assert switch_names == set(parameter_names("/nimbus/dev/killswitches").values())


def test_refs_resolve_to_local_names_and_getatt_arn_to_a_fake_arn() -> None:
    names = resolver(TEMPLATE)
    assert names.resolve({"Ref": "UsersTable"}) == "UsersTable"
    assert names.resolve({"Ref": "LogLevelParameter"}) == "/nimbus/dev/loglevel"
    assert names.resolve({"Ref": "CorsAllowedOrigins"}) == ["https://files.example"]
    assert names.resolve({"Fn::GetAtt": ["SessionsTable", "Arn"]}) == (
        "arn:aws:dynamodb:us-east-1:123456789012:table/SessionsTable"
    )
    assert names.resolve({"Fn::Sub": "${UsersTable.Arn}/index/*"}) == (
        "arn:aws:dynamodb:us-east-1:123456789012:table/UsersTable/index/*"
    )


def test_sub_knows_the_pseudo_parameters_and_join_joins() -> None:
    names = resolver(TEMPLATE)
    text = "${AWS::Partition}:${AWS::Region}:${AWS::AccountId}:${AWS::URLSuffix}:${Stage}"
    assert names.resolve({"Fn::Sub": text}) == "aws:us-east-1:123456789012:amazonaws.com:dev"
    assert names.resolve({"Fn::Join": ["-", ["a", {"Ref": "Stage"}]]}) == "a-dev"


def test_if_follows_the_conditions_for_the_parameters_given() -> None:
    own = {"Fn::GetAtt": ["TotpKey", "Arn"]}
    sealing = {"Fn::If": ["HasTotpSealingKey", {"Ref": "TotpSealingKeyArn"}, own]}
    assert resolver(TEMPLATE).resolve(sealing) == local_key_arn("TotpKey")
    other = "arn:aws:kms:us-east-1:123456789012:key/0f0f0f0f-0000-4000-8000-000000000000"
    assert resolver(TEMPLATE, {"TotpSealingKeyArn": other}).resolve(sealing) == other
    # A branch that is AWS::NoValue leaves the list, as in CloudFormation.
    listed = [{"Fn::If": ["HasTotpPreviousKey", {"Ref": "TotpPreviousKeyArn"}, {"Ref": "AWS::NoValue"}]}]
    assert resolver(TEMPLATE).resolve(listed) == []
    with pytest.raises(TemplateError, match="unknown condition"):
        resolver(TEMPLATE).resolve({"Fn::If": ["Nope", "a", "b"]})


def test_a_kms_key_has_one_local_id_its_ref_arn_and_environment_agree_on() -> None:
    names = resolver(TEMPLATE)
    assert names.resolve({"Ref": "TotpKey"}) == local_key_id("TotpKey")
    assert names.resolve({"Fn::GetAtt": ["TotpKey", "Arn"]}).endswith(f":key/{local_key_id('TotpKey')}")
    assert names.resolve({"Ref": "TotpKeyAlias"}) == "alias/nimbus-dev-totp"
    for spec in function_specs(TEMPLATE):
        assert spec.environment["TOTP_KEY_ARN"] == local_key_arn("TotpKey")


def test_fn_if_follows_the_templates_conditions_under_the_parameters() -> None:
    template = {
        "Parameters": {"Units": {"Type": "Number", "Default": 0}, "Mode": {"Type": "String", "Default": "a"}},
        "Conditions": {
            "HasUnits": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Units"}, 0]}]},
            "Both": {"Fn::And": [{"Condition": "HasUnits"}, {"Fn::Equals": ["a", {"Ref": "Mode"}]}]},
            "Either": {"Fn::Or": [{"Condition": "HasUnits"}, {"Fn::Equals": ["a", {"Ref": "Mode"}]}]},
        },
        "Resources": {},
    }
    value = {"Units": {"Fn::If": ["HasUnits", {"Ref": "Units"}, {"Ref": "AWS::NoValue"}]}, "Kept": 1}
    assert resolver(template).resolve(value) == {"Kept": 1}  # the default: no units, the key goes
    assert resolver(template, {"Units": "400"}).resolve(value) == {"Units": "400", "Kept": 1}
    assert resolver(template, {"Units": "400"}).condition("Both")
    assert not resolver(template, {"Mode": "b"}).condition("Either")
    with pytest.raises(TemplateError, match="unknown condition 'Nope'"):
        resolver(template).resolve({"Fn::If": ["Nope", 1, 2]})


def test_unsupported_intrinsics_and_refs_fail_clearly() -> None:
    names = resolver(TEMPLATE)
    with pytest.raises(TemplateError, match="Fn::ImportValue is not supported"):
        names.resolve({"Fn::ImportValue": "x"})
    # Features template.yaml does not use are refused rather than half supported.
    for unused in ("Fn::Select", "Fn::Split", "Fn::Equals", "Condition"):
        with pytest.raises(TemplateError, match=f"{unused} is not supported"):
            names.resolve({unused: ["x", "y", "z"]})
    with pytest.raises(TemplateError, match="Fn::Sub with variables is not supported"):
        names.resolve({"Fn::Sub": ["${A}", {"A": "a"}]})
    with pytest.raises(TemplateError, match="unknown parameter or resource 'AWS::StackName'"):
        names.resolve({"Fn::Sub": "${AWS::StackName}"})
    with pytest.raises(TemplateError, match=r"Fn::GetAtt NimbusApi.Arn \(AWS::Serverless::HttpApi\) is not"):
        names.resolve({"Fn::GetAtt": ["NimbusApi", "Arn"]})
    with pytest.raises(
        TemplateError, match=r"Ref to NimbusApi \(AWS::Serverless::HttpApi\) is not supported"
    ):
        names.resolve({"Ref": "NimbusApi"})
    with pytest.raises(TemplateError, match=r"only \.Arn"):
        names.resolve({"Fn::GetAtt": ["UsersTable", "StreamArn"]})
    with pytest.raises(TemplateError, match="unknown parameter or resource"):
        names.resolve({"Ref": "Nope"})


def test_table_definitions_give_create_table_kwargs_and_ttl() -> None:
    tables = table_definitions(TEMPLATE)
    assert set(tables) == {
        "UsersTable",
        "SessionsTable",
        "CountersTable",
        "TokensTable",
        "DomainsTable",
        "OutboxTable",
        "ActivityTable",
    }
    users = tables["UsersTable"]["create_table"]
    assert users["TableName"] == "UsersTable"
    assert users["BillingMode"] == "PAY_PER_REQUEST"
    assert users["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert [i["IndexName"] for i in users["GlobalSecondaryIndexes"]] == [
        "CreatedIndex",
        "UsernameLookup",
        "EmailLookup",
    ]
    assert tables["SessionsTable"]["create_table"]["KeySchema"][1] == {
        "AttributeName": "sessionId",
        "KeyType": "RANGE",
    }
    assert {name: t["ttl_attribute"] for name, t in tables.items()} == {
        "UsersTable": None,
        "SessionsTable": "expiresAt",
        "CountersTable": "expiresAt",
        "TokensTable": "expiresAt",
        "DomainsTable": None,
        "OutboxTable": "expiresAt",
        "ActivityTable": "expiresAt",
    }
    assert tables["OutboxTable"]["create_table"]["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_IMAGE",
    }
    assert users["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    assert "StreamSpecification" not in tables["SessionsTable"]["create_table"]


def test_function_specs_merge_globals_with_the_function_and_list_routes() -> None:
    specs = {s.logical_id: s for s in function_specs(TEMPLATE, {"Stage": "qa"})}
    assert set(specs) == {
        "AuthFunction",
        "AccountsFunction",
        "SessionsFunction",
        "SecondFactorsFunction",
        "StaffFunction",
        "AdminFunction",
        "MailFunction",
        "SweepFunction",
        "RecoveryFunction",
        "ActivityFunction",
    }
    auth = specs["AuthFunction"]
    assert auth.handler == "auth_api.handler.lambda_handler"
    assert (auth.handler_module, auth.handler_function) == ("auth_api.handler", "lambda_handler")
    assert auth.code_uri == "functions/auth/"
    assert (auth.memory_size, auth.timeout) == (1024, 10)  # own MemorySize, Globals Timeout
    assert auth.environment["STAGE"] == "qa"
    assert auth.environment["USERS_TABLE"] == "UsersTable"
    assert auth.environment["KILLSWITCH_PATH"] == "/nimbus/qa/killswitches"
    assert auth.environment["SESSION_HOURS"] == "24"
    assert [r.route_key for r in auth.routes] == [
        "POST /register",
        "POST /login",
        "POST /login/passkey",
        "POST /users/recover",
        "PUT /users/recover",
    ]
    admin = [r.route_key for r in specs["AdminFunction"].routes]
    assert (admin[0], admin[-1]) == ("GET /", "$default")
    assert specs["AdminFunction"].routes[-1].method == "ANY"


def test_cors_configuration_is_resolved_from_the_http_api() -> None:
    cors = http_api_cors(TEMPLATE)
    assert cors is not None
    assert cors["AllowOrigins"] == ["https://files.example"]
    assert "X-Session-Name" in cors["AllowHeaders"]


def test_a_file_that_is_not_a_template_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not-a-template.yaml"
    path.write_text("just: text\n")
    with pytest.raises(TemplateError, match="no Resources"):
        load_template(path)


def test_each_load_is_a_template_of_its_own_and_a_changed_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text("Resources:\n  Queue: {Type: AWS::SQS::Queue, Properties: {QueueName: !Ref Name}}\n")
    first = load_template(path)
    first["Resources"]["Queue"]["Properties"]["QueueName"] = "changed by its caller"

    assert load_template(path)["Resources"]["Queue"]["Properties"] == {"QueueName": {"Ref": "Name"}}
    path.write_text("Resources:\n  Queue: {Type: AWS::SQS::Queue, Properties: {QueueName: !Ref Same}}\n")
    assert load_template(path)["Resources"]["Queue"]["Properties"] == {"QueueName": {"Ref": "Same"}}


def test_no_value_drops_the_environment_variable_as_cloudformation_does() -> None:
    from nimbus_tools.template import function_specs, load_template

    for spec in function_specs(load_template()):
        assert "AWS_ENDPOINT_URL" not in spec.environment
        assert spec.environment["POWERTOOLS_SERVICE_NAME"] == "nimbus"


def test_a_queue_ref_is_its_url_and_its_getatt_arn_names_the_same_queue() -> None:
    names = resolver(TEMPLATE)

    assert names.resolve({"Ref": "MailDeadLetterQueue"}) == (
        "https://sqs.us-east-1.amazonaws.com/123456789012/MailDeadLetterQueue"
    )
    assert names.resolve({"Fn::GetAtt": ["MailDeadLetterQueue", "Arn"]}) == (
        "arn:aws:sqs:us-east-1:123456789012:MailDeadLetterQueue"
    )
    assert queue_definitions(TEMPLATE) == {
        name: {
            "QueueName": name,
            "Attributes": {"MessageRetentionPeriod": "1209600", "SqsManagedSseEnabled": "true"},
        }
        for name in (
            "MailDeadLetterQueue",
            "SweepDeadLetterQueue",
            "RecoveryDeadLetterQueue",
            "ActivityDeadLetterQueue",
        )
    }


def test_only_the_mail_function_gets_the_dead_letter_queue_and_every_function_the_outbox() -> None:
    specs = {s.logical_id: s for s in function_specs(TEMPLATE)}

    assert {name: "MAIL_DEAD_LETTER_QUEUE_URL" in s.environment for name, s in specs.items()} == {
        "AuthFunction": False,
        "AccountsFunction": False,
        "SessionsFunction": False,
        "SecondFactorsFunction": False,
        "StaffFunction": False,
        "AdminFunction": False,
        "MailFunction": True,
        "SweepFunction": False,  # its queue is written by the event source mapping, not by its code
        "RecoveryFunction": False,  # likewise
        "ActivityFunction": False,  # likewise
    }
    assert {s.environment["OUTBOX_TABLE"] for s in specs.values()} == {"OutboxTable"}
    assert specs["MailFunction"].routes == ()
    assert specs["SweepFunction"].routes == ()
    assert specs["RecoveryFunction"].routes == ()
    assert specs["ActivityFunction"].routes == ()


def test_the_mail_function_subscribes_to_inserts_on_the_outbox_stream_but_requests_and_events() -> None:
    [subscription] = [s for s in stream_subscriptions(TEMPLATE) if s.function == "MailFunction"]

    assert subscription.table == "OutboxTable"
    assert subscription.filter_patterns == (
        {
            "eventName": ["INSERT"],
            # Recovery requests, bare activity events and the new sign-in notices' bound are no mail.
            "dynamodb": {
                "NewImage": {
                    "kind": {"S": [{"anything-but": ["recover-request", "activity", "sent-notice"]}]}
                }
            },
        },
    )
    assert subscription.report_batch_item_failures
    assert subscription.on_failure_queue == "MailDeadLetterQueue"
    assert subscription.batch_size == 10


def test_the_mail_stream_retries_a_batch_until_ses_takes_its_mail_and_gives_up_only_by_age() -> None:
    """SES throttling stops a batch and has it retried (mail_api.handler): a retry count would end
    in the OnFailure queue during a long throttle, so only the records' age does, well within the
    stream's 24 hours (what the queue's message points at must still be readable to replay it)."""
    [subscription] = [s for s in stream_subscriptions(TEMPLATE) if s.function == "MailFunction"]
    properties = TEMPLATE["Resources"]["MailFunction"]["Properties"]["Events"]["Outbox"]["Properties"]

    assert subscription.maximum_retry_attempts == -1
    assert 6 * 3600 <= properties["MaximumRecordAgeInSeconds"] <= 12 * 3600
    assert properties["BisectBatchOnFunctionError"] is True


def test_the_sweep_function_subscribes_to_changed_and_removed_user_items_on_the_users_stream() -> None:
    [subscription] = [s for s in stream_subscriptions(TEMPLATE) if s.table == "UsersTable"]

    assert subscription.function == "SweepFunction"
    assert subscription.filter_patterns == (
        {"eventName": ["MODIFY", "REMOVE"], "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "USER#"}]}}}},
    )
    assert subscription.report_batch_item_failures
    assert subscription.on_failure_queue == "SweepDeadLetterQueue"
    assert subscription.batch_size == 10
    assert 0 < subscription.maximum_retry_attempts <= 5
    assert [s.function for s in stream_subscriptions(TEMPLATE)] == [
        "MailFunction",
        "SweepFunction",
        "RecoveryFunction",
        "ActivityFunction",
    ]


def test_the_recovery_function_subscribes_to_inserted_recovery_requests_on_the_outbox_stream() -> None:
    [subscription] = [s for s in stream_subscriptions(TEMPLATE) if s.function == "RecoveryFunction"]

    assert subscription.table == "OutboxTable"
    assert subscription.filter_patterns == (
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"kind": {"S": ["recover-request"]}}}},
    )
    assert subscription.report_batch_item_failures
    assert subscription.on_failure_queue == "RecoveryDeadLetterQueue"
    assert subscription.batch_size == 10
    assert 0 < subscription.maximum_retry_attempts <= 5


def test_an_on_failure_destination_without_a_type_is_still_followed() -> None:
    """SweepFunction's OnFailure has no ``Type`` (so SAM adds no policy of its own); the local event
    source still finds the queue."""
    events = TEMPLATE["Resources"]["SweepFunction"]["Properties"]["Events"]
    assert "Type" not in events["Users"]["Properties"]["DestinationConfig"]["OnFailure"]
    [subscription] = [s for s in stream_subscriptions(TEMPLATE) if s.function == "SweepFunction"]
    assert subscription.on_failure_queue == "SweepDeadLetterQueue"


def test_every_stream_event_bisects_a_failing_batch() -> None:
    """Lambda splits a failing batch in AWS; the local event source does not emulate it, so the
    template alone is checked."""
    events = [
        event["Properties"]
        for function in resources_of_type(TEMPLATE, "AWS::Serverless::Function").values()
        for event in (function["Properties"].get("Events") or {}).values()
        if event["Type"] == "DynamoDB"
    ]

    assert len(events) == 4
    assert all(event.get("BisectBatchOnFunctionError") is True for event in events)
