"""The audit line (``Policy.audit``): staff changes to other accounts and to the service log who did
what to whom, with the status answered (or about to be), whatever the outcome. Around the rate limit,
so a refused request leaves its line too; never for a request refused before it (no caller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.accounts import audit
from nimbus_core.domain.errors import NimbusError
from nimbus_core.http.steps.base import Passage, Proceed, Step

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.http.responses import Response


class Audit(Step):
    """Records one audit line once the request is answered; answers nothing itself."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where the policy asks for an audit line."""
        return endpoint.policy.audit

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """``proceed()``, then the audit line with the status it answered (or will answer)."""
        caller, request = passage.caller, passage.request
        if caller is None:
            return proceed()
        status = 500
        try:
            response = proceed()
            status = response.status_code
            return response
        except NimbusError as refused:
            status = refused.status
            raise
        finally:
            ids = getattr(request.body, "ids", None)
            audit.record(
                caller,
                endpoint=request.endpoint,
                path=dict(request.path),
                ids=list(ids) if isinstance(ids, list) else None,
                status=status,
                source_ip=request.source_ip,
                now=request.now,
            )
