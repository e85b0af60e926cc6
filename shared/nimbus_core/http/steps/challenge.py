"""Step 7's companion: a second-factor challenge (the 401 a route or reverification raises) is stored
when it is answered. Where a rate limit counts the request, the rate limit step stores it instead,
with the hit given back in the same transaction (:mod:`nimbus_core.http.steps.ratelimit`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ChallengeRequiredError
from nimbus_core.domain.ports import CounterWindowMovedError
from nimbus_core.http.steps.base import Passage, Proceed, Step
from nimbus_core.platform import metrics

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.http.responses import Response


class StoreChallenge(Step):
    """Stores the challenge of a second-factor 401 before it is answered; answers nothing itself."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where no rate limit counts the request (the rate limit step stores it otherwise)."""
        return endpoint.policy.rate_limit is None

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """``proceed()``, storing the challenge it raised."""
        return challenge_stored(passage, proceed)


def challenge_stored(passage: Passage, proceed: Proceed) -> Response:
    """``proceed()``, storing the challenge of a second-factor 401 before it is answered."""
    try:
        return proceed()
    except ChallengeRequiredError as required:
        store_challenge(passage.request.deps, required)
        raise


def store_challenge(
    deps: Deps, required: ChallengeRequiredError, *, give_back: WriteOp | None = None
) -> None:
    """Store the challenge ``required`` carries (its ``writes``), with the rate limit's
    ``give_back`` in the same transaction (one round trip). A window that ended meanwhile has
    nothing to give back: the challenge is then stored alone."""
    try:
        deps.tx.commit([*required.writes, *([give_back] if give_back else [])])
    except CounterWindowMovedError:
        deps.tx.commit(required.writes)
    metrics.count(metrics.Event.SECOND_FACTOR_CHALLENGED)
