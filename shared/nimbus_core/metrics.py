"""Business metrics as CloudWatch Embedded Metric Format log lines (Powertools Metrics).

EMF costs no API call: CloudWatch turns the function's log line into metrics. Only requests that
recorded something print one, so reads like GET /users/me add no log volume.
"""

from __future__ import annotations

from enum import StrEnum

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

_metrics = Metrics()


class Event(StrEnum):
    """What the service counts."""

    REGISTERED = "Registered"
    LOGIN_SUCCEEDED = "LoginSucceeded"
    LOGIN_FAILED = "LoginFailed"  # a wrong password
    RATE_LIMITED = "RateLimited"  # any 429, per-IP, per-user or per-account
    KILL_SWITCH_REFUSED = "KillSwitchRefused"


def count(event: Event) -> None:
    """Count one occurrence of ``event`` in this request."""
    _metrics.add_metric(name=event.value, unit=MetricUnit.Count, value=1)


def flush() -> None:
    """Print this request's metrics, if it recorded any (called once per invocation)."""
    if _metrics.metric_set:
        _metrics.flush_metrics()
