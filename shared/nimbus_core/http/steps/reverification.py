"""Step 8: identity reverification of normal sessions (``Policy.reverify``, CONTRACT section 9): 400
without a password, 401 for a wrong one, 429 once the session used up its wrong answers, the
second-factor challenge for an account with one, and 401/400 for a wrong answer to it. A challenge
answered is recorded with the change the route's service commits (``request.answer``), and used
up by a refusal.

Its first part runs at step 1 (:class:`PeekAnswer`): the challenge a request answers is read with
the caller's session, in the authentication's one round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.pending_answer import PendingAnswer
from nimbus_core.http.steps.base import Check, Passage, Proceed, Refusal, Step, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.http.responses import Response


class PeekAnswer(Check):
    """On a reverified endpoint, the hash of the challenge the body's ``2fa`` names, for the
    authentication to read. The body is only peeked at: when it is no JSON object, its error is
    raised again at step 6."""

    def applies(self, endpoint: Endpoint) -> bool:
        """On reverified endpoints."""
        return endpoint.policy.reverify

    def check(self, passage: Passage) -> None:
        """The body and the answered challenge's hash, kept when there is a token to read them with."""
        request = passage.request
        if not request.token:
            return
        try:
            peeked = passage.event.json_body()
        except NimbusError:
            return
        # The factors are imported by the first reverified request, not by every cold start.
        from nimbus_core.factors import answers

        request.challenge_hash = answers.answered_hash(peeked.get("2fa"))
        passage.peeked = peeked


class Reverification(Step):
    """Asks a normal session for its password (and second factor) before the route runs."""

    def applies(self, endpoint: Endpoint) -> bool:
        """On reverified endpoints."""
        return endpoint.policy.reverify

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """400 MISSING_FIELDS_ERROR, INVALID_SECOND_FACTOR_METHOD_ERROR; 401 INVALID_PASSWORD_ERROR,
        SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR, INVALID_SECOND_FACTOR_RESPONSE_ERROR; 429
        RATELIMITED_ERROR (wrong answers per session, CONTRACT section 8)."""
        return answered(
            ErrorCode.MISSING_FIELDS_ERROR,
            ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR,
            ErrorCode.INVALID_PASSWORD_ERROR,
            ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR,
            ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
            ErrorCode.RATELIMITED_ERROR,
        )

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """The route's answer once the caller reverified. The writes that record it wait in
        ``request.answer`` for the route's service to commit with its change; what no commit
        carried is recorded once the route has answered, a refusal included; not after a
        failure of AWS, which leaves the challenge to answer again."""
        from nimbus_core.factors.reverify import reverify

        request, caller, policy = passage.request, passage.caller, passage.endpoint.policy
        if caller is None:
            return proceed()
        writes = reverify(
            request.deps,
            caller,
            request.raw_body,
            request.now,
            endpoint=request.endpoint,
            sets_own_password=policy.sets_own_password,
            attempt=request.attempt(),
        )
        if not writes:
            return proceed()
        request.answer = PendingAnswer(writes)
        try:
            response = proceed()
        except NimbusError:
            request.answer.record(request.deps.tx)  # a refused change still used the challenge up
            raise
        request.answer.record(request.deps.tx)
        return response
