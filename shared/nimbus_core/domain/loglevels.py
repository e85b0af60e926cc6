"""The five log level names of the seed and their meaning for Python logging."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

    from nimbus_core.domain.deps import Deps

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
    set_log_level(logger, level)


def set_log_level(logger: Logger, level: str) -> None:
    """Give ``logger`` (and so every child logger) the level ``level`` (one of the five names)."""
    # On the standard library loggers: Powertools' setLevel turns NONE (CRITICAL + 1) into the name
    # "LEVEL 51" and refuses it. Only when it changes: setLevel clears every logger's level cache.
    target = logging.getLogger(logger.name)
    if target.level != LEVELS[level]:
        target.setLevel(LEVELS[level])
        _inherit(target)
    elif len(logging.root.manager.loggerDict) != _seen.loggers:  # a module imported since
        _inherit(target)


FIXED_LEVEL = "nimbus_fixed_level"  # set on a logger that keeps its own level (the audit trail)


class _Seen:
    loggers = 0  # how many loggers existed when children last inherited


_seen = _Seen()


def _inherit(parent: logging.Logger) -> None:
    """Make the parent's child loggers follow its level: Powertools gives each child logger a level
    of its own (INFO) when it is created, which the operator's level would not reach."""
    prefix = parent.name + "."
    loggers = list(logging.root.manager.loggerDict.items())
    _seen.loggers = len(loggers)
    for name, child in loggers:
        if (
            name.startswith(prefix)
            and isinstance(child, logging.Logger)
            and child.level != logging.NOTSET
            and not getattr(child, FIXED_LEVEL, False)
        ):
            child.setLevel(logging.NOTSET)
