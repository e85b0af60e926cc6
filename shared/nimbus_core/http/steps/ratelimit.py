"""Step 7: the endpoint's rate limit (429 RATELIMITED_ERROR, with Retry-After), and its RateLimit-*
headers on whatever the request answers. The seed's "not counted" statuses give the hit back; a
second-factor challenge is not counted either (the answer that completes it is): it is stored and
the hit given back in one transaction. A request the policy's ``uncounted`` judges (the first step
of a two-step endpoint, on its validated body) is not counted at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ChallengeRequiredError, ErrorCode, RateLimitedError
from nimbus_core.domain.limiter import RateLimiter
from nimbus_core.domain.ratelimits import Per
from nimbus_core.http.responses import rate_limit_headers, response_for_exception
from nimbus_core.http.steps.base import Passage, Proceed, Refusal, Step, answered
from nimbus_core.http.steps.challenge import challenge_stored, store_challenge
from nimbus_core.platform import metrics

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.http.responses import Response


class RateLimit(Step):
    """Counts the request against the policy's limit, around everything after it."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where the policy names a rate limit."""
        return endpoint.policy.rate_limit is not None

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """429 RATELIMITED_ERROR."""
        return answered(ErrorCode.RATELIMITED_ERROR)

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """``proceed()``'s response with the limit's headers, or 429 once the window is used up."""
        policy, request, caller = passage.endpoint.policy, passage.request, passage.caller
        limit = policy.rate_limit
        if limit is None or (policy.uncounted is not None and policy.uncounted(request.body)):
            return challenge_stored(passage, proceed)
        subject = request.source_ip if limit.per is Per.IP or caller is None else caller.user.id
        limiter = RateLimiter(request.deps.counters)
        hit = limiter.hit(limit, subject, request.now)
        if not hit.state.allowed:
            metrics.count(metrics.Event.RATE_LIMITED)
            raise RateLimitedError(
                retry_after=hit.state.reset_in(request.now),
                headers=rate_limit_headers(hit.state, request.now),
            )
        given_back = False
        try:
            response = proceed()
        except ChallengeRequiredError as required:
            # A challenge is not counted, the answer that completes it is (CONTRACT section 4 step 7):
            # it is stored and the hit given back in one transaction.
            try:
                store_challenge(request.deps, required, give_back=limiter.give_back_op(hit))
                response, given_back = response_for_exception(required), True
            except Exception as failed:
                response = response_for_exception(failed)
        except Exception as exc:  # the status decides whether this request counts, so answer it here
            response = response_for_exception(exc)
            if isinstance(exc, RateLimitedError) and exc.account_lock:
                return response  # the account lock's 429 carries its own Retry-After, not this window
        if given_back:
            state = limiter.given_back(hit)
        elif response.status_code in limit.not_counted:
            state = limiter.give_back(hit)
        else:
            state = hit.state
        response.headers.update(rate_limit_headers(state, request.now))
        return response
