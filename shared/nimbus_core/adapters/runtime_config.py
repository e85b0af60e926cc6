"""Operator-controlled runtime configuration from SSM Parameter Store: kill switches and log level.

The nine switch parameters and the log level (ten names, GetParameters' limit) are fetched together
in one call and kept for at most ``max_age``
seconds (10 s by contract), so a flipped switch takes effect within that time and a warm function
makes no SSM call per request. If SSM fails, the last value read is kept: a parameter store outage
must not take the API down, and a function that never read the config fails closed.

The cache is these few lines rather than Powertools' parameters utility: that utility imports
boto3's package (which loads s3transfer on every cold start: see ``clients``), and it
answered an SSM InternalServerError with an empty result that had to be caught as a failure here.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from nimbus_core.adapters.errors import aws_errors
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.killswitches import KillSwitch, enabled_in, parameter_names, stored_value
from nimbus_core.domain.loglevels import DEFAULT_LEVEL, normalize
from nimbus_core.domain.ports import RuntimeConfig

if TYPE_CHECKING:
    from types_boto3_ssm import SSMClient

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)


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
        self._fresh_until = 0.0  # monotonic time until which _last_good is served without a read

    def current(self) -> RuntimeConfig:
        """The runtime configuration, at most ``max_age`` seconds old."""
        now = monotonic()
        if self._last_good is not None and now < self._fresh_until:
            return self._last_good
        try:
            raw = self._read(self._names)
        except Exception as exc:
            if self._last_good is None:
                raise DependencyError("runtime configuration unavailable") from exc
            _log.warning("SSM unavailable; keeping the last runtime configuration read", exc_info=True)
            return self._last_good
        self._fresh_until = now + self._max_age
        if self._last_good is not None and raw == self._last_raw:
            return self._last_good  # unchanged since the last read: parsed once
        config = RuntimeConfig(
            enabled_switches=enabled_in(raw, self._switches),
            log_level=normalize(raw[self._log_level]) or DEFAULT_LEVEL,
        )
        self._last_good, self._last_raw = config, raw
        return config

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
        stored = enabled_in(self._read(tuple(self._switches.values())), self._switches)
        wanted = change(stored)
        for switch in sorted(stored ^ wanted):
            self._put(self._switches[switch], stored_value(switch in wanted))
        return self._refreshed()

    def write_log_level(self, name: str) -> RuntimeConfig:
        """Store the log level ``name``."""
        self._put(self._log_level, name)
        return self._refreshed()

    def _put(self, name: str, value: str) -> None:
        with aws_errors("PutParameter"):
            self._client.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def _refreshed(self) -> RuntimeConfig:
        # This container applies the change at once; every other one within max_age.
        self._fresh_until = 0.0
        return self.current()

    def forget(self) -> None:
        """Drop the cached values (tests flip switches and want them seen at once)."""
        self._fresh_until = 0.0
        self._last_good = self._last_raw = None
