"""Operator-controlled runtime configuration from SSM Parameter Store: kill switches and log level.

Both parameters are fetched together (one GetParameters call) and cached by Powertools for at most
``max_age`` seconds (10 s by contract), so a flipped switch takes effect within that time and a warm
function makes no SSM call per request. If SSM fails, the last value read is kept: a parameter store
outage must not take the API down, and a function that never read the config fails closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.parameters import SSMProvider

from nimbus_core.errors import DependencyError
from nimbus_core.killswitches import parse_enabled
from nimbus_core.loglevels import DEFAULT_LEVEL, normalize
from nimbus_core.ports import RuntimeConfig

if TYPE_CHECKING:
    from types_boto3_ssm import SSMClient

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)


class SsmRuntimeConfig:
    """The :class:`nimbus_core.ports.RuntimeConfigSource` on two SSM parameters."""

    def __init__(
        self, client: SSMClient, *, killswitch_parameter: str, log_level_parameter: str, max_age: int
    ) -> None:
        self._provider = SSMProvider(boto3_client=client)
        self._names = (killswitch_parameter, log_level_parameter)
        self._max_age = max_age
        self._last_good: RuntimeConfig | None = None

    def current(self) -> RuntimeConfig:
        """The runtime configuration, at most ``max_age`` seconds old."""
        killswitches, log_level = self._names
        try:
            values = self._provider.get_parameters_by_name(
                parameters={killswitches: {}, log_level: {}}, max_age=self._max_age, decrypt=False
            )
            # Powertools answers an SSM InternalServerError with an empty result instead of raising;
            # taking that as "no switch enabled" would fail open, so a partial answer is a failure.
            missing = [name for name in self._names if name not in values]
            if missing:
                raise DependencyError(f"SSM returned no value for {', '.join(missing)}")
        except Exception as exc:
            if self._last_good is None:
                raise DependencyError("runtime configuration unavailable") from exc
            _log.warning("SSM unavailable; keeping the last runtime configuration read", exc_info=True)
            return self._last_good
        config = RuntimeConfig(
            enabled_switches=parse_enabled(str(values.get(killswitches, ""))),
            log_level=normalize(values.get(log_level)) or DEFAULT_LEVEL,
        )
        self._last_good = config
        return config

    def forget(self) -> None:
        """Drop the cached values (tests flip switches and want them seen at once)."""
        self._provider.clear_cache()
        self._last_good = None
