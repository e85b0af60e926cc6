"""Registration and login rules."""

from __future__ import annotations

from dataclasses import dataclass

from aws_lambda_powertools import Logger

from auth_api.models import LoginBody, RegisterBody
from nimbus_core import clock, ids, metrics, passwords
from nimbus_core.adapters import counters, users
from nimbus_core.adapters.clients import dynamodb
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.sessions import put_session_op
from nimbus_core.adapters.transactions import ConditionFailedError, transact_write
from nimbus_core.adapters.verification_tokens import put_verification_token_op
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.mail_templates import verification_email
from nimbus_core.models import Session, User
from nimbus_core.ratelimits import ACCOUNT_AUTH_FAILURES
from nimbus_core.settings import Settings, get_settings
from nimbus_core.tokens import hash_secret, new_session_token

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)

# No account can have a longer login name (usernames <= 64, emails <= 254), and DynamoDB refuses
# index keys over 2 KiB, so longer input is simply "no such user".
_MAX_LOGIN_NAME = 320


@dataclass(frozen=True, slots=True)
class IssuedSession:
    """What register and login answer: the token and its expiry (Unix seconds)."""

    token: str
    exp: int

    def to_public(self) -> dict[str, object]:
        """The SuccessfulAuth structure."""
        return {"token": self.token, "exp": self.exp}


def register(body: RegisterBody, *, session_name: str, now: float) -> IssuedSession:
    """Create the account, log it in and queue the verification email.

    The user, both uniqueness claims, the session, the verification token and the email's outbox
    item are written in one transaction; the mail function sends it from the outbox stream. So SES
    is never called here and an SES outage cannot fail a registration (CONTRACT section 12).
    """
    settings = get_settings()
    created = clock.iso(now)
    user = User(
        id=ids.new_id(),
        username=body.username,
        email=body.email,
        password_hash=passwords.hash_password(body.password),
        created_at=created,
        updated_at=created,
        domain=settings.default_domain,
    )
    session, token = _new_session(user, session_name, bool(body.remember_me), now, settings)
    verify_secret = ids.new_secret()
    verify_hash = hash_secret(verify_secret)
    verify_op = put_verification_token_op(
        token_hash=verify_hash,
        user_id=user.id,
        email=user.email,
        created_at=created,
        exp=int(now) + settings.verification_token_hours * 3600,
    )
    email = verification_email(
        to=user.email,
        username=user.username,
        link=settings.verification_url.replace("{token}", verify_secret),
        valid_hours=settings.verification_token_hours,
    )
    mail_op = DynamoOutbox(dynamodb(), settings.outbox_table).enqueue_op(email, now=now, kind="verify-email")
    transact_write([*users.create_user_ops(user), put_session_op(session), verify_op, mail_op])
    _log.info("user registered", extra={"user_id": user.id})
    metrics.count(metrics.Event.REGISTERED)
    return IssuedSession(token=token, exp=session.exp)


def login(body: LoginBody, *, session_name: str, now: float) -> IssuedSession:
    """Check the password and open a normal session.

    Order: unknown user 404 (not counted by the IP limit), account locked by failed answers 429,
    wrong password 401 (counted, per IP and per account), banned 403 only after a correct password.
    """
    user = _find_user(body.username)
    if user is None:
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)
    _refuse_if_locked(user.auth_failures, user.auth_failures_reset_at, now)
    if not passwords.verify_password(user.password_hash, body.password):
        metrics.count(metrics.Event.LOGIN_FAILED)
        _count_failure(user, now)
        raise NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
    if user.banned_at is not None:
        raise NimbusError(ErrorCode.BANNED_ERROR)
    # Second-factor hook: when an account has enrolled factors, this is where the login answers
    # SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR (CONTRACT section 9) instead of opening a session.
    # Enrolment does not exist yet, so no account can reach that branch.
    settings = get_settings()
    session, token = _new_session(user, session_name, bool(body.remember_me), now, settings)
    rehash = passwords.hash_password(body.password) if passwords.needs_rehash(user.password_hash) else None
    try:
        credentials = users.unchanged_credentials_op(
            user, new_password_hash=rehash, now=now, failure_limit=ACCOUNT_AUTH_FAILURES.limit
        )
        transact_write([put_session_op(session), credentials])
    except (NimbusError, ConditionFailedError):
        _explain_refused_login(user.id, now)
        raise
    metrics.count(metrics.Event.LOGIN_SUCCEEDED)
    return IssuedSession(token=token, exp=session.exp)


def _find_user(login_name: str) -> User | None:
    if not login_name or len(login_name) > _MAX_LOGIN_NAME:
        return None
    if "@" not in login_name:
        return users.find_by_login(login_name, by_email=False)
    from email_validator import EmailNotValidError, validate_email

    try:
        email = validate_email(login_name, check_deliverability=False).normalized
    except EmailNotValidError:
        return None
    return users.find_by_login(email, by_email=True)


def _refuse_if_locked(failures: int, reset_at: int, now: float) -> None:
    if failures >= ACCOUNT_AUTH_FAILURES.limit and reset_at > now:
        metrics.count(metrics.Event.RATE_LIMITED)
        state = counters.CounterState(False, failures, ACCOUNT_AUTH_FAILURES.limit, reset_at)
        raise NimbusError(ErrorCode.RATELIMITED_ERROR, headers={"Retry-After": str(state.reset_in(now))})


def _count_failure(user: User, now: float) -> None:
    try:
        state = counters.hit(
            users.auth_failure_counter(user.id),
            limit=ACCOUNT_AUTH_FAILURES.limit,
            window=ACCOUNT_AUTH_FAILURES.window,
            now=now,
        )
    except counters.CounterTargetMissingError:
        return  # the account was deleted meanwhile; the answer is still "wrong password"
    if not state.allowed:
        metrics.count(metrics.Event.RATE_LIMITED)
        raise NimbusError(ErrorCode.RATELIMITED_ERROR, headers={"Retry-After": str(state.reset_in(now))})


def _explain_refused_login(user_id: str, now: float) -> None:
    """The session write was refused because the user changed meanwhile: say why, from fresh data."""
    fresh = users.get_user(user_id)
    if fresh is None:
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)
    _refuse_if_locked(fresh.auth_failures, fresh.auth_failures_reset_at, now)
    if fresh.banned_at is not None:
        raise NimbusError(ErrorCode.BANNED_ERROR)
    raise NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)


def _new_session(
    user: User, name: str, remember_me: bool, now: float, settings: Settings
) -> tuple[Session, str]:
    lifetime = settings.remember_me_days * 86400 if remember_me else settings.session_hours * 3600
    session_id = ids.new_id()
    token = new_session_token(user.id, session_id)
    stamp = clock.iso(now)
    session = Session(
        user_id=user.id,
        id=session_id,
        secret_hash=hash_secret(token.secret),
        name=name,
        exp=int(now) + lifetime,
        created_at=stamp,
        updated_at=stamp,
        used_at=stamp,
    )
    return session, str(token)
