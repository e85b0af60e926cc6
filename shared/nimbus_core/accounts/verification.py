"""Email verification tokens: issued with the mail that carries them, consumed once."""

from __future__ import annotations

from nimbus_core.accounts.mail_templates import verification_email
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import email_key
from nimbus_core.domain.models import User, VerificationToken
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.secret_kinds import EMAIL_VERIFICATION
from nimbus_core.platform import clock
from nimbus_core.sessions.tokens import hash_secret, new_user_token, parse_user_token, secret_matches

# Verifications judged again after a concurrent change of the user before giving up (a 500).
_ATTEMPTS = 4


def issue(deps: Deps, user: User, now: float) -> tuple[User, list[WriteOp]]:
    """A new token for ``user``'s current address, the email that carries it, and ``user`` with the
    token recorded as the one pending (the previous pending token, if any, is removed)."""
    settings = deps.settings
    issued = new_user_token(user.id)
    token_hash = hash_secret(issued.secret)
    token = VerificationToken(
        hash=token_hash,
        user_id=user.id,
        email=user.email,
        created_at=clock.iso(now),
        exp=int(now) + settings.verification_token_hours * 3600,
    )
    # The user id in the token lets one BatchGetItem fetch token and user together.
    link = settings.verification_url.replace("{token}", str(issued))
    email = verification_email(
        to=user.email, username=user.username, link=link, valid_hours=settings.verification_token_hours
    )
    ops = [
        deps.tokens.put_op(EMAIL_VERIFICATION, token),
        deps.outbox.enqueue_op(email, now=now, kind="verify-email", user_id=user.id),
    ]
    if user.pending_verification:
        ops.append(deps.tokens.drop_op(EMAIL_VERIFICATION, user.pending_verification))
    pending: User = user.changed(pending_verification=token_hash)
    return pending, ops


def verify(deps: Deps, raw_token: str, now: float) -> User:
    """Mark the address verified for a valid token: single use, bound to its user and address,
    unexpired. Unknown, used, expired or outdated tokens are INVALID_VERIFICATION_TOKEN_ERROR.

    The write holds only while the user's pending link is still this token; when a concurrent
    change of the user lands first (a resend, an address change), the token and user are read
    again and judged afresh, so the race is answered as either serial order would be."""
    parsed = parse_user_token(raw_token)
    if parsed is None:
        raise NimbusError(ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR)
    for _ in range(_ATTEMPTS):
        try:
            return _verify_once(deps, parsed.secret, parsed.user_id, now)
        except UserChangedError:
            continue  # judged again on the token and user as stored now
    raise DependencyError(f"user {parsed.user_id} kept changing under {_ATTEMPTS} verifications")


def _verify_once(deps: Deps, secret: str, user_id: str, now: float) -> User:
    invalid = NimbusError(ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR)
    token_hash = hash_secret(secret)
    token, user = deps.tokens.read_with_user(EMAIL_VERIFICATION, token_hash, user_id)
    if token is None or user is None or token.user_id != user.id or token.exp <= now:
        raise invalid
    if not secret_matches(secret, token.hash) or user.pending_verification != token_hash:
        raise invalid
    if email_key(token.email) != email_key(user.email):
        raise invalid  # the address changed since the token was sent
    if user.banned_at is not None:
        raise NimbusError(ErrorCode.BANNED_ERROR)
    stamp = clock.iso(now)
    verified: User = user.changed(verified_at=stamp, updated_at=stamp, pending_verification=None)
    try:
        deps.tx.commit(
            [
                *deps.users.change_ops(user, verified, rebuilt_when_stale=True),
                deps.tokens.take_op(EMAIL_VERIFICATION, token_hash),
            ]
        )
    except NimbusError as refused:
        if refused.code is ErrorCode.INVALID_SESSION_ERROR:  # the user was deleted meanwhile
            raise invalid from None
        raise
    return verified
