"""Request bodies of the runtime-configuration endpoints (``password`` and ``2fa`` are the guard's)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel
from pydantic_core import PydanticCustomError

from nimbus_core.domain.killswitches import KillSwitch, by_id
from nimbus_core.domain.loglevels import normalize
from nimbus_core.http.validation import Body


def _level(value: str) -> str:
    name = normalize(value)
    if name is None:  # numbers spelt as strings included: upstream accepted them, the contract not
        raise PydanticCustomError("invalid_loglevel", "not one of DEBUG, INFO, WARN, ERROR, NONE")
    return name


class SetLogLevelBody(Body):
    """PATCH /loglevel: one of the five names, any case."""

    name: Annotated[str, AfterValidator(_level)]


def _switch_number(value: str) -> str:
    if by_id(value) is None:  # "08", "+4", " 4", "4.0", "٤": never a switch (CONTRACT 11)
        raise PydanticCustomError("unknown_killswitch", "not a kill switch number (0..8)")
    return value


class KillSwitchPath(BaseModel):
    """``/killswitches/:id``: the switch's number, 0..8 (anything else 400 INVALID_FIELDS_ERROR,
    never a 500 as upstream answered)."""

    id: Annotated[str, AfterValidator(_switch_number)]

    @property
    def switch(self) -> KillSwitch:
        """The switch the path names."""
        return KillSwitch(int(self.id))  # canonical decimal: the validator refused every other id
