"""Operator-controlled runtime configuration from SSM Parameter Store: kill switches and log level.

Both parameters are fetched together (one GetParameters call) and cached by Powertools for at most
``config_cache_seconds`` (10 s by contract), so a flipped switch takes effect within that time and a
warm function makes no SSM call per request. If SSM fails, the last value read is kept: a parameter
store outage must not take the API down, and a function that never read the config fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.parameters import SSMProvider

from nimbus_core.adapters.clients import ssm
from nimbus_core.killswitches import KillSwitch, parse_enabled
from nimbus_core.loglevels import DEFAULT_LEVEL, normalize
from nimbus_core.settings import get_settings

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """A snapshot of the operator-controlled settings."""

    enabled_switches: frozenset[KillSwitch]
    log_level: str


class ConfigUnavailableError(RuntimeError):
    """SSM did not return every runtime configuration parameter."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"SSM returned no value for {', '.join(missing)}")


@cache
def _provider() -> SSMProvider:
    return SSMProvider(boto3_client=ssm())


_last_good: list[RuntimeConfig] = []


def current() -> RuntimeConfig:
    """The runtime configuration, at most ``config_cache_seconds`` old."""
    settings = get_settings()
    names: dict[str, dict[str, object]] = {
        settings.killswitch_parameter: {},
        settings.log_level_parameter: {},
    }
    try:
        values = _provider().get_parameters_by_name(
            parameters=names, max_age=settings.config_cache_seconds, decrypt=False
        )
        # Powertools answers an SSM InternalServerError with an empty result instead of raising;
        # taking that as "no switch enabled" would fail open, so a partial answer is a failure.
        missing = [name for name in names if name not in values]
        if missing:
            raise ConfigUnavailableError(missing)
    except Exception:
        if not _last_good:
            raise
        _log.warning("SSM unavailable; keeping the last runtime configuration read", exc_info=True)
        return _last_good[0]
    config = RuntimeConfig(
        enabled_switches=parse_enabled(str(values.get(settings.killswitch_parameter, ""))),
        log_level=normalize(values.get(settings.log_level_parameter)) or DEFAULT_LEVEL,
    )
    _last_good[:] = [config]
    return config


def reset() -> None:
    """Forget cached values (tests)."""
    _provider.cache_clear()
    _last_good.clear()
