"""Password checks with the per-account failure lock (login and reverification share them)."""

from __future__ import annotations

from nimbus_core import metrics, passwords
from nimbus_core.deps import Deps
from nimbus_core.errors import ErrorCode, NimbusError, RateLimitedError
from nimbus_core.models import User
from nimbus_core.ports import CounterState, WriteOp
from nimbus_core.ratelimits import ACCOUNT_AUTH_FAILURES


def refuse_if_locked(user: User, now: float) -> None:
    """429 (Retry-After only) while the account is locked by failed answers, whatever the IP."""
    state = CounterState(False, user.auth_failures, ACCOUNT_AUTH_FAILURES.limit, user.auth_failures_reset_at)
    if user.auth_failures >= ACCOUNT_AUTH_FAILURES.limit and user.auth_failures_reset_at > now:
        metrics.count(metrics.Event.RATE_LIMITED)
        raise RateLimitedError(retry_after=state.reset_in(now), account_lock=True)


def check_password(deps: Deps, user: User, password: str, now: float) -> None:
    """Pass if ``password`` is the user's; otherwise count the failure on the account and answer
    401 INVALID_PASSWORD_ERROR, or 429 once the failure that was just counted locks the account."""
    refuse_if_locked(user, now)
    if passwords.verify_password(user.password_hash, password):
        return
    metrics.count(metrics.Event.LOGIN_FAILED)
    record_failure(deps, user, now)
    raise NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)


def record_failure(deps: Deps, user: User, now: float) -> None:
    """Count one failed password or second-factor answer; 429 when it exceeds the lock's limit."""
    state = deps.users.count_auth_failure(
        user.id, limit=ACCOUNT_AUTH_FAILURES.limit, window=ACCOUNT_AUTH_FAILURES.window, now=now
    )
    if state is not None and not state.allowed:  # None: the account was deleted meanwhile
        metrics.count(metrics.Event.RATE_LIMITED)
        raise RateLimitedError(retry_after=state.reset_in(now), account_lock=True)


def rehash_ops(deps: Deps, user: User, password: str, now: float) -> list[WriteOp]:
    """After ``password`` was proven: the write that replaces a stored hash made otherwise than the
    current argon2id profile (an imported bcrypt hash, or older parameters), on condition that the
    user still has that hash, is not banned and not locked. Commit it with the request's own write,
    so each user pays for the old hash once."""
    if not passwords.should_rehash(user.password_hash, password):
        return []
    new_hash = passwords.hash_password(password)
    return [
        deps.users.credentials_unchanged_op(
            user, new_password_hash=new_hash, now=now, failure_limit=ACCOUNT_AUTH_FAILURES.limit
        )
    ]
