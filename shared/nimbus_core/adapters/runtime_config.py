"""Operator-controlled runtime configuration from SSM Parameter Store: kill switches and log level.

The nine switch parameters and the log level (ten names, GetParameters' limit) are fetched together
in one call and kept for at most ``max_age`` seconds (10 s by contract), so a flipped switch takes
effect within that time and a warm function makes no SSM call per request.

SSM's GetParameters quota is per account and region, shared by every instance, so the cache is
built for a burst (docs/operations.md, "Runtime configuration under load"):

- Each read is kept for a random part of ``max_age`` (between ``FRESH_FLOOR`` of it and all of
  it): instances started together refresh at different moments, never later than the bound.
- A cold instance (nothing read yet) retries a refused read with full-jitter backoff inside
  ``READ_BUDGET`` seconds, then fails closed (a clean 500): it never guesses the switches. After
  giving up it refuses for a moment without calling SSM, so the guard's second look in the same
  request costs nothing and a failing instance does not add to the throttling.
- A warm instance whose refresh is refused keeps its last configuration and tries again at its
  next refresh (one attempt per refresh, never a wait inside a request), logging and counting the
  configuration's age; past ``MAX_STALE`` seconds it is treated as cold and fails closed.

The cache is these few lines rather than Powertools' parameters utility: that utility imports
boto3's package (which loads s3transfer on every cold start: see ``clients``), and it
answered an SSM InternalServerError with an empty result that had to be caught as a failure here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from time import monotonic, sleep
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as ConnectionFailure

from nimbus_core.adapters.clients import SSM_ATTEMPT_SECONDS
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.killswitches import KillSwitch, enabled_in, parameter_names, stored_value
from nimbus_core.domain.loglevels import DEFAULT_LEVEL, normalize
from nimbus_core.domain.ports import RuntimeConfig
from nimbus_core.platform.settings import get_settings

if TYPE_CHECKING:
    from types_boto3_ssm import SSMClient

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)
_T = TypeVar("_T")

FRESH_FLOOR = 0.75  # a read is kept for a uniformly random 75-100 % of max_age
READ_BUDGET = 3.0  # seconds a cold request may spend reading SSM, every attempt and wait included
BACKOFF_BASE = 0.1  # full jitter: the n-th wait is uniform in [0, min(BACKOFF_CAP, BASE * 2**n)]
BACKOFF_CAP = 1.0
GIVE_UP_PAUSE = 1.0  # after a budget is spent, no new cold read for a random 50-100 % of this
MAX_STALE = 300.0  # seconds a warm instance serves its last configuration while SSM refuses reads
_THROTTLES = frozenset({"ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded"})


def _jitter(low: float, high: float) -> float:
    """A uniform draw in [low, high]: spreading instances apart, not a secret (SnapStart reseeds
    ``random`` on every restore, so restored instances do not draw alike)."""
    return random.uniform(low, high)  # noqa: S311


def _retryable(error: BaseException | None) -> bool:
    """A refusal worth another attempt: a throttle, a server error or a lost connection (not a
    denied permission or a bad request, which a retry cannot change)."""
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(error) in _THROTTLES or status >= 500
    return isinstance(error, ConnectionFailure | HTTPClientError)


def _emit(name: str, unit: MetricUnit, value: float) -> None:
    """One metric on its own EMF line at once: the runtime configuration is read before the
    request's metrics are begun, which would drop it from the request's set."""
    try:
        with single_metric(name=name, unit=unit, value=value, namespace=get_settings().metrics_namespace):
            pass
    except Exception:  # bookkeeping: never fails the request
        _log.warning("could not emit metrics", exc_info=True)


class SsmRuntimeConfig:
    """The :class:`nimbus_core.domain.deployment_ports.RuntimeConfigSource` on SSM: one parameter
    per kill switch under ``killswitch_path``, and the log level."""

    def __init__(
        self, client: SSMClient, *, killswitch_path: str, log_level_parameter: str, max_age: int
    ) -> None:
        self._client = client
        self._switches = parameter_names(killswitch_path)
        self._log_level = log_level_parameter
        self._names = (*self._switches.values(), log_level_parameter)
        self._max_age = max_age
        self._last_good: RuntimeConfig | None = None
        self._last_raw: dict[str, str] | None = None  # the values _last_good was parsed from
        self._read_at = 0.0  # monotonic time of the read _last_good comes from
        self._fresh_until = 0.0  # monotonic time until which _last_good is served without a read
        self._paused_until = 0.0  # monotonic time before which a cold read is not tried again

    def current(self) -> RuntimeConfig:
        """The runtime configuration, at most ``max_age`` seconds old while SSM answers (at most
        ``MAX_STALE`` while it refuses); raises :class:`DependencyError` when there is none."""
        now = monotonic()
        if self._last_good is not None and now < self._fresh_until:
            return self._last_good
        warm = self._last_good is not None and now - self._read_at <= MAX_STALE
        if not warm and now < self._paused_until:
            raise DependencyError("runtime configuration unavailable (SSM refused it moments ago)")
        try:
            # A warm request never waits: one attempt, and the last configuration if it fails.
            raw = self._read(self._names) if warm else self._with_retries(lambda: self._read(self._names))
        except Exception as exc:
            return self._refused(now, warm, exc)
        self._read_at, self._fresh_until = now, now + self._max_age * _jitter(FRESH_FLOOR, 1.0)
        if self._last_good is not None and raw == self._last_raw:
            return self._last_good  # unchanged since the last read: parsed once
        config = RuntimeConfig(
            enabled_switches=enabled_in(raw, self._switches),
            log_level=normalize(raw[self._log_level]) or DEFAULT_LEVEL,
        )
        self._last_good, self._last_raw = config, raw
        return config

    def _refused(self, now: float, warm: bool, exc: Exception) -> RuntimeConfig:
        """The answer when the read failed: the last configuration until its next refresh if it
        is recent enough, else a DependencyError (failing closed)."""
        if warm and self._last_good is not None:
            age = now - self._read_at
            # Served until the next refresh, and never past the staleness bound.
            next_try = now + self._max_age * _jitter(FRESH_FLOOR, 1.0)
            self._fresh_until = min(next_try, self._read_at + MAX_STALE)
            _log.warning(
                "SSM refused the runtime configuration; keeping the last one read",
                extra={"config_age_seconds": round(age, 1), "max_stale_seconds": MAX_STALE},
                exc_info=exc,
            )
            _emit("RuntimeConfigStaleSeconds", MetricUnit.Seconds, age)
            return self._last_good
        self._paused_until = monotonic() + GIVE_UP_PAUSE * _jitter(0.5, 1.0)
        _emit("RuntimeConfigUnavailable", MetricUnit.Count, 1)
        raise DependencyError("runtime configuration unavailable") from exc

    def _with_retries(self, call: Callable[[], _T]) -> _T:
        """``call``, tried again after a retryable refusal with full-jitter backoff while another
        attempt (``SSM_ATTEMPT_SECONDS`` at most, by the client's timeouts) still ends within
        ``READ_BUDGET`` of the first."""
        deadline = monotonic() + READ_BUDGET
        attempt = 0
        while True:
            try:
                return call()
            except DependencyError as exc:
                wait = _jitter(0.0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
                if not _retryable(exc.__cause__) or monotonic() + wait + SSM_ATTEMPT_SECONDS > deadline:
                    raise
            sleep(wait)
            attempt += 1

    def _read(self, names: tuple[str, ...]) -> dict[str, str]:
        """The values of ``names`` (at most ten), in one GetParameters call; a missing parameter is
        a failure (failing open, as "switch off", would let a broken deployment ignore its kill
        switches)."""
        with aws_errors("GetParameters (runtime configuration)"):
            found = self._client.get_parameters(Names=list(names))["Parameters"]
        values = {p["Name"]: p.get("Value", "") for p in found}
        missing = [name for name in names if name not in values]
        if missing:
            raise DependencyError(f"SSM returned no value for {', '.join(missing)}")
        return values

    def write_killswitches(
        self, change: Callable[[frozenset[KillSwitch]], frozenset[KillSwitch]]
    ) -> RuntimeConfig:
        """Read the switches afresh (never the cache: another container may have changed them
        seconds ago), apply ``change`` and write each switch whose state it changes, and only those.

        A switch's parameter is written by no change that leaves it alone, so staff changing
        different switches at once never undo each other; two changes of the same switch end in
        the last one, as they would if they had come one after the other.
        """
        stored = enabled_in(
            self._with_retries(lambda: self._read(tuple(self._switches.values()))), self._switches
        )
        wanted = change(stored)
        for switch in sorted(stored ^ wanted):
            self._put(self._switches[switch], stored_value(switch in wanted))
        return self._refreshed()

    def write_log_level(self, name: str) -> RuntimeConfig:
        """Store the log level ``name``."""
        self._put(self._log_level, name)
        return self._refreshed()

    def _put(self, name: str, value: str) -> None:
        def put() -> None:
            with aws_errors("PutParameter"):
                self._client.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

        self._with_retries(put)

    def _refreshed(self) -> RuntimeConfig:
        # This container applies the change at once; every other one within max_age.
        self._fresh_until = 0.0
        return self.current()

    def forget(self) -> None:
        """Drop the cached values (tests flip switches and want them seen at once)."""
        self._fresh_until = self._paused_until = 0.0
        self._last_good = self._last_raw = None
