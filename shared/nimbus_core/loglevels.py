"""The five log level names of the seed and their meaning for Python logging."""

from __future__ import annotations

import logging

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
