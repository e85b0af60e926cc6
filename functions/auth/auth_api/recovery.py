"""Account recovery (CONTRACT section 14): a link mailed to the account's address lets a user who
forgot their password choose a new one, after a second factor when the account has one.

``request_recovery`` answers the same whatever the account: existing or not, banned, or past its
silent limit, it reads the same (one index Query) and writes the same kind of transaction (a tally
of requests for the name asked, plus, only when a mail goes out, the token, the user and the
outbox message), so neither the answer nor the round trips say whether an account exists.

``reset_password`` spends the token in one transaction with the new password hash, every session
revoked, the login lock cleared, the address marked verified and the notice queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from nimbus_core import challenges, clock, metrics, passwords
from nimbus_core.account_changes import FRESH_USER_ATTEMPTS
from nimbus_core.deps import Deps
from nimbus_core.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.mail_templates import recovery_email
from nimbus_core.models import Challenge, RecoveryToken, User
from nimbus_core.notices import Actor, Notice, notice_op
from nimbus_core.ports import WriteOp
from nimbus_core.ratelimits import RECOVERY_MAILS
from nimbus_core.session_issuer import revoke_all
from nimbus_core.tokens import hash_secret, new_user_token, parse_user_token, secret_matches

if TYPE_CHECKING:  # the validated bodies the routes pass
    from auth_api.models import RecoverBody, ResetPasswordBody

_log = Logger(child=True)

RESET_ENDPOINT = "PUT /users/recover"
# What a user write built on a stale read answers (the adapter explains which field moved).
_STALE_USER = frozenset({ErrorCode.INVALID_SESSION_ERROR, ErrorCode.INVALID_PASSWORD_ERROR})
# No account has a longer login name (usernames <= 64, emails <= 254); DynamoDB refuses longer keys.
_MAX_LOGIN_NAME = 320
_MAX_TOKEN = 256


def request_recovery(deps: Deps, body: RecoverBody, now: float) -> None:
    """Mail a recovery link to the account ``body.username`` names (a username or an address), if
    there is one that is not banned and has not had :data:`RECOVERY_MAILS` this window. Answers
    nothing either way: the route's 201 is the same for every name."""
    user = _find_user(deps, body.username)
    for _ in range(FRESH_USER_ATTEMPTS):
        ops = [_tally_op(deps, body.username, now)]
        if user is not None and user.banned_at is None:
            ops += _mail_ops(deps, user, now)
        try:
            deps.tx.commit(ops)
        except (UserChangedError, NimbusError) as refused:
            # A concurrent request or change moved the user on after the read (another recovery
            # request, a new password, revoked sessions, a deletion): whatever the stale write
            # says, count again on the user as stored now (none: answered as for an unknown
            # name). The answer stays the one 201.
            if isinstance(refused, NimbusError) and refused.code not in _STALE_USER:
                raise
            user = deps.users.get(user.id) if user is not None else None
            continue
        if len(ops) > 1:
            metrics.count(metrics.Event.RECOVERY_MAILED)
        return
    raise DependencyError("a recovery request kept meeting concurrent changes")


def _find_user(deps: Deps, login_name: str) -> User | None:
    """The account a login name names, as login matches them, from the index alone: one Query
    whether or not it exists (login's strongly consistent fallback would read once more for an
    unknown name, and so tell the two apart)."""
    if not login_name or len(login_name) > _MAX_LOGIN_NAME:
        return None
    if "@" not in login_name:
        return deps.users.find_by_username(login_name, index_only=True)
    from email_validator import EmailNotValidError, validate_email

    try:
        email = validate_email(login_name, check_deliverability=False).normalized
    except EmailNotValidError:
        return None
    return deps.users.find_by_email(email, index_only=True)


def _tally_op(deps: Deps, login_name: str, now: float) -> WriteOp:
    """The tally of recovery requests for the name asked (hashed: no address is stored in clear),
    written by every request, so an unknown name costs the same transaction as a known one."""
    name = hash_secret(login_name.casefold())
    return deps.counters.tally_op(f"recover#name#{name}", expires_at=int(now) + RECOVERY_MAILS.window)


def _mail_ops(deps: Deps, user: User, now: float) -> list[WriteOp]:
    """A new recovery token (the previous one superseded), its mail, and the user's silent count;
    nothing when the account had its recovery mails for this window."""
    count, reset_at = user.recovery_mails, user.recovery_mails_reset_at
    if reset_at <= now:
        count, reset_at = 0, int(now) + RECOVERY_MAILS.window
    if count >= RECOVERY_MAILS.limit:
        _log.info("recovery mail withheld: the account's limit", extra={"user_id": user.id})
        return []
    settings = deps.settings
    issued = new_user_token(user.id)
    token = RecoveryToken(
        hash=hash_secret(issued.secret),
        user_id=user.id,
        email=user.email,
        password_digest=hash_secret(user.password_hash),
        created_at=clock.iso(now),
        exp=int(now) + settings.recovery_token_minutes * 60,
    )
    after = user.changed(
        pending_recovery=token.hash, recovery_mails=count + 1, recovery_mails_reset_at=reset_at
    )
    link = settings.recovery_url.replace("{token}", str(issued))
    email = recovery_email(
        to=user.email, username=user.username, link=link, valid_minutes=settings.recovery_token_minutes
    )
    ops = [
        # The link is bound to the password and address read: neither may move before it is stored.
        *deps.users.change_ops(user, after, assume_unchanged=True),
        deps.tokens.put_recovery_op(token),
        deps.outbox.enqueue_op(email, now=now, kind="recover-password", user_id=user.id),
    ]
    if user.pending_recovery:
        ops.append(deps.tokens.delete_recovery_op(user.pending_recovery))
    return ops


@dataclass(frozen=True, slots=True)
class _Presented:
    token_hash: str
    secret: str
    user_id: str


def reset_password(deps: Deps, body: ResetPasswordBody, *, source_ip: str, now: float) -> None:
    """Set the new password with a valid recovery token (and, when the account has a second factor,
    the answer to the challenge bound to this token): 400 INVALID_RECOVERY_TOKEN_ERROR for a token
    unknown, used, expired or superseded, or made worthless by a password or address changed since;
    403 BANNED_ERROR; the section 9 challenge and its errors. The token is not spent by a challenge
    or a wrong answer."""
    parsed = parse_user_token(body.token) if len(body.token) <= _MAX_TOKEN else None
    if parsed is None:
        raise NimbusError(ErrorCode.INVALID_RECOVERY_TOKEN_ERROR)
    presented = _Presented(hash_secret(parsed.secret), parsed.secret, parsed.user_id)
    # The answer is only peeked at here (its challenge is read with the token); it is judged after
    # the token, so a bad token is a bad token whatever ``2fa`` holds.
    challenge_hash = challenges.answered_hash(body.two_factor)
    new_hash: str | None = None
    for _ in range(FRESH_USER_ATTEMPTS):
        token, user, challenge = deps.tokens.get_recovery(
            presented.token_hash, presented.user_id, challenge_hash=challenge_hash
        )
        user = _valid(presented, token, user, now)
        if user.banned_at is not None:
            raise NimbusError(ErrorCode.BANNED_ERROR)
        binding = challenges.Binding(endpoint=RESET_ENDPOINT, recovery=presented.token_hash)
        answer_ops: list[WriteOp] = []
        if user.second_factor_count > 0:
            if body.two_factor is None:
                raise challenges.require(deps, user, binding, now)
            answer = challenges.parse_answer(body.two_factor)
            read: tuple[Challenge | None, User] = (challenge, user)
            _, answer_ops = challenges.answer(deps, answer, binding, now, expected_user=user.id, read=read)
        # Hashed once, and only for a token that was good: argon2 is the costly part of a reset.
        new_hash = new_hash or passwords.hash_password(body.new_password)
        try:
            deps.tx.commit_joined(
                answer_ops,
                _reset_ops(
                    deps, user, presented.token_hash, password_hash=new_hash, source_ip=source_ip, now=now
                ),
            )
        except (UserChangedError, NimbusError):
            # Another reset with this token won, or the account changed after the read (password,
            # address, ban, deletion): the checks run again on what is stored now and say which.
            continue
        metrics.count(metrics.Event.PASSWORD_RESET)
        _log.info("password reset by recovery", extra={"user_id": user.id})
        return
    raise DependencyError("a password reset kept meeting concurrent changes")


def _valid(presented: _Presented, token: RecoveryToken | None, user: User | None, now: float) -> User:
    """The token's user when the token is still good; else 400 INVALID_RECOVERY_TOKEN_ERROR."""
    if (
        token is None
        or user is None
        or token.user_id != user.id
        or not secret_matches(presented.secret, token.hash)
        or token.exp <= now
        or user.pending_recovery != token.hash  # superseded by a newer request
        # The address changed since: any other string, as one that folds alike may be another mailbox.
        or token.email != user.email
        or not secret_matches(user.password_hash, token.password_digest)  # the password changed since
    ):
        raise NimbusError(ErrorCode.INVALID_RECOVERY_TOKEN_ERROR)
    return user


def _reset_ops(
    deps: Deps, user: User, token_hash: str, *, password_hash: str, source_ip: str, now: float
) -> list[WriteOp]:
    """The reset's writes: the token spent, the new hash, every session revoked (the next
    generation), the per-account lock cleared, the address verified (the mailbox proved itself, so
    a pending verification link is void), and the notice."""
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
    ops = [
        # First: a reset that loses the race to another with the same token is refused by it.
        deps.tokens.consume_recovery_op(token_hash),
        *deps.users.change_ops(user, after),
        notice_op(deps, after, Notice.PASSWORD_CHANGED, actor=Actor.recovery(source_ip), now=now),
    ]
    if unverified and user.pending_verification:
        ops.append(deps.tokens.delete_op(user.pending_verification))
    return ops
