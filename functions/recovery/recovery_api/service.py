"""Recovery requests turned into recovery mail, after the answer (CONTRACT section 14).

``POST /users/recover`` only stores the name asked (a recovery request in the outbox table) and
answers, so its work, its round trips and its timing are the same for every name. The outbox
stream brings each request here, where the rules that used to run on the request path run:

* the account the name names, matched as login matches names (a username, or an address);
* nothing for an unknown name, a banned account, or one that had :data:`RECOVERY_MAILS` this
  window (counted on the user item, silently: the answer was given long ago);
* otherwise a new recovery token (the previous one superseded), the user's count, and the mail.

Every outcome removes the request in the same transaction, on condition that it is still stored.
The stream delivers at least once (a retried batch, a replay), so a record can arrive twice; the
second delivery finds the request gone and does nothing: one token and one mail per request.
"""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools import Logger

from nimbus_core.accounts.account_changes import FRESH_USER_ATTEMPTS
from nimbus_core.accounts.mail_templates import recovery_email
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import find_by_login_name
from nimbus_core.domain.models import RecoveryToken, User
from nimbus_core.domain.ports import RecoveryRequest, RecoveryRequestGoneError, WriteOp
from nimbus_core.domain.ratelimits import RECOVERY_MAILS
from nimbus_core.domain.secret_kinds import RECOVERY
from nimbus_core.platform import clock, metrics
from nimbus_core.sessions.tokens import hash_secret, new_user_token

# A child of the function's Powertools logger. Ids and outcomes only: never the name asked (it
# may be an address), a token or a link.
_log = Logger(child=True)

# mailed: a link went out; withheld: no account, a banned one, or past its limit; handled: an
# earlier delivery of the same record did it; expired: the request waited past its TTL.
Outcome = Literal["mailed", "withheld", "handled", "expired"]
# What a user write built on a stale read answers (the adapter explains which field moved).
_STALE_USER = frozenset({ErrorCode.INVALID_SESSION_ERROR, ErrorCode.INVALID_PASSWORD_ERROR})


def handle_request(deps: Deps, request: RecoveryRequest, now: float) -> Outcome:
    """Mail a recovery link for ``request`` if it names an account that may have one, and remove
    the request, in one transaction; raise if the store fails (the record is retried)."""
    done = deps.outbox.recovery_done_op(request.id)
    user = None if request.expired(now) else find_by_login_name(deps.users, request.login_name)
    for _ in range(FRESH_USER_ATTEMPTS):
        mail = _mail_ops(deps, user, now) if user is not None and user.banned_at is None else []
        try:
            # First: a request an earlier delivery handled is refused by it, whatever else failed.
            deps.tx.commit([done, *mail])
        except RecoveryRequestGoneError:
            return _outcome(request, "handled")
        except (UserChangedError, NimbusError) as refused:
            # A concurrent request or change moved the user on after the read (another recovery,
            # a new password, revoked sessions, a deletion): count again on the user as stored now
            # (none: handled as an unknown name).
            if isinstance(refused, NimbusError) and refused.code not in _STALE_USER:
                raise
            user = deps.users.get(user.id) if user is not None else None
            continue
        if mail:
            metrics.count(metrics.Event.RECOVERY_MAILED)
            return _outcome(request, "mailed", user)
        return _outcome(request, "expired" if request.expired(now) else "withheld", user)
    raise DependencyError("a recovery request kept meeting concurrent changes")


def _outcome(request: RecoveryRequest, outcome: Outcome, user: User | None = None) -> Outcome:
    _log.info(
        "recovery request handled",
        extra={"request_id": request.id, "outcome": outcome, "user_id": user.id if user else None},
    )
    return outcome


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
        deps.tokens.put_op(RECOVERY, token),
        deps.outbox.enqueue_op(email, now=now, kind="recover-password", user_id=user.id),
    ]
    if user.pending_recovery:
        ops.append(deps.tokens.drop_op(RECOVERY, user.pending_recovery))
    return ops
