"""Injected AWS faults: the registry behind ``POST /_nimbus/faults`` and the error responses it makes.

Tests use faults to prove the functions answer 503/500 correctly when DynamoDB, SSM or SES fail,
without any mocking inside the function processes.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import asdict, dataclass
from typing import Any
from xml.sax.saxutils import escape

from nimbus_tools.local.operations import AwsOperation

FAULT_SERVICES = ("dynamodb", "ssm", "ses", "sqs")
FAULT_MESSAGE = "injected fault"


class FaultSpecError(ValueError):
    """A fault request body that cannot be used."""


@dataclass
class Fault:
    """Matching requests answer ``status``/``code``; ``times`` None means until cleared."""

    id: int
    service: str
    operation: str
    status: int
    code: str
    times: int | None

    def matches(self, operation: AwsOperation) -> bool:
        """Whether this fault applies to ``operation``."""
        return self.service == operation.service and self.operation in ("*", operation.name)

    def as_json(self) -> dict[str, Any]:
        """The fault as the control endpoint reports it."""
        return asdict(self)


class FaultRegistry:
    """Thread-safe list of active faults; the first matching fault answers a request."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def add(self, spec: Any) -> Fault:
        """Validate a JSON fault spec (see module doc) and activate it."""
        if not isinstance(spec, dict):
            raise FaultSpecError("expected a JSON object")
        service = spec.get("service")
        if service not in FAULT_SERVICES:
            raise FaultSpecError(f"service must be one of {', '.join(FAULT_SERVICES)}")
        operation = spec.get("operation", "*")
        status = spec.get("status", 500)
        code = spec.get("code", "InternalServerError")
        times = spec.get("times")
        if not isinstance(operation, str) or not operation:
            raise FaultSpecError("operation must be an operation name or '*'")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise FaultSpecError("status must be an HTTP error status (400-599)")
        if not isinstance(code, str) or not code:
            raise FaultSpecError("code must be an AWS error code such as InternalServerError")
        if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
            raise FaultSpecError("times must be null (forever) or a positive integer")
        with self._lock:
            fault = Fault(next(self._ids), service, operation, status, code, times)
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()

    def active(self) -> list[Fault]:
        """A snapshot of the active faults."""
        with self._lock:
            return [Fault(**asdict(f)) for f in self._faults]

    def take(self, operation: AwsOperation) -> Fault | None:
        """The fault that answers ``operation``, counting one use of it; None if there is none."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(operation):
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
    elif operation.protocol == "rest-json":
        # restJson: the SDK reads the code from the x-amzn-ErrorType header.
        body = json.dumps({"message": FAULT_MESSAGE}).encode()
        headers += [("Content-Type", "application/json"), ("x-amzn-ErrorType", fault.code)]
    else:
        body = (
            "<ErrorResponse><Error><Type>Receiver</Type>"
            f"<Code>{escape(fault.code)}</Code><Message>{FAULT_MESSAGE}</Message>"
            f"</Error><RequestId>nimbus-fault-{fault.id}</RequestId></ErrorResponse>"
        ).encode()
        headers.append(("Content-Type", "text/xml"))
    headers.append(("Content-Length", str(len(body))))
    return fault.status, headers, body
