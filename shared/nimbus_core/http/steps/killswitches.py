"""Step 2: the kill switches listed for the endpoint, and GLOBAL on every endpoint: 503
SERVICE_UNAVAILABLE_ERROR (with the switch's number) unless the caller is staff. The runtime
configuration is the one the handler read for this request, or read here if it could not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered
from nimbus_core.platform import metrics

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint


class KillSwitches(Check):
    """Refuses all but staff while a switch of the endpoint, or GLOBAL, is on."""

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """503 SERVICE_UNAVAILABLE_ERROR: GLOBAL closes every endpoint."""
        return answered(ErrorCode.SERVICE_UNAVAILABLE_ERROR)

    def check(self, passage: Passage) -> None:
        """503 when a switch is on and the caller (authenticated only then) is not staff."""
        request = passage.request
        if request.config is None:  # not read yet, or unreadable when the handler tried: 500 if it still is
            request.config = request.deps.config.current()
        enabled = request.config.enabled_switches
        fired = [s for s in (KillSwitch.GLOBAL, *passage.endpoint.policy.killswitches) if s in enabled]
        if not fired:
            return
        caller = request.caller()
        if caller is None or not caller.user.staff:
            metrics.count(metrics.Event.KILL_SWITCH_REFUSED)
            feature = KillSwitch.GLOBAL if KillSwitch.GLOBAL in fired else min(fired)
            raise NimbusError(ErrorCode.SERVICE_UNAVAILABLE_ERROR, feature=int(feature))
