"""The audit trail: one structured log line for every staff request that can change an account or
the service (``Policy.audit``), whatever its outcome.

A line says who (the staff user and session, the source IP), what (the endpoint and its outcome),
whom (the path's user, or the ids of a bulk deletion) and when. It never holds a body: no
password, second-factor answer, new address or reason. Its logger keeps INFO whatever the
operator's log level, so even NONE cannot switch the trail off.
"""

from __future__ import annotations

import logging
from typing import Any

from aws_lambda_powertools import Logger

from nimbus_core.domain.loglevels import FIXED_LEVEL
from nimbus_core.platform.clock import iso
from nimbus_core.sessions.auth import Caller

# A child of the functions' Powertools logger (same JSON lines, same destination), with a level of
# its own: the operator's level is set on the parent and does not reach it.
_log = Logger(child=True)
_trail = logging.getLogger(_log.name)
_trail.setLevel(logging.INFO)
setattr(_trail, FIXED_LEVEL, True)


def record(
    caller: Caller,
    *,
    endpoint: str,
    path: dict[str, str],
    ids: list[str] | None,
    status: int,
    source_ip: str,
    now: float,
) -> None:
    """Log one audit line (``endpoint`` is ``METHOD /path/<param>``, as routed)."""
    entry: dict[str, Any] = {
        "at": iso(now),
        "actor": caller.user.id,
        "actorSession": caller.session.id,
        "sourceIp": source_ip,
        "action": endpoint,
        "target": path,
        "status": status,
    }
    if ids is not None:
        entry["targetIds"] = ids
    _log.info("audit", extra={"audit": entry})
