"""Authentication: from an Authorization header to a caller, in one DynamoDB round trip."""

from __future__ import annotations

from dataclasses import dataclass, replace

from aws_lambda_powertools import Logger

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.models import Challenge, Session, User, iso_to_epoch
from nimbus_core.platform import clock
from nimbus_core.sessions.tokens import SessionToken, secret_matches
from nimbus_core.sessions.upstream_tokens import UPSTREAM_SECRET_HASH

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)

# usedAt is refreshed at most this often per session, so reads stay reads (CONTRACT section 3).
USED_AT_REFRESH_SECONDS = 300


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: the user and the session the request came with, and the user a
    staff endpoint works on when it was read together with them (``target_id`` set)."""

    user: User
    session: Session
    target_id: str | None = None
    target: User | None = None
    # The second-factor challenge named by the request's ``2fa.token``, read with the session.
    challenge_hash: str | None = None
    challenge: Challenge | None = None


def authenticate(
    deps: Deps,
    token: SessionToken,
    now: float,
    *,
    target_id: str | None = None,
    challenge_hash: str | None = None,
) -> Caller | None:
    """The caller for ``token``, or None if the session is unknown, revoked (deleted or of an older
    generation), expired, the secret is wrong, or the user is gone or banned.

    With ``target_id`` (a well-formed user id from the path of a staff endpoint) that user is read
    in the same BatchGetItem, so the endpoint needs no read of its own; with ``challenge_hash`` (a
    reverified request answering a second-factor challenge) the challenge is, too.
    """
    target: User | None = None
    challenge: Challenge | None = None
    if challenge_hash is not None:
        session, user, target, challenge = deps.sessions.get_with_challenge(
            token.user_id, token.session_id, target_id, challenge_hash
        )
    elif target_id is None:
        session, user = deps.sessions.get_with_user(token.user_id, token.session_id)
    else:
        session, user, target = deps.sessions.get_with_users(token.user_id, token.session_id, target_id)
    if session is None or user is None:
        return None
    # A verified upstream token names only a session imported from upstream, and an imported
    # session answers to nothing else (its stored "hash" is no digest a secret could match).
    if token.upstream != (session.secret_hash == UPSTREAM_SECRET_HASH):
        return None
    if not token.upstream and not secret_matches(token.secret, session.secret_hash):
        return None
    if not _stands(session, user, now):
        return None
    if now - iso_to_epoch(session.used_at) >= USED_AT_REFRESH_SECONDS:
        session = _touch(deps, session, now)
    return Caller(
        user=user,
        session=session,
        target_id=target_id,
        target=target,
        challenge_hash=challenge_hash,
        challenge=challenge,
    )


def still_standing(deps: Deps, caller: Caller, now: float, *, target_id: str | None = None) -> Caller | None:
    """``caller`` read again, in one round trip: its session and user, with the user ``target_id``
    names (default: the one the caller was read with, if any) as ``target``; None when the session
    no longer stands (deleted, expired or revoked, its user gone or banned), as :func:`authenticate`
    would judge a new request. A change whose write went stale is judged again on this read."""
    target_id = target_id if target_id is not None else caller.target_id
    target: User | None = None
    if target_id is None:
        session, user = deps.sessions.get_with_user(caller.user.id, caller.session.id)
    else:
        session, user, target = deps.sessions.get_with_users(caller.user.id, caller.session.id, target_id)
    if session is None or user is None or not _stands(session, user, now):
        return None
    return replace(caller, user=user, session=session, target_id=target_id, target=target)


def _stands(session: Session, user: User, now: float) -> bool:
    """Whether ``session`` (its secret proven) still authenticates: unexpired, of its user's current
    generation (not revoked), and the user not banned."""
    return session.exp > now and user.banned_at is None and session.generation == user.session_generation


def _touch(deps: Deps, session: Session, now: float) -> Session:
    used_at = clock.iso(now)
    try:
        deps.sessions.touch(session, used_at)
    except DependencyError:
        # Recording use is bookkeeping; failing the caller's request over it would be worse.
        _log.warning("could not refresh usedAt", exc_info=True)
        return session
    touched: Session = session.changed(used_at=used_at)
    return touched
