"""Step 0: a path parameter spelling a sibling route's literal segment (``/sessions/all`` against
``/sessions/<id>``) is no route at all: 404 INVALID_ENDPOINT_ERROR."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint


class LiteralSiblings(Check):
    """Refuses the values of a parameter that the app's routing reserved for a sibling route."""

    def applies(self, endpoint: Endpoint) -> bool:
        """On paths with a parameter."""
        return "<" in endpoint.path

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """404 INVALID_ENDPOINT_ERROR."""
        return answered(ErrorCode.INVALID_ENDPOINT_ERROR)

    def check(self, passage: Passage) -> None:
        """404 when a parameter takes a reserved value."""
        path = passage.request.path
        for name, values in passage.reserved.items():
            if path.get(name) in values:
                raise NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR)
