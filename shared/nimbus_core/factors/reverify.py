"""Identity reverification (CONTRACT section 4 step 8 and section 9), done once by the guard.

Normal sessions on endpoints declared ``reverify=True`` must send their ``password``; scoped
sessions are never asked. The user record (with its password hash) came with the authentication
read, so this adds no round trip. Wrong passwords and second-factor answers are limited per session
(counted on the session item, which came with the same read) and never feed, nor meet, the login
lock: whoever locked the account by guessing at login keeps no signed-in owner out.
An account with a second factor is then challenged, and the repeated request's ``2fa`` answer
(its challenge read with the session) is recorded in the change's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.ports import Transactor, WriteOp
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
) -> list[WriteOp]:
    """Pass, or raise the contract's error: 400 MISSING_FIELDS_ERROR ["password"] when the password
    is absent (also when a ``2fa`` object is sent for an account without a second factor: the
    upstream bypass), 401 INVALID_PASSWORD_ERROR when wrong, 429 once the session has used up its
    wrong answers (the login lock is no concern here).

    A right answer to a challenge passes with the writes that record it (challenge used up, the
    factor's replay guard moved), and a right password with the rehash of a stored hash of another
    profile (an imported bcrypt hash), to commit with the change: :class:`AnswerCarrier`; not
    where the endpoint ``sets_own_password`` (``Policy.sets_own_password``).
    """
    if caller.session.scoped:
        return []
    user = caller.user
    binding = challenges.Binding(endpoint=endpoint, session_id=caller.session.id)
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
    credentials.check_reverify_password(deps, caller.session, user, password, now)
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


class AnswerCarrier:
    """The request's Transactor while a challenge answer waits to be recorded: the answer's writes
    go into the change's first transaction, so the change and the used-up challenge land together
    or not at all (and the request costs no round trip of its own for them).

    An endpoint whose path makes no transaction gets the answer recorded by :meth:`settle` once it
    has answered; a commit that was attempted (even one that failed) settles nothing, so a fault
    leaves the challenge as it was.
    """

    def __init__(self, inner: Transactor, answer_ops: Sequence[WriteOp]) -> None:
        self._inner = inner
        self._pending: list[WriteOp] | None = list(answer_ops)

    def commit(self, ops: Sequence[WriteOp]) -> None:
        """Commit ``ops``, with the answer's writes if they are still waiting."""
        if self._pending is None:
            self._inner.commit(ops)
        else:
            self.commit_joined([], ops)

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """As :meth:`Transactor.commit_joined`, the answer's writes first if still waiting."""
        pending, self._pending = self._pending, None
        if pending is None:
            self._inner.commit_joined(first, then)
            return
        try:
            self._inner.commit_joined([*pending, *first], then)
        except UserChangedError as stale:
            # The change is rebuilt on a fresh read and committed again: unless the answer landed
            # on its own already, the rebuilt change must carry it, or the answer would stay unused.
            if not stale.first_landed:
                self._pending = pending
            raise

    def settle(self) -> None:
        """Record the answer if no transaction carried it."""
        pending, self._pending = self._pending, None
        if pending:
            self._inner.commit(pending)
