"""Which AWS operation a raw request to the emulator is, read from the wire like AWS reads it."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

import botocore.session

# The wire protocols of the services the functions call (SQS too speaks JSON to today's SDKs).
Protocol = Literal["json", "rest-json"]

# X-Amz-Target prefixes of the JSON-protocol services we serve -> the service name faults use.
_TARGET_SERVICES = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "dynamodbstreams",
    "AmazonSSM": "ssm",
    "AmazonSQS": "sqs",
}


@dataclass(frozen=True)
class AwsOperation:
    """A service ("dynamodb", "ssm", "ses", ...), an operation name, and the wire protocol."""

    service: str
    name: str
    protocol: Protocol


def identify_operation(environ: dict[str, Any]) -> AwsOperation | None:
    """The operation of a request, or None when it is not one we can name (moto still serves it)."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        prefix, _, name = str(target).partition(".")
        return AwsOperation(_TARGET_SERVICES.get(prefix, prefix.lower()), name, "json")
    path = str(environ.get("PATH_INFO", ""))
    if path.startswith("/v2/email/"):  # SES v2 is rest-json: the operation is the method and path
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        found = (name for verb, route, name in _sesv2_routes() if verb == method and route.fullmatch(path))
        return AwsOperation("ses", next(found, "Unknown"), "rest-json")
    return None


@functools.cache
def _sesv2_routes() -> list[tuple[str, re.Pattern[str], str]]:
    """(method, path pattern, operation) of every SES v2 operation, from botocore's model of it."""
    model = botocore.session.get_session().get_service_model("sesv2")
    routes = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        path = re.escape(http["requestUri"].partition("?")[0])
        routes.append((http["method"], re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", path)), name))
    return routes
