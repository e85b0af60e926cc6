"""Account recovery (CONTRACT section 14): a link mailed to the account's address lets a user who
forgot their password choose a new one, after a second factor when the account has one.

``request_recovery`` does the same small work for every name, existing or not, banned, or past
its silent limit: it stores the request (one PutItem) and the route answers. The lookup and the
mail happen after the answer, in the recovery function (functions/recovery), so neither the answer,
its round trips nor its timing say whether an account exists.

``reset_password`` spends the token in one transaction with the new password hash, every other
session revoked, the login lock cleared, the address marked verified, the new session that signs
the owner in, and the notice queued.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from auth_api import sign_ins
from nimbus_core.accounts import password_policy
from nimbus_core.accounts.account_changes import FRESH_USER_ATTEMPTS
from nimbus_core.accounts.notices import Actor, Notice, notice_op
from nimbus_core.domain.activity import Attempt
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import MAX_LOGIN_NAME
from nimbus_core.domain.models import Challenge, RecoveryToken, User
from nimbus_core.domain.ports import RecoveryRequest, WriteOp
from nimbus_core.domain.ratelimits import RECOVERY_WRONG_ANSWERS
from nimbus_core.domain.secret_kinds import EMAIL_VERIFICATION, RECOVERY
from nimbus_core.factors import answers, challenges
from nimbus_core.platform import clock, metrics
from nimbus_core.sessions import known_devices, passwords
from nimbus_core.sessions.session_issuer import IssuedSession, new_session, normal_lifetime, revoke_all
from nimbus_core.sessions.tokens import hash_secret, parse_user_token, secret_matches

if TYPE_CHECKING:  # the validated bodies the routes pass
    from auth_api.models import RecoverBody, ResetPasswordBody

_log = Logger(child=True)

RESET_ENDPOINT = "PUT /users/recover"
_MAX_TOKEN = 256


def request_recovery(deps: Deps, body: RecoverBody, now: float) -> RecoveryRequest:
    """Queue a recovery request for the name ``body.username`` (a username or an address): one
    write whatever it names. The recovery function then mails a link to the account it names, if
    there is one that is not banned and has not had its recovery mails this window. The request
    queued is returned for tests; the route's 201 is the same for every name."""
    # A longer name can name no account; cut, it still names none, and the item stays small.
    return deps.outbox.queue_recovery(body.username[: MAX_LOGIN_NAME + 1], now=now)


@dataclass(frozen=True, slots=True)
class _Presented:
    token_hash: str
    secret: str
    user_id: str


def reset_password(
    deps: Deps,
    body: ResetPasswordBody,
    *,
    source_ip: str,
    now: float,
    session_name: str | None = None,
    user_agent: str | None = None,
) -> IssuedSession:
    """Set the new password with a valid recovery token (and, when the account has a second factor,
    the answer to the challenge bound to this token) and sign the owner in: the new normal session,
    named as at login (``session_name``, else after ``user_agent``).

    400 INVALID_RECOVERY_TOKEN_ERROR for a token unknown, used, expired or superseded, made
    worthless by a password or address changed since, or void after RECOVERY_WRONG_ANSWERS wrong
    answers; 403 BANNED_ERROR; the section 9 challenge and its errors. The token is not spent by a
    challenge or a wrong answer. The login lock refuses no part of this: a lock someone else keeps
    up by guessing at login never keeps the owner out (CONTRACT sections 8 and 14)."""
    parsed = parse_user_token(body.token) if len(body.token) <= _MAX_TOKEN else None
    if parsed is None:
        raise NimbusError(ErrorCode.INVALID_RECOVERY_TOKEN_ERROR)
    presented = _Presented(hash_secret(parsed.secret), parsed.secret, parsed.user_id)
    # The answer is only peeked at here (its challenge is read with the token); it is judged after
    # the token, so a bad token is a bad token whatever ``2fa`` holds.
    challenge_hash = answers.answered_hash(body.two_factor)
    new_hash: str | None = None
    for _ in range(FRESH_USER_ATTEMPTS):
        token, user, challenge = deps.tokens.read_recovery(
            presented.token_hash, presented.user_id, challenge_hash=challenge_hash
        )
        user = _valid(presented, token, user, now)
        if user.banned_at is not None:
            raise NimbusError(ErrorCode.BANNED_ERROR)
        if new_hash is None:  # checked once, before a second factor is asked for
            password_policy.refuse_compromised(deps.settings, body.new_password, field="newPassword")
        binding = challenges.Binding(endpoint=RESET_ENDPOINT, recovery=presented.token_hash)
        answer_ops: list[WriteOp] = []
        if user.second_factor_count > 0:
            if body.two_factor is None:
                raise challenges.require(deps, user, binding, now)
            answer = answers.parse_answer(body.two_factor)
            read: tuple[Challenge | None, User] = (challenge, user)
            _, answer_ops = challenges.answer(deps, answer, binding, now, expected_user=user.id, read=read)
        # Hashed once, and only for a token that was good: argon2 is the costly part of a reset.
        new_hash = new_hash or passwords.hash_password(body.new_password)
        signed_in = _SignIn(source_ip=source_ip, session_name=session_name, user_agent=user_agent)
        ops, issued = _reset_ops(
            deps, user, presented.token_hash, password_hash=new_hash, sign_in=signed_in, now=now
        )
        try:
            deps.tx.commit_joined(answer_ops, ops)
        except (UserChangedError, NimbusError):
            # Another reset with this token won, or the account changed after the read (password,
            # address, ban, deletion): the checks run again on what is stored now and say which.
            continue
        metrics.count(metrics.Event.PASSWORD_RESET)
        _log.info("password reset by recovery", extra={"user_id": user.id})
        return issued
    raise DependencyError("a password reset kept meeting concurrent changes")


def _valid(presented: _Presented, token: RecoveryToken | None, user: User | None, now: float) -> User:
    """The token's user when the token is still good; else 400 INVALID_RECOVERY_TOKEN_ERROR."""
    if (
        token is None
        or user is None
        or token.user_id != user.id
        or not secret_matches(presented.secret, token.hash)
        or token.exp <= now
        or token.attempts >= RECOVERY_WRONG_ANSWERS  # void: too many wrong second-factor answers
        or user.pending_recovery != token.hash  # superseded by a newer request
        # The address changed since: any other string, as one that folds alike may be another mailbox.
        or token.email != user.email
        or not secret_matches(user.password_hash, token.password_digest)  # the password changed since
    ):
        raise NimbusError(ErrorCode.INVALID_RECOVERY_TOKEN_ERROR)
    return user


@dataclass(frozen=True, slots=True)
class _SignIn:
    """Who resets: the address the notice names, and what the new session is named after."""

    source_ip: str
    session_name: str | None
    user_agent: str | None


def _reset_ops(
    deps: Deps, user: User, token_hash: str, *, password_hash: str, sign_in: _SignIn, now: float
) -> tuple[list[WriteOp], IssuedSession]:
    """The reset's writes, and the session it signs the owner in with: the token spent, the new
    hash, every other session revoked (the next generation, which only the new session has), the
    login lock cleared, the address verified (the mailbox proved itself, so a pending verification
    link is void), the new normal session, and the notice."""
    stamp = clock.iso(now)
    unverified = user.verified_at is None
    after = revoke_all(user).changed(
        password_hash=password_hash,
        updated_at=stamp,
        auth_failures=0,
        auth_failures_reset_at=0,
        verified_at=stamp if unverified else user.verified_at,
        pending_verification=None if unverified else user.pending_verification,
        pending_recovery=None,
    )
    issued = new_session(
        after,
        name=sign_in.session_name,
        user_agent=sign_in.user_agent,
        lifetime=normal_lifetime(deps, remember_me=False),
        now=now,
    )
    # The browser that reset the password is known from now on (of the new generation: the old
    # devices went with every other session).
    device, device_ops = known_devices.issue(deps, after, now)
    issued = replace(issued, device=device)
    ops = [
        # First: a reset that loses the race to another with the same token (or to wrong answers
        # that voided it meanwhile) is refused by it.
        deps.tokens.take_op(RECOVERY, token_hash, max_attempts=RECOVERY_WRONG_ANSWERS),
        *deps.users.change_ops(user, after),
        deps.sessions.put_op(issued.session),
        notice_op(deps, after, Notice.PASSWORD_CHANGED, actor=Actor.recovery(sign_in.source_ip), now=now),
        # The sign-in the reset opens, by the mailed link (the change itself: the notice's event).
        # It mails no new sign-in notice: the password-changed notice tells the owner already.
        sign_ins.signed_in_op(
            deps,
            issued,
            after,
            method="recovery",
            attempt=Attempt(sign_in.source_ip, None),
            notify=False,
            now=now,
        ),
    ]
    if unverified and user.pending_verification:
        ops.append(deps.tokens.drop_op(EMAIL_VERIFICATION, user.pending_verification))
    return [*ops, *device_ops], issued
