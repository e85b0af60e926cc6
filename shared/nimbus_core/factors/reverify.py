"""Identity reverification (CONTRACT section 4 step 8 and section 9), done once by the guard.

Normal sessions on endpoints declared ``reverify=True`` must send their ``password``; scoped
sessions are never asked. The user record (with its password hash) came with the authentication
read, so this adds no round trip. Wrong passwords and second-factor answers are limited per session
(counted on the session item, which came with the same read) and never feed, nor meet, the login
lock: whoever locked the account by guessing at login keeps no signed-in owner out.
An account with a second factor is then challenged, and the repeated request's ``2fa`` answer
(its challenge read with the session) is recorded in the change's own transaction, which the
route's service commits through ``request.answer``.
"""

from __future__ import annotations

from typing import Any

from nimbus_core.domain.activity import Attempt
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.ports import WriteOp
from nimbus_core.factors import answers, challenges
from nimbus_core.sessions import credentials
from nimbus_core.sessions.auth import Caller
from nimbus_core.sessions.tokens import hash_secret


def reverify(
    deps: Deps,
    caller: Caller,
    body: dict[str, Any],
    now: float,
    *,
    endpoint: str,
    sets_own_password: bool = False,
    attempt: Attempt | None = None,
) -> list[WriteOp]:
    """Pass, or raise the contract's error: 400 MISSING_FIELDS_ERROR ["password"] when the password
    is absent (also when a ``2fa`` object is sent for an account without a second factor: the
    upstream bypass), 401 INVALID_PASSWORD_ERROR when wrong, 429 once the session has used up its
    wrong answers (the login lock is no concern here). The account's activity records a wrong
    answer (``attempt``: from where).

    A right answer to a challenge passes with the writes that record it (challenge used up, the
    factor's replay guard moved), and a right password with the rehash of a stored hash of another
    profile (an imported bcrypt hash), to commit with the change
    (:class:`nimbus_core.domain.pending_answer.PendingAnswer`); not where the endpoint
    ``sets_own_password`` (``Policy.sets_own_password``).
    """
    if caller.session.scoped:
        return []
    user = caller.user
    binding = challenges.Binding(endpoint=endpoint, session_id=caller.session.id, attempt=attempt)
    if user.second_factor_count > 0 and body.get("2fa") is not None:
        # The answer to a challenge replaces the password.
        parsed = answers.parse_answer(body["2fa"])
        credentials.refuse_if_reverify_limited(caller.session, now)
        read = (caller.challenge, user) if caller.challenge_hash == hash_secret(parsed.secret) else None
        _, ops = challenges.answer(deps, parsed, binding, now, expected_user=user.id, read=read)
        return ops
    password = body.get("password")
    if not isinstance(password, str):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["password"])
    credentials.check_reverify_password(deps, caller.session, user, password, now, attempt=attempt)
    # An imported bcrypt hash (or argon2 of older parameters) is replaced by the request's own
    # write: the change's transaction, or the challenge's when a second factor is asked next.
    # Not where the route itself sets the caller's password: its write replaces the hash anyway,
    # and two writes of the hash in one request would make the second one's condition fail.
    rehash = [] if sets_own_password else credentials.rehash_ops(deps, user, password, now)
    if user.second_factor_count > 0:
        required = challenges.require(deps, user, binding, now)
        required.writes.extend(rehash)
        raise required
    return rehash
