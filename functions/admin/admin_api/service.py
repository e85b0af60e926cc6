"""Kill switches and the log level, as staff change them through the API (CONTRACT section 11),
and the API's own description.

Both live in SSM Parameter Store; every function reads them through a cache of at most 10 s, so a
change made here applies in this container at once and in every other one within that age.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import nimbus_core
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.ports import RuntimeConfig

if TYPE_CHECKING:
    from nimbus_core.http.views import KillSwitchListView, KillSwitchView

# docs/openapi.json, shipped in the shared layer: nimbus_core/openapi.json is a symbolic link to it,
# which `sam build` copies as the file itself (one committed document, `make openapi` writes it).
OPENAPI_DOCUMENT = Path(nimbus_core.__file__).parent / "openapi.json"


@cache
def openapi_document() -> str:
    """The API's OpenAPI 3.1 document as JSON text, read once per container."""
    return OPENAPI_DOCUMENT.read_text(encoding="utf-8")


def killswitch_list(config: RuntimeConfig) -> KillSwitchListView:
    """``{count: 9, items: [{id, name, state}]}`` in number order."""
    items: list[KillSwitchView] = [
        {"id": int(s), "name": s.name, "state": s in config.enabled_switches} for s in KillSwitch
    ]
    return {"count": len(items), "items": items}


def set_switch(
    deps: Deps, target: KillSwitch, *, enabled: bool, answer: PendingAnswer = NO_ANSWER
) -> RuntimeConfig:
    """Enable or disable one switch (the others as stored now), the reverification ``answer``
    recorded first (:func:`_record_first`)."""
    _record_first(deps, answer)
    return deps.config.write_killswitches(lambda now: now | {target} if enabled else now - {target})


def disable_all(deps: Deps, *, answer: PendingAnswer = NO_ANSWER) -> RuntimeConfig:
    """Disable every switch, the reverification ``answer`` recorded first."""
    _record_first(deps, answer)
    return deps.config.write_killswitches(lambda _now: frozenset())


def set_log_level(deps: Deps, name: str, *, answer: PendingAnswer = NO_ANSWER) -> RuntimeConfig:
    """Store the operator's log level (already one of the five names), the reverification
    ``answer`` recorded first."""
    _record_first(deps, answer)
    return deps.config.write_log_level(name)


def _record_first(deps: Deps, answer: PendingAnswer) -> None:
    """Record a second-factor answer before a change that no DynamoDB transaction can carry (an
    SSM write): should the change then fail, the staff member answers a new challenge; the answer
    can never be replayed for a change that landed."""
    answer.record(deps.tx)
