"""The kill switches of the seed specification: names, numbers, and how they are stored.

Each switch is its own SSM parameter, ``<path>/<NAME>`` holding ``on`` or ``off`` (CONTRACT 11):
a change writes only the switches it changes, so two staff flipping different switches at the
same moment never lose either change, which one shared parameter could not promise (SSM has no
conditional write).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

ON = "on"
OFF = "off"


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


_BY_ID = {str(switch.value): switch for switch in KillSwitch}


def by_id(text: str) -> KillSwitch | None:
    """The switch whose id is ``text`` written in canonical decimal (``"4"``), else None.

    Only the exact spelling names a switch (CONTRACT 11): ``int()`` would also read ``"08"``,
    ``"+4"``, ``" 4"``, ``"4_0"`` and other scripts' digits (``"٤"``), and so let a typo or an
    unexpected spelling reach a switch it does not name.
    """
    return _BY_ID.get(text)


def parameter_names(path: str) -> dict[KillSwitch, str]:
    """Each switch's SSM parameter name under the stage's ``path`` (``/nimbus/dev/killswitches``)."""
    base = path.rstrip("/")
    return {switch: f"{base}/{switch.name}" for switch in KillSwitch}


def is_on(value: str | None) -> bool:
    """Whether a stored value turns its switch on: ``on`` in any case, surrounding blanks ignored.

    Anything else reads as off rather than failing every request: a typo by an operator must not
    take the API down. The API and the operator tool write only ``on`` and ``off``.
    """
    return value is not None and value.strip().lower() == ON


def stored_value(enabled: bool) -> str:
    """The value a switch's parameter holds for ``enabled``."""
    return ON if enabled else OFF


def enabled_in(values: Mapping[str, str], names: Mapping[KillSwitch, str]) -> frozenset[KillSwitch]:
    """The switches that are on, given parameter values by name and each switch's name."""
    return frozenset(switch for switch, name in names.items() if is_on(values.get(name)))
