"""The five log level names of the seed and their meaning for Python logging."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

    from nimbus_core.deps import Deps

# NONE silences everything: one step above CRITICAL.
LEVELS: dict[str, int] = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "NONE": logging.CRITICAL + 1,
}
DEFAULT_LEVEL = "INFO"


def normalize(name: object) -> str | None:
    """The canonical name for ``name`` (case-insensitive), or None if it is not one of the five.

    Numbers are refused on purpose: upstream accepted numeric levels, which the contract forbids.
    """
    if not isinstance(name, str):
        return None
    upper = name.strip().upper()
    return upper if upper in LEVELS else None


def apply_log_level(logger: Logger, deps: Callable[[], Deps]) -> None:
    """Give ``logger`` (and so every child logger) the operator's level from the runtime config.

    If the config cannot be read (SSM unavailable), the current level stays: logging must not
    fail a request or a batch.
    """
    try:
        level = deps().config.current().log_level
    except Exception:
        return
    logger.setLevel(LEVELS[level])
