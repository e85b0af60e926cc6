"""Step 4 and 5 of the guard (CONTRACT section 4): staff, the staff second factor, and what a scoped
session may reach: its scope, and the accounts a policy closes to it (its own, and staff accounts
where a change would hand the account to whoever holds the key)."""

from __future__ import annotations

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.scopes import grants
from nimbus_core.http.policy import Policy
from nimbus_core.sessions.auth import Caller


def check_permissions(
    policy: Policy, caller: Caller | None, *, staff_need_factor: bool, target_id: str | None
) -> None:
    """403 INSUFFICIENT_PERMISSIONS_ERROR (or 401 ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR for staff
    without a second factor) unless ``policy`` lets ``caller`` through to the path's user
    ``target_id``, read with the caller (None: no session, judged at step 3)."""
    if caller is None:
        return
    if policy.staff and not caller.user.staff:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    # Staff endpoints only (CONTRACT section 4 step 4): a stolen staff password alone must not reach
    # them. A deployment setting, on by default.
    if policy.staff and staff_need_factor and caller.user.second_factor_count == 0:
        raise NimbusError(ErrorCode.ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR)
    flags = caller.session.permission_flags
    if flags is not None and not policy.scoped_sessions:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    if policy.scope is not None and not grants(flags, policy.scope):
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    # The path names the account, so this is known here, before the body is read: a staff path to
    # a change that /users/me keeps from scoped sessions is closed to them on their own account.
    if flags is not None and not policy.scoped_self and target_id == caller.user.id:
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)
    # And a change that would hand a staff account to whoever holds the key (its password, address,
    # factors, verification) is closed to scoped sessions on every staff account: the target was
    # read with the caller, in the same round trip.
    if flags is not None and not policy.scoped_staff and _names_staff(caller, target_id):
        raise NimbusError(ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR)


def _names_staff(caller: Caller, target_id: str | None) -> bool:
    """Whether the path's user (read with the caller) is a staff account, the caller's own included."""
    if target_id is None:
        return False
    if target_id == caller.user.id:
        return caller.user.staff
    return caller.target_id == target_id and caller.target is not None and caller.target.staff
