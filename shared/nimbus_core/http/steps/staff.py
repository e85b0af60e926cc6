"""Step 4: staff endpoints refuse everyone else (403 INSUFFICIENT_PERMISSIONS_ERROR), and a staff
caller without a second factor (401 ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR): a stolen staff password
alone must not reach them. The second factor is a deployment setting, on by default; endpoints
that are not staff endpoints never ask for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.policy import Auth
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint


class Staff(Check):
    """Lets only staff, with a second factor where the deployment asks for one, through."""

    def applies(self, endpoint: Endpoint) -> bool:
        """On staff endpoints (which require a session: without one there is nobody to judge)."""
        return endpoint.policy.staff and endpoint.policy.auth is Auth.REQUIRED

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """403 INSUFFICIENT_PERMISSIONS_ERROR, 401 ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR."""
        return answered(
            ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR, ErrorCode.ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR
        )

    def check(self, passage: Passage) -> None:
        """403 for a caller who is not staff, 401 for staff without a second factor."""
        caller = passage.caller
        if caller is None:  # pragma: no cover - the session step refused the request already
            return
        if not caller.user.staff:
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
        need_factor = passage.request.deps.settings.staff_require_second_factor
        if need_factor and caller.user.second_factor_count == 0:
            raise NimbusError(ErrorCode.ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR)
