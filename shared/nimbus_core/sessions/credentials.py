"""Password checks and the limits on wrong answers (CONTRACT section 8).

Two limits, each holding one kind of request and never the other:

- the login lock: failed passwords and second-factor answers at login, per account (10 per 15
  minutes, on the user item). It holds logins only: someone who knows nothing but a username must
  never keep the owner out of recovery or of their signed-in sessions.
- the reverification limit: failed passwords and second-factor answers from one signed-in session,
  per session (5 per 15 minutes, on the session item, which the authentication read brings).

A login that presents a known device valid for the account (:mod:`nimbus_core.sessions.known_devices`)
is not held by the login lock: its wrong answers are counted on the device (5 per 15 minutes), and
once the device has none left they count on the account again.

Both answer 429 with ``Retry-After`` only (``account_lock``: not the endpoint window's headers).
Recovery's wrong answers are bounded on the recovery token instead (:mod:`nimbus_core.factors.challenges`).
"""

from __future__ import annotations

from nimbus_core.domain.activity import Attempt, EventType, new_event, record_now
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.models import KnownDevice, Session, User
from nimbus_core.domain.ports import CounterState, WriteOp
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES, DEVICE_AUTH_FAILURES, REVERIFY_FAILURES
from nimbus_core.platform import metrics
from nimbus_core.sessions import passwords


def refuse_if_locked(user: User, now: float) -> None:
    """429 (Retry-After only) while the account's logins are locked by failed answers, whatever the IP."""
    _refuse_if_full(user.auth_failures, user.auth_failures_reset_at, ACCOUNT_AUTH_FAILURES.limit, now)


def check_password(
    deps: Deps,
    user: User,
    password: str,
    now: float,
    *,
    device: KnownDevice | None = None,
    attempt: Attempt | None = None,
) -> None:
    """At login: pass if ``password`` is the user's; otherwise count the failure (on the account,
    or on ``device``: a known device that lifts the lock) and answer 401 INVALID_PASSWORD_ERROR,
    or 429 once the failure that was just counted locks the account. The account's activity
    records the failure (``attempt``: from where)."""
    if device is None:
        refuse_if_locked(user, now)
    if passwords.verify_password(user.password_hash, password):
        return
    metrics.count(metrics.Event.LOGIN_FAILED)
    record_failure(deps, user, now, device=device, attempt=attempt)
    raise NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)


def record_failure(
    deps: Deps,
    user: User,
    now: float,
    *,
    device: KnownDevice | None = None,
    attempt: Attempt | None = None,
    code: ErrorCode = ErrorCode.INVALID_PASSWORD_ERROR,
) -> None:
    """Count one failed password or second-factor answer at login; 429 beyond the lock's limit.
    With a known ``device`` it is counted on the device, unless the device had none left (a
    concurrent failure took the last): then on the account, as without one. The account's
    activity records it as a failed sign-in answered ``code`` (or the 429)."""
    state = None  # the account's count: None when the device took the failure, or the user is gone
    if device is not None:
        counted = deps.tokens.count_device_failure(
            device.hash, limit=DEVICE_AUTH_FAILURES.limit, window=DEVICE_AUTH_FAILURES.window, now=now
        )
        on_device = counted is not None and counted.allowed
    if device is None or not on_device:
        state = deps.users.count_auth_failure(
            user.id, limit=ACCOUNT_AUTH_FAILURES.limit, window=ACCOUNT_AUTH_FAILURES.window, now=now
        )
    answered = ErrorCode.RATELIMITED_ERROR if state is not None and not state.allowed else code
    failed = new_event(
        user.id, EventType.SIGN_IN, now=now, outcome="failure", attempt=attempt, code=answered.name
    )
    record_now(deps, failed, now)
    _refuse_if_refused(state, now)  # None: the account was deleted meanwhile


def refuse_if_reverify_limited(session: Session, now: float) -> None:
    """429 (Retry-After only) while ``session`` has used up its wrong reverification answers."""
    _refuse_if_full(
        session.reverify_failures, session.reverify_failures_reset_at, REVERIFY_FAILURES.limit, now
    )


def check_reverify_password(
    deps: Deps, session: Session, user: User, password: str, now: float, *, attempt: Attempt | None = None
) -> None:
    """At reverification: pass if ``password`` is the user's, whatever the login lock says;
    otherwise count the failure on ``session`` (never on the account) and answer 401
    INVALID_PASSWORD_ERROR, or 429 when the session had used up its wrong answers."""
    refuse_if_reverify_limited(session, now)
    if passwords.verify_password(user.password_hash, password):
        return
    metrics.count(metrics.Event.LOGIN_FAILED)
    record_reverify_failure(deps, user.id, session.id, now, attempt=attempt)
    raise NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)


def record_reverify_failure(
    deps: Deps,
    user_id: str,
    session_id: str,
    now: float,
    *,
    attempt: Attempt | None = None,
    code: ErrorCode = ErrorCode.INVALID_PASSWORD_ERROR,
) -> None:
    """Count one failed reverification on the session (one conditional atomic write, so N
    concurrent failures let exactly the limit through); 429 when the session had none left. The
    account's activity records it (answered ``code``, or the 429)."""
    state = deps.sessions.count_reverify_failure(
        user_id, session_id, limit=REVERIFY_FAILURES.limit, window=REVERIFY_FAILURES.window, now=now
    )
    answered = ErrorCode.RATELIMITED_ERROR if state is not None and not state.allowed else code
    failed = new_event(
        user_id,
        EventType.REVERIFY,
        now=now,
        outcome="failure",
        attempt=attempt,
        code=answered.name,
        session_id=session_id,
    )
    record_now(deps, failed, now)
    _refuse_if_refused(state, now)  # None: the session was deleted meanwhile


def _refuse_if_full(count: int, reset_at: int, limit: int, now: float) -> None:
    if count >= limit and reset_at > now:
        _refuse_if_refused(CounterState(False, count, limit, reset_at), now)


def _refuse_if_refused(state: CounterState | None, now: float) -> None:
    if state is not None and not state.allowed:
        metrics.count(metrics.Event.RATE_LIMITED)
        raise RateLimitedError(retry_after=state.reset_in(now), account_lock=True)


def rehash_ops(deps: Deps, user: User, password: str, now: float) -> list[WriteOp]:
    """After ``password`` was proven at reverification: the write that replaces a stored hash made
    otherwise than the current argon2id profile (an imported bcrypt hash, or older parameters), on
    condition that the user still has that hash and is not banned (the login lock does not hold a
    signed-in session). Commit it with the request's own write, so each user pays for the old hash
    once."""
    if not passwords.should_rehash(user.password_hash, password):
        return []
    new_hash = passwords.hash_password(password)
    return [
        deps.users.credentials_unchanged_op(user, new_password_hash=new_hash, now=now, failure_limit=None)
    ]
