"""The DynamoDB events of the template's functions: which table's stream feeds each function, and how
Lambda's event source mapping polls it (batch size, starting position, filters, retries, the
OnFailure queue), as the local stack and the tests run them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nimbus_tools.template import (
    FUNCTION_TYPE,
    TABLE_TYPE,
    Resolver,
    Template,
    TemplateError,
    resolver,
    resources_of_type,
)


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
    on_failure_queue: str | None = None  # logical id of the OnFailure SQS destination


def _logical_id_of(value: Any, attribute: str, where: str) -> str:
    """``X`` from ``!GetAtt X.<attribute>`` (the only form the local stack can follow)."""
    arg = value.get("Fn::GetAtt") if isinstance(value, dict) else None
    if isinstance(arg, list) and len(arg) == 2 and arg[1] == attribute and isinstance(arg[0], str):
        return arg[0]
    raise TemplateError(f"{where}: only !GetAtt <Resource>.{attribute} is supported locally, got {value!r}")


def stream_subscriptions(template: Template) -> list[StreamSubscription]:
    """Every DynamoDB event of every function, in template order."""
    names = resolver(template)
    return [
        _subscription(names, function, event_name, event.get("Properties") or {})
        for function, resource in resources_of_type(template, FUNCTION_TYPE).items()
        for event_name, event in ((resource.get("Properties") or {}).get("Events") or {}).items()
        if event.get("Type") == "DynamoDB"
    ]


def _subscription(names: Resolver, function: str, event_name: str, raw: dict[str, Any]) -> StreamSubscription:
    where = f"{function}.Events.{event_name}"
    table = _logical_id_of(raw.get("Stream"), "StreamArn", f"{where}.Stream")
    if table not in resources_of_type(names.template, TABLE_TYPE):
        raise TemplateError(f"{where}: {table} is not a DynamoDB table of this template")
    properties = names.resolve({k: v for k, v in raw.items() if k not in ("Stream", "DestinationConfig")})
    on_failure = ((raw.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    patterns = []
    for entry in (properties.get("FilterCriteria") or {}).get("Filters") or []:
        try:
            patterns.append(json.loads(entry["Pattern"]))
        except (KeyError, TypeError, ValueError) as error:
            raise TemplateError(f"{where}: unreadable filter pattern {entry!r}") from error
    return StreamSubscription(
        function=function,
        event_name=event_name,
        table=table,
        batch_size=int(properties.get("BatchSize", 100)),
        starting_position=str(properties.get("StartingPosition", "LATEST")),
        filter_patterns=tuple(patterns),
        report_batch_item_failures="ReportBatchItemFailures"
        in (properties.get("FunctionResponseTypes") or []),
        maximum_retry_attempts=int(properties.get("MaximumRetryAttempts", -1)),
        on_failure_queue=(
            None if on_failure is None else _logical_id_of(on_failure, "Arn", f"{where}.DestinationConfig")
        ),
    )
