"""Step 1, continued: the user a staff endpoint works on (``Policy.target``, a path parameter), read
with the caller's session in the authentication's one BatchGetItem. The route asks for it with
:meth:`~nimbus_core.http.request.Request.target`, which answers 404 INVALID_USER_ERROR for an
unknown, deleted or malformed id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered
from nimbus_core.platform import ids

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint


class Target(Check):
    """Names the path's user to the authentication; never refuses by itself."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where the policy names a ``target`` parameter."""
        return endpoint.policy.target is not None

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """404 INVALID_USER_ERROR, answered when the route asks for the target."""
        return answered(ErrorCode.INVALID_USER_ERROR)

    def check(self, passage: Passage) -> None:
        """The well-formed user id in the ``target`` parameter, if any, on the request."""
        name = passage.endpoint.policy.target
        value = passage.request.path.get(name) if name is not None else None
        passage.request.target_id = value if value is not None and ids.is_id(value) else None
