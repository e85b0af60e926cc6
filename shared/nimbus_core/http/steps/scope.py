"""Step 5: what a scoped session (an API key) may reach: 403 INSUFFICIENT_PERMISSIONS_ERROR when it
lacks the endpoint's scope (and ALL), on endpoints closed to scoped sessions, and on the accounts a
policy closes to it: its own where the same change through /users/me is closed to it
(``scoped_self``), and staff accounts where the change would hand the account to whoever holds the
key (``scoped_staff``). Normal sessions pass."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.scopes import grants
from nimbus_core.http.policy import Auth
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.sessions.auth import Caller


class Scope(Check):
    """Judges a scoped session against the policy's scope and the accounts it closes."""

    def applies(self, endpoint: Endpoint) -> bool:
        """On endpoints that require a session and close anything to scoped sessions."""
        policy = endpoint.policy
        closes = (
            policy.scope is not None
            or not policy.scoped_sessions
            or not policy.scoped_self
            or not policy.scoped_staff
        )
        return policy.auth is Auth.REQUIRED and closes

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """403 INSUFFICIENT_PERMISSIONS_ERROR (also answered by a route that calls
        :meth:`~nimbus_core.http.request.Request.refuse_own_account_to_scoped` for its body's ids)."""
        return answered(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)

    def check(self, passage: Passage) -> None:
        """403 for a scoped session the policy keeps out."""
        caller, policy, target_id = passage.caller, passage.endpoint.policy, passage.request.target_id
        if caller is None or caller.session.permission_flags is None:
            return
        flags = caller.session.permission_flags
        if not policy.scoped_sessions:
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
        if policy.scope is not None and not grants(flags, policy.scope):
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
        # The path names the account, so this is known here, before the body is read: a staff path to
        # a change that /users/me keeps from scoped sessions is closed to them on their own account.
        if not policy.scoped_self and target_id == caller.user.id:
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
        # And a change that would hand a staff account to whoever holds the key (its password, address,
        # factors, verification) is closed to scoped sessions on every staff account: the target was
        # read with the caller, in the same round trip.
        if not policy.scoped_staff and _names_staff(caller, target_id):
            raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)


def _names_staff(caller: Caller, target_id: str | None) -> bool:
    """Whether the path's user (read with the caller) is a staff account, the caller's own included."""
    if target_id is None:
        return False
    if target_id == caller.user.id:
        return caller.user.staff
    return caller.target_id == target_id and caller.target is not None and caller.target.staff
