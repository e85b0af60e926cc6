"""Client side of the emulator's control endpoints (``/_nimbus/faults``, ``/_nimbus/mail``,
``/_nimbus/streams/trim``), for tests, the stream poller and ``nimbus mail``; each call takes the
emulator's URL (``aws_endpoint_url`` in serve.json)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, cast

TIMEOUT_SECONDS = 10.0


class ControlError(RuntimeError):
    """The emulator could not be reached or refused the request."""


def _call(method: str, url: str, payload: Any = None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    # Only http URLs from serve.json or a test reach here, never user-supplied schemes.
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", "replace")
        raise ControlError(f"{method} {url}: {error.code} {detail}") from error
    except (urllib.error.URLError, OSError) as error:
        raise ControlError(f"cannot reach the AWS emulator at {url}: {error}") from error


def inject_fault(
    aws_endpoint_url: str,
    service: str,
    operation: str = "*",
    *,
    status: int = 500,
    code: str = "InternalServerError",
    times: int | None = None,
    after: int = 0,
) -> dict[str, Any]:
    """Make matching AWS requests fail once ``after`` went through (``times`` None: until
    :func:`clear_faults`)."""
    spec = {"service": service, "operation": operation, "status": status, "code": code}
    url = f"{aws_endpoint_url}/_nimbus/faults"
    return cast(dict[str, Any], _call("POST", url, spec | {"times": times, "after": after}))


def list_faults(aws_endpoint_url: str) -> list[dict[str, Any]]:
    """The active faults (with the uses left in ``times``)."""
    return cast(list[dict[str, Any]], _call("GET", f"{aws_endpoint_url}/_nimbus/faults"))


def clear_faults(aws_endpoint_url: str) -> None:
    """Remove every injected fault."""
    _call("DELETE", f"{aws_endpoint_url}/_nimbus/faults")


def read_mail(aws_endpoint_url: str) -> list[dict[str, Any]]:
    """Every captured email, oldest first: ``{"id","timestamp","from","to","subject","text","html"}``."""
    return cast(list[dict[str, Any]], _call("GET", f"{aws_endpoint_url}/_nimbus/mail"))


def clear_mail(aws_endpoint_url: str) -> None:
    """Forget every captured email."""
    _call("DELETE", f"{aws_endpoint_url}/_nimbus/mail")


def trim_stream(aws_endpoint_url: str, stream_arn: str, before: int) -> int:
    """Drop the records of ``stream_arn`` below sequence number ``before``; returns how many went."""
    answer: dict[str, int] = _call(
        "POST", f"{aws_endpoint_url}/_nimbus/streams/trim", {"streamArn": stream_arn, "before": str(before)}
    )
    return answer["trimmed"]
