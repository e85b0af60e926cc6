"""Business metrics as CloudWatch Embedded Metric Format log lines (Powertools Metrics).

EMF costs no API call: CloudWatch turns the function's log line into metrics. Only requests that
recorded something print one, so reads like GET /users/me add no log volume. Metrics are
bookkeeping: a failure to emit them is logged and never fails the request.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from nimbus_core.platform.settings import get_settings

_log = Logger(child=True)


class Event(StrEnum):
    """What the service counts."""

    REGISTERED = "Registered"
    LOGIN_SUCCEEDED = "LoginSucceeded"
    LOGIN_FAILED = "LoginFailed"  # a wrong password
    RATE_LIMITED = "RateLimited"  # any 429, per-IP, per-user or per-account
    KILL_SWITCH_REFUSED = "KillSwitchRefused"
    MAIL_SENT = "MailSent"  # an outbox message accepted by SES
    MAIL_DEAD_LETTERED = "MailDeadLettered"  # an outbox message given up on, in the dead-letter queue
    MAIL_THROTTLED = "MailThrottled"  # SES refused a message for its sending rate or daily quota
    MAIL_BOUNDED = "MailBounded"  # a new sign-in notice not sent: another told its account this hour
    SESSIONS_SWEPT = "SessionsSwept"  # stale session items deleted by the sweep function
    SECOND_FACTOR_CHALLENGED = "SecondFactorChallenged"  # a correct password asked for a second factor
    SECOND_FACTOR_PASSED = "SecondFactorPassed"
    SECOND_FACTOR_FAILED = "SecondFactorFailed"  # a wrong second-factor answer
    RECOVERY_MAILED = "RecoveryMailed"  # a recovery link queued (never answered: the 201 is the same)
    PASSWORD_RESET = "PasswordReset"  # a password set with a recovery link
    ACTIVITY_LOST = "ActivityLost"  # an activity event whose write failed (the request went on)
    ACTIVITY_RECORDED = "ActivityRecorded"  # events the activity function stored


@cache
def _metrics() -> Metrics:
    # Created on first use, not at import: the namespace comes from the deployment's settings.
    return Metrics(namespace=get_settings().metrics_namespace)


def begin() -> None:
    """Start an invocation with no metrics recorded (Powertools keeps them per process)."""
    _metrics().clear_metrics()


def count(event: Event, value: int = 1) -> None:
    """Count ``value`` occurrences (one by default) of ``event`` in this invocation."""
    _metrics().add_metric(name=event.value, unit=MetricUnit.Count, value=value)


def flush() -> None:
    """Print this request's metrics, if it recorded any (called once per invocation)."""
    metrics = _metrics()
    if not metrics.metric_set:
        return
    try:
        metrics.flush_metrics()
    except Exception:
        _log.warning("could not emit metrics", exc_info=True)
        metrics.clear_metrics()


def reset() -> None:
    """Forget the metrics object (tests change settings between cases)."""
    _metrics.cache_clear()
