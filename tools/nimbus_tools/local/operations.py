"""Which AWS operation a raw request to the emulator is, read from the wire like AWS reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs

Protocol = Literal["json", "rest-json", "query"]

# X-Amz-Target prefixes of the JSON-protocol services we serve -> the service name faults use.
_TARGET_SERVICES = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "dynamodbstreams",
    "AmazonSSM": "ssm",
    "AmazonSQS": "sqs",
}

# SES v2 is rest-json: the operation is the method and path.
_SESV2_OPERATIONS: list[tuple[str, str, str]] = [
    ("POST", "/v2/email/outbound-emails", "SendEmail"),
    ("POST", "/v2/email/outbound-bulk-emails", "SendBulkEmail"),
    ("POST", "/v2/email/identities", "CreateEmailIdentity"),
    ("GET", "/v2/email/identities", "ListEmailIdentities"),
    ("GET", "/v2/email/identities/", "GetEmailIdentity"),
    ("DELETE", "/v2/email/identities/", "DeleteEmailIdentity"),
]


@dataclass(frozen=True)
class AwsOperation:
    """A service ("dynamodb", "ssm", "ses", ...), an operation name, and the wire protocol."""

    service: str
    name: str
    protocol: Protocol


def identify_operation(environ: dict[str, Any], body: bytes) -> AwsOperation | None:
    """The operation of a request, or None when it is not one we can name (moto still serves it)."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        prefix, _, name = str(target).partition(".")
        return AwsOperation(_TARGET_SERVICES.get(prefix, prefix.lower()), name, "json")

    path = str(environ.get("PATH_INFO", ""))
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    if path.startswith("/v2/email/"):
        return AwsOperation("ses", _sesv2_operation(method, path), "rest-json")

    content_type = str(environ.get("CONTENT_TYPE", ""))
    if content_type.startswith("application/x-www-form-urlencoded") and body:
        action = parse_qs(body.decode("utf-8", "replace")).get("Action")
        if action:
            return AwsOperation(_signing_service(environ), action[0], "query")
    return None


def _sesv2_operation(method: str, path: str) -> str:
    for op_method, op_path, name in _SESV2_OPERATIONS:
        if method != op_method:
            continue
        if op_path.endswith("/") and path.startswith(op_path) and "/" not in path[len(op_path) :]:
            return name
        if path == op_path:
            return name
    return "Unknown"


def _signing_service(environ: dict[str, Any]) -> str:
    # "AWS4-HMAC-SHA256 Credential=KEY/20240101/us-east-1/ses/aws4_request, ..." -> "ses"
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    try:
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0]
        service = scope.split("/")[3].lower()
    except IndexError:
        return "unknown"
    # SES v1 signs as "ses" but some SDKs use its endpoint prefix "email".
    return "ses" if service == "email" else service
