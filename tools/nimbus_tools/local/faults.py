"""Which AWS operation a request to the emulator is, read from the wire as AWS reads it, and
injected AWS faults, for tests proving how the functions answer when DynamoDB, SSM, SES or SQS
fail: the emulator consults its :class:`FaultRegistry` on every request (``/_nimbus/faults``), and
in-process tests put :func:`botocore_hook` on the functions' clients, which hands botocore's own
parser the very response the emulator would send, so both kinds of test see the same error."""

from __future__ import annotations

import functools
import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast, get_args

import botocore.session
from botocore.awsrequest import HeadersDict
from botocore.model import OperationModel
from botocore.parsers import create_parser

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


FAULT_SERVICES = ("dynamodb", "ssm", "ses", "sqs")
FAULT_MESSAGE = "injected fault"
# botocore's service names where the fault service is another: SES v2 is "ses", as on the wire.
_SDK_SERVICES = {"sesv2": "ses"}


class FaultSpecError(ValueError):
    """A fault request body that cannot be used."""


@dataclass
class Fault:
    """Matching calls answer ``status``/``code`` once ``after`` of them went through; ``times`` is
    how many answers are left (None: until cleared)."""

    id: int
    service: str
    operation: str
    status: int
    code: str
    times: int | None
    after: int = 0

    def matches(self, operation: AwsOperation) -> bool:
        """Whether this fault applies to ``operation``."""
        return self.service == operation.service and self.operation in ("*", operation.name)


def _count(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class FaultRegistry:
    """Thread-safe list of active faults; the first matching fault answers a call."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def add(self, spec: Any) -> Fault:
        """Validate a JSON fault spec (``service``, ``operation``, ``status``, ``code``, ``times``,
        ``after``) and activate it."""
        if not isinstance(spec, dict):
            raise FaultSpecError("expected a JSON object")
        service = spec.get("service")
        if service not in FAULT_SERVICES:
            raise FaultSpecError(f"service must be one of {', '.join(FAULT_SERVICES)}")
        operation, status, after = spec.get("operation", "*"), spec.get("status", 500), spec.get("after", 0)
        code, times = spec.get("code", "InternalServerError"), spec.get("times")
        if not isinstance(operation, str) or not operation:
            raise FaultSpecError("operation must be an operation name or '*'")
        if not _count(status, 400) or status > 599:
            raise FaultSpecError("status must be an HTTP error status (400-599)")
        if not isinstance(code, str) or not code:
            raise FaultSpecError("code must be an AWS error code such as InternalServerError")
        if times is not None and not _count(times, 1):
            raise FaultSpecError("times must be null (forever) or a positive integer")
        if not _count(after, 0):
            raise FaultSpecError("after must be a number of calls (0 or more)")
        with self._lock:
            fault = Fault(next(self._ids), service, operation, status, code, times, after)
            self._faults.append(fault)
        return fault

    def fail(
        self,
        service: str,
        operation: str = "*",
        code: str = "InternalServerError",
        status: int = 500,
        *,
        after: int = 0,
        times: int | None = None,
    ) -> Fault:
        """Fail ``operation`` of ``service`` ("*": every one) with ``code``/``status`` once ``after``
        calls have gone through, ``times`` times (None: until :meth:`clear`)."""
        return self.add(
            {"service": service, "operation": operation, "code": code, "status": status}
            | {"after": after, "times": times}
        )

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()

    def active(self) -> list[dict[str, Any]]:
        """The active faults (a snapshot), as the control endpoint reports them."""
        with self._lock:
            return [asdict(f) for f in self._faults]

    def take(self, operation: AwsOperation) -> Fault | None:
        """The fault that answers ``operation``, counting one use of it; None if there is none (a
        fault still letting ``after`` calls through counts this one and lets it through)."""
        with self._lock:
            for fault in self._faults:
                if not fault.matches(operation):
                    continue
                if fault.after:
                    fault.after -= 1
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                return fault
        return None


def fault_response(fault: Fault, operation: AwsOperation) -> tuple[int, list[tuple[str, str]], bytes]:
    """The AWS-style error (status, headers, body) for ``fault`` in the operation's protocol."""
    headers: list[tuple[str, str]] = [("x-amzn-RequestId", f"nimbus-fault-{fault.id}")]
    if operation.protocol == "json":
        # awsJson: the SDK reads the code from "__type".
        body = json.dumps({"__type": fault.code, "message": FAULT_MESSAGE}).encode()
        version = "1.0" if operation.service.startswith("dynamodb") else "1.1"
        headers.append(("Content-Type", f"application/x-amz-json-{version}"))
    else:
        # restJson: the SDK reads the code from the x-amzn-ErrorType header.
        body = json.dumps({"message": FAULT_MESSAGE}).encode()
        headers += [("Content-Type", "application/json"), ("x-amzn-ErrorType", fault.code)]
    headers.append(("Content-Length", str(len(body))))
    return fault.status, headers, body


@dataclass(frozen=True)
class SdkAnswer:
    """The HTTP response a botocore ``before-call`` handler stands in with (botocore reads its status)."""

    status_code: int
    headers: HeadersDict = field(default_factory=HeadersDict)
    content: bytes = b""


# It answers (SdkAnswer, parsed) or None; botocore's stubs type every handler as returning None.
BeforeCallHook = Callable[..., Any]


def botocore_hook(registry: FaultRegistry) -> BeforeCallHook:
    """A botocore ``before-call`` handler answering the calls a fault of ``registry`` matches with
    that fault's error, as the emulator would send it; other calls go on to AWS (or moto)."""

    def before_call(model: OperationModel, **_: Any) -> tuple[SdkAnswer, dict[str, Any]] | None:
        service = model.service_model
        if service.protocol not in get_args(Protocol):
            return None  # no fault service speaks another protocol
        protocol = cast(Protocol, service.protocol)
        operation = AwsOperation(
            _SDK_SERVICES.get(service.service_name, service.service_name), model.name, protocol
        )
        if (fault := registry.take(operation)) is None:
            return None
        status, header_list, body = fault_response(fault, operation)
        headers = HeadersDict(dict(header_list))
        response = {"status_code": status, "headers": headers, "body": body}
        # An error is parsed without the output shape, which operations without output lack.
        parsed: dict[str, Any] = create_parser(protocol).parse(response, cast(Any, model.output_shape))
        return SdkAnswer(status, headers, body), parsed

    return before_call
