"""Step 3: the session. Required: 401 INVALID_SESSION_ERROR without a live one. On register and login
(``Auth.GUEST``) a live session means "already logged in": 401 too. The caller let through is the
one the later steps judge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.policy import Auth
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint


class Session(Check):
    """Authenticates (once per request, with the target user and the answered challenge)."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where the endpoint requires a session or refuses one."""
        return endpoint.policy.auth is not Auth.NONE

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """401 INVALID_SESSION_ERROR."""
        return answered(ErrorCode.INVALID_SESSION_ERROR)

    def check(self, passage: Passage) -> None:
        """401 unless the session is as the policy wants it; the caller, for the later steps."""
        auth = passage.endpoint.policy.auth
        caller = passage.request.caller()
        if auth is Auth.REQUIRED and caller is None:
            raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
        if auth is Auth.GUEST and caller is not None:
            raise NimbusError(ErrorCode.INVALID_SESSION_ERROR)
        passage.caller = caller
