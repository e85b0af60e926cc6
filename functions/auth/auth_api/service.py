"""Registration and login rules."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NoReturn

from aws_lambda_powertools import Logger

from auth_api import sign_ins
from nimbus_core.accounts import notices, password_policy, verification
from nimbus_core.domain.activity import Attempt
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.identity import find_by_login_name
from nimbus_core.domain.models import KnownDevice, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES
from nimbus_core.factors import answers, challenges
from nimbus_core.platform import ids, metrics
from nimbus_core.platform.clock import iso
from nimbus_core.sessions import credentials, known_devices, passwords
from nimbus_core.sessions.session_issuer import IssuedSession, new_session, normal_lifetime

if TYPE_CHECKING:  # the validated bodies the routes pass: imported by the first request, not here
    from auth_api.models import LoginBody, PasskeyLoginBody, RegisterBody
    from nimbus_core.http.views import PasskeyChallengeView

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)

_LOGIN = challenges.Binding(endpoint="POST /login")


def register(
    deps: Deps,
    body: RegisterBody,
    *,
    session_name: str | None,
    now: float,
    user_agent: str | None = None,
    ip: str | None = None,
) -> IssuedSession:
    """Create the account, log it in and queue the verification email, in ONE transaction: the user,
    both uniqueness claims, the session, the verification token, the outbox message and the
    account's first activity event (from ``ip``). No SES call: the mail function sends it, so an
    SES outage delays the email but never fails registration."""
    password_policy.refuse_compromised(deps.settings, body.password, field="password")
    created = iso(now)
    user = User(
        id=ids.new_id(),
        username=body.username,
        email=body.email,
        password_hash=passwords.hash_password(body.password),
        created_at=created,
        updated_at=created,
        domain=deps.settings.default_domain,
    )
    user, mail_ops = verification.issue(deps, user, now)
    issued = _signed_in(deps, user, body.remember_me, name=session_name, user_agent=user_agent, now=now)
    issued, device_ops = _with_device(deps, issued, user, now)
    created_op = sign_ins.registered_op(deps, issued, ip=ip, now=now)
    deps.tx.commit(
        [
            *deps.users.create_ops(user),
            deps.sessions.put_op(issued.session),
            *mail_ops,
            *device_ops,
            created_op,
        ]
    )
    _log.info("user registered", extra={"user_id": user.id})
    metrics.count(metrics.Event.REGISTERED)
    return issued


def login(
    deps: Deps,
    body: LoginBody,
    *,
    session_name: str | None,
    now: float,
    user_agent: str | None = None,
    attempt: Attempt | None = None,
) -> IssuedSession:
    """Check the password and open a normal session.

    Order: unknown user 404 (not counted by the IP limit), account locked by failed answers 429,
    wrong password 401 (counted, per IP and per account), banned 403 only after a correct password;
    then, with a second factor enrolled, the challenge (401) that the next request answers. The
    account's activity records the sign-in, or its failure (``attempt``: from where), unless no
    account was named.
    """
    user, answer_ops, rehash, device, known = _authenticate(deps, body, now, attempt)
    if user.banned_at is not None:
        sign_ins.refused(deps, user, ErrorCode.BANNED_ERROR, attempt, now)
        raise NimbusError(ErrorCode.BANNED_ERROR)
    if body.two_factor is None and user.second_factor_count > 0:
        _ask_second_factor(deps, user, rehash, now, device=device)
    issued = _signed_in(deps, user, body.remember_me, name=session_name, user_agent=user_agent, now=now)
    issued, device_ops = _with_device(deps, issued, user, now, replacing=device)
    if body.two_factor is None and password_policy.signs_in_compromised(body.password or ""):
        issued = replace(issued, password_compromised=True)
    method = sign_ins.method_of(body.two_factor)
    notify = notices.new_sign_in_due(user, known_device=known, now=now)
    signed_in = sign_ins.signed_in_op(
        deps, issued, user, method=method, attempt=attempt, notify=notify, now=now
    )
    _store_session(
        deps,
        issued,
        user,
        answer_ops=[
            *answer_ops,
            *device_ops,
            signed_in,
            *_compromised_notice(deps, issued, user, attempt, now),
        ],
        guarded=not answer_ops,
        rehash=rehash,
        password=body.password or "",
        device=device,
        now=now,
    )
    metrics.count(metrics.Event.LOGIN_SUCCEEDED)
    return issued


def _compromised_notice(
    deps: Deps, issued: IssuedSession, user: User, attempt: Attempt | None, now: float
) -> list[WriteOp]:
    """A login with a listed password: the notice to change it, in the session's transaction (the
    mail function sends at most one a week per account)."""
    if not issued.password_compromised:
        return []
    actor = notices.Actor.user(attempt.ip if attempt and attempt.ip else "unknown", issued.session)
    return [notices.notice_op(deps, user, notices.Notice.PASSWORD_COMPROMISED, actor=actor, now=now)]


def _signed_in(
    deps: Deps,
    user: User,
    remember_me: bool | None,
    *,
    name: str | None,
    user_agent: str | None,
    now: float,
) -> IssuedSession:
    """A new normal session of ``user``, named as at login (not stored yet)."""
    lifetime = normal_lifetime(deps, remember_me=bool(remember_me))
    return new_session(user, name=name, user_agent=user_agent, lifetime=lifetime, now=now)


def _with_device(
    deps: Deps, issued: IssuedSession, user: User, now: float, *, replacing: KnownDevice | None = None
) -> tuple[IssuedSession, list[WriteOp]]:
    """``issued`` with a new known-device token, and the writes for the sign-in's transaction."""
    token, ops = known_devices.issue(deps, user, now, replacing=replacing)
    return replace(issued, device=token), ops


def passkey_challenge(deps: Deps, now: float) -> PasskeyChallengeView:
    """The first step of a passkey sign-in: ``{token, exp, challenge}`` (one write)."""
    return challenges.issue_passkey(deps, now)


def passkey_login(
    deps: Deps,
    body: PasskeyLoginBody,
    *,
    session_name: str | None,
    now: float,
    user_agent: str | None = None,
    attempt: Attempt | None = None,
) -> IssuedSession:
    """Open a normal session for the passkey that answered the challenge (CONTRACT section 16):
    401 INVALID_SECOND_FACTOR_RESPONSE_ERROR for any credential that is unknown, deleted or
    wrong, 403 BANNED_ERROR for a banned user once the passkey is proven. The login lock does not
    apply: nothing is being guessed."""
    user, answer_ops = challenges.sign_in_with_passkey(deps, body.token or "", body.response or {}, now)
    if user.banned_at is not None:
        raise NimbusError(ErrorCode.BANNED_ERROR)
    issued = _signed_in(deps, user, body.remember_me, name=session_name, user_agent=user_agent, now=now)
    issued, device_ops = _with_device(deps, issued, user, now)
    # A passkey sign-in presents no known device (its body has none): it is told like a new one.
    notify = notices.new_sign_in_due(user, known_device=False, now=now)
    signed_in = sign_ins.signed_in_op(
        deps, issued, user, method="passkey", attempt=attempt, notify=notify, now=now
    )
    try:
        # The passkey's counter moving on the user item holds the session to the user as read.
        deps.tx.commit([deps.sessions.put_op(issued.session), *answer_ops, *device_ops, signed_in])
    except NimbusError:
        fresh = deps.users.get(user.id)
        if fresh is not None and fresh.banned_at is not None:
            raise NimbusError(ErrorCode.BANNED_ERROR) from None
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR) from None
    metrics.count(metrics.Event.LOGIN_SUCCEEDED)
    return issued


def _authenticate(
    deps: Deps, body: LoginBody, now: float, attempt: Attempt | None
) -> tuple[User, list[WriteOp], str | None, KnownDevice | None, bool]:
    """Who logs in, checked: by a second-factor challenge's answer (with the writes that answer
    makes), or by login name and password (404, locked 429, wrong password 401; with the new hash
    when the stored one is due a rehash); the known device that lifts the account's login lock
    for them, if the request presented one; and whether it presented a known device of theirs at
    all (one out of wrong answers lifts no lock, but is still theirs)."""
    if body.two_factor is not None:
        # The second request of a challenge: the token alone names the user.
        parsed = answers.parse_answer(body.two_factor)
        presented = known_devices.presented(deps, body.device)
        binding = replace(_LOGIN, device=presented, attempt=attempt)
        user, answer_ops = challenges.answer(deps, parsed, binding, now, expected_user=None)
        known = known_devices.recognised(presented, user, now)
        return user, answer_ops, None, known_devices.lifts_lock(presented, user, now), known
    found = find_by_login_name(deps.users, body.username or "")
    if found is None:
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)
    presented = known_devices.presented(deps, body.device)
    device = known_devices.lifts_lock(presented, found, now)
    password = body.password or ""
    credentials.check_password(deps, found, password, now, device=device, attempt=attempt)
    rehash = (
        passwords.hash_password(password) if passwords.should_rehash(found.password_hash, password) else None
    )
    return found, [], rehash, device, known_devices.recognised(presented, found, now)


def _ask_second_factor(
    deps: Deps, user: User, rehash: str | None, now: float, *, device: KnownDevice | None
) -> NoReturn:
    """A correct password on an account with a second factor: the challenge to answer (401)."""
    required = challenges.require(deps, user, _LOGIN, now)
    if rehash is not None:
        # The answer carries no password: the rehash is stored with the challenge, or never.
        required.writes.append(
            deps.users.credentials_unchanged_op(
                user, new_password_hash=rehash, now=now, failure_limit=_lock_limit(device)
            )
        )
    raise required


def _lock_limit(device: KnownDevice | None) -> int | None:
    """The login lock a login's writes are conditioned on: none with a known device that lifts it."""
    return None if device is not None else ACCOUNT_AUTH_FAILURES.limit


def _store_session(
    deps: Deps,
    issued: IssuedSession,
    user: User,
    *,
    answer_ops: list[WriteOp],
    guarded: bool,
    rehash: str | None,
    password: str,
    device: KnownDevice | None,
    now: float,
) -> None:
    """Write the new session on condition that what login checked still holds; a refusal is
    explained from fresh data, unless only the hash changed meanwhile (then the write is retried)."""
    # A password login's session rides on "the user still has that password, is not banned or
    # locked". An answered challenge's ops (challenge used up, the factor's replay guard moved on the
    # user item) take that place: one transaction may touch the user item once, and a ban or
    # password change since the challenge moved the user's session generation, so the new session
    # would be born revoked.
    # ``guarded``: a password login, whose writes (``answer_ops`` is then the new device's alone)
    # need the guard on the user item.
    limit = _lock_limit(device)
    guard_ops = (
        [deps.users.credentials_unchanged_op(user, new_password_hash=rehash, now=now, failure_limit=limit)]
        if guarded
        else []
    )
    try:
        deps.tx.commit([deps.sessions.put_op(issued.session), *guard_ops, *answer_ops])
    except NimbusError as refused:
        fresh = _rehashed_meanwhile(deps, user, password) if rehash is not None else None
        if fresh is None:
            # An answered challenge's own writes say what they refused (a code or challenge used
            # up by a concurrent answer): no password was checked here, so never "Invalid Password".
            otherwise = None if guarded else refused
            _explain_refused_login(deps, user.id, now, otherwise=otherwise, locked=limit is not None)
            raise
        # A concurrent login of this user replaced the hash this one read (its first login since an
        # import, say): the password proves the new hash too, so the session rides on that one.
        guard = deps.users.credentials_unchanged_op(
            fresh, new_password_hash=None, now=now, failure_limit=limit
        )
        try:
            deps.tx.commit([deps.sessions.put_op(issued.session), guard, *answer_ops])
        except NimbusError:
            _explain_refused_login(deps, user.id, now, locked=limit is not None)
            raise


def _rehashed_meanwhile(deps: Deps, read: User, password: str) -> User | None:
    """The user as stored, when all that changed since ``read`` is the hash, which ``password``
    proves as well; else None (the refusal is explained as usual)."""
    fresh = deps.users.get(read.id)
    if (
        fresh is None
        or fresh.banned_at is not None
        or fresh.session_generation != read.session_generation
        or fresh.password_hash == read.password_hash
        or not passwords.verify_password(fresh.password_hash, password)
    ):
        return None
    return fresh


def _explain_refused_login(
    deps: Deps, user_id: str, now: float, *, otherwise: NimbusError | None = None, locked: bool = True
) -> None:
    """The session write was refused because the user changed meanwhile: say why, from fresh data
    (``otherwise``, when given, is the answer if the user is neither gone, locked nor banned;
    ``locked``: whether the login lock holds this login, not for a known device)."""
    fresh = deps.users.get(user_id)
    if fresh is None:
        raise NimbusError(ErrorCode.INVALID_USER_ERROR)
    if locked:
        credentials.refuse_if_locked(fresh, now)
    if fresh.banned_at is not None:
        raise NimbusError(ErrorCode.BANNED_ERROR)
    raise otherwise or NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
