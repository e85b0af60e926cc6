"""Identity reverification (CONTRACT section 4 step 8 and section 9), done once by the guard.

Normal sessions on endpoints declared ``reverify=True`` must send their ``password``; scoped
sessions are never asked. The user record (with its password hash) came with the authentication
read, so this adds no round trip. A wrong password counts toward the per-account failure lock.
"""

from __future__ import annotations

from typing import Any

from nimbus_core import challenges, credentials
from nimbus_core.auth import Caller
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.tokens import hash_secret


def reverify(deps: Deps, caller: Caller, body: dict[str, Any], now: float, *, endpoint: str) -> None:
    """Pass, or raise the contract's error: 400 MISSING_FIELDS_ERROR ["password"] when the password
    is absent (also when a ``2fa`` object is sent for an account without a second factor: the
    upstream bypass), 401 INVALID_PASSWORD_ERROR when wrong, 429 while the account is locked."""
    if caller.session.scoped:
        return
    user = caller.user
    binding = challenges.Binding(endpoint=endpoint, session_id=caller.session.id)
    if user.second_factor_count > 0 and body.get("2fa") is not None:
        # The answer to a challenge replaces the password; it is recorded before the change runs
        # (the challenge is used up and the factor's replay guard moves, in one transaction).
        parsed = challenges.parse_answer(body["2fa"])
        read = (caller.challenge, user) if caller.challenge_hash == hash_secret(parsed.secret) else None
        _, ops = challenges.answer(deps, parsed, binding, now, expected_user=user.id, read=read)
        deps.tx.commit(ops)
        return
    password = body.get("password")
    if not isinstance(password, str):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["password"])
    credentials.check_password(deps, user, password, now)
    if user.second_factor_count > 0:
        raise challenges.require(deps, user, binding, now)
