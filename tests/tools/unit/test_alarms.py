"""The template's alarms cover what can fail unseen: every dead-letter queue, every function's errors
and throttles, the API's 5xx rate and p99 latency; each notifies the optional topic; the dashboard
shows them. Read from template.yaml, so a new function or queue without its alarm fails here."""

from __future__ import annotations

import json
import re
from typing import Any

from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import load_template, resources_of_type

TEMPLATE = load_template()
ALARMS = resources_of_type(TEMPLATE, "AWS::CloudWatch::Alarm")


def _refs(value: Any) -> set[str]:
    """The logical ids a property value refers to (Ref, GetAtt), however deep."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
            else:
                found |= _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _refs(inner)
    return found


def _alarms_on(namespace: str, metric: str) -> set[str]:
    """The resources that alarms on ``namespace``/``metric`` watch."""
    watched: set[str] = set()
    for alarm in ALARMS.values():
        props = alarm["Properties"]
        if (props.get("Namespace"), props.get("MetricName")) == (namespace, metric):
            watched |= _refs(props.get("Dimensions"))
    return watched


def test_every_function_has_an_errors_and_a_throttles_alarm() -> None:
    functions = set(resources_of_type(TEMPLATE, "AWS::Serverless::Function"))
    assert len(functions) == 10
    assert _alarms_on("AWS/Lambda", "Errors") == functions
    assert _alarms_on("AWS/Lambda", "Throttles") == functions


def test_every_stream_fed_function_has_an_alarm_on_its_backlog() -> None:
    """A stream read falling behind fails nothing (no error, no throttle, no dead letter), but mail
    goes out late and recovery requests older than their hour are dropped: IteratorAge tells."""
    fed = {s.function for s in stream_subscriptions(TEMPLATE)}
    assert fed == {"MailFunction", "SweepFunction", "RecoveryFunction", "ActivityFunction"}
    assert _alarms_on("AWS/Lambda", "IteratorAge") == fed
    for alarm in ALARMS.values():
        props = alarm["Properties"]
        if props.get("MetricName") == "IteratorAge":
            assert props["Statistic"] == "Maximum"
            assert props["Threshold"] <= 5 * 60 * 1000  # milliseconds: well within a request's hour


def test_every_dead_letter_queue_has_an_alarm_on_waiting_messages() -> None:
    queues = set(resources_of_type(TEMPLATE, "AWS::SQS::Queue"))
    assert queues == {
        "MailDeadLetterQueue",
        "SweepDeadLetterQueue",
        "RecoveryDeadLetterQueue",
        "ActivityDeadLetterQueue",
    }
    assert _alarms_on("AWS/SQS", "ApproximateNumberOfMessagesVisible") == queues


def test_the_api_has_a_5xx_rate_and_a_p99_latency_alarm() -> None:
    rate = ALARMS["Api5xxRateAlarm"]["Properties"]
    metrics = {m["Id"]: m for m in rate["Metrics"]}
    assert metrics["errors"]["MetricStat"]["Metric"]["MetricName"] == "5xx"
    assert metrics["requests"]["MetricStat"]["Metric"]["MetricName"] == "Count"
    assert "errors / requests" in metrics["rate"]["Expression"]
    assert _refs(rate["Metrics"]) == {"NimbusApi"}
    latency = ALARMS["ApiLatencyAlarm"]["Properties"]
    assert (latency["MetricName"], latency["ExtendedStatistic"]) == ("Latency", "p99")
    assert _refs(latency["Dimensions"]) == {"NimbusApi"}


def test_every_alarm_notifies_the_topic_when_one_is_given() -> None:
    for name, alarm in ALARMS.items():
        for actions in ("AlarmActions", "OKActions"):
            assert alarm["Properties"][actions] == {
                "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
            }, name
    assert TEMPLATE["Parameters"]["AlarmTopicArn"]["Default"] == ""


def test_the_dashboard_shows_the_api_the_functions_the_dead_letters_and_the_alarms() -> None:
    (dashboard,) = resources_of_type(TEMPLATE, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    for name in [*resources_of_type(TEMPLATE, "AWS::Serverless::Function"), "NimbusApi"]:
        assert f"${{{name}}}" in body
    for queue in (
        "MailDeadLetterQueue",
        "SweepDeadLetterQueue",
        "RecoveryDeadLetterQueue",
        "ActivityDeadLetterQueue",
    ):
        assert f"${{{queue}.QueueName}}" in body
    assert "${Api5xxRateAlarm.Arn}" in body
    json.loads(re.sub(r"\$\{[^}]+\}", "x", body))  # JSON once CloudFormation has substituted it
