"""Identity reverification (CONTRACT section 4 step 8 and section 9), done once by the guard.

Normal sessions on endpoints declared ``reverify=True`` must send their ``password``; scoped
sessions are never asked. The user record (with its password hash) came with the authentication
read, so this adds no round trip. A wrong password counts toward the per-account failure lock.
"""

from __future__ import annotations

from typing import Any

from nimbus_core import credentials
from nimbus_core.auth import Caller
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError


def reverify(deps: Deps, caller: Caller, body: dict[str, Any], now: float) -> None:
    """Pass, or raise the contract's error: 400 MISSING_FIELDS_ERROR ["password"] when the password
    is absent (also when a ``2fa`` object is sent for an account without a second factor: the
    upstream bypass), 401 INVALID_PASSWORD_ERROR when wrong, 429 while the account is locked."""
    if caller.session.scoped:
        return
    if caller.user.second_factor_count > 0:
        # The second-factor issue plugs in here: a correct password then answers the
        # SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR challenge, and a `2fa` answer replaces the
        # password. No account can enrol a factor yet, so no account reaches this branch.
        raise NotImplementedError("second-factor reverification")
    password = body.get("password")
    if not isinstance(password, str):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["password"])
    credentials.check_password(deps, caller.user, password, now)
