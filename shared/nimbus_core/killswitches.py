"""The kill switches of the seed specification: names, numbers, and the stored form."""

from __future__ import annotations

import json
from enum import IntEnum


class KillSwitch(IntEnum):
    """A feature group that staff can disable; the value is the number the API reports."""

    ACCOUNT_CREATE = 0
    ACCOUNT_MODIFY = 1
    ACCOUNT_DELETE = 2
    ACCOUNT_EMAIL_VERIFY = 3
    ACCOUNT_LOGIN = 4
    FILE_CREATE = 5
    FILE_MODIFY = 6
    FILE_DELETE = 7
    GLOBAL = 8


def parse_enabled(raw: str | None) -> frozenset[KillSwitch]:
    """Read the SSM parameter value (a JSON array of switch names) into the set of enabled switches.

    Unknown names are ignored rather than failing every request: a typo by an operator must not
    take the API down. The operator tool refuses unknown names before writing.
    """
    if not raw:
        return frozenset()
    try:
        names = json.loads(raw)
    except ValueError:
        return frozenset()
    if not isinstance(names, list):
        return frozenset()
    return frozenset(KillSwitch[n] for n in names if isinstance(n, str) and n in KillSwitch.__members__)


def serialize_enabled(enabled: frozenset[KillSwitch] | set[KillSwitch]) -> str:
    """The stored form of a set of enabled switches: a JSON array of names in number order."""
    return json.dumps([s.name for s in sorted(enabled)])
