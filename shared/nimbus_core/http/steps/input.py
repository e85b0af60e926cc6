"""Step 6: the body, query and path models of the route's signature, validated (400: each found, and
its module imported, by the first request that validates it), and the session's name
(``X-Session-Name``) where the endpoint creates one. ``password`` and ``2fa`` are reverification's
(step 8), so ``{}`` on a reverified endpoint first names the endpoint's own missing fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.http.request_input import read_query, session_name
from nimbus_core.http.request_models import validated
from nimbus_core.http.steps.base import Check, Passage, Refusal, answered

if TYPE_CHECKING:
    from nimbus_core.http.policy import Endpoint

_UNREADABLE = answered(ErrorCode.INVALID_BODY_ERROR, ErrorCode.BODY_TOO_LARGE_ERROR)
_INVALID = answered(ErrorCode.MISSING_FIELDS_ERROR, ErrorCode.INVALID_FIELDS_ERROR)


class Input(Check):
    """Reads and validates what the route's signature names."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Where the endpoint reads a body (its model's, or reverification's), a query, path
        parameters of a model, or the session's name."""
        return bool(self.errors(endpoint))

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """400: an unreadable body (INVALID_BODY_ERROR, BODY_TOO_LARGE_ERROR) where one is read;
        MISSING_FIELDS_ERROR and INVALID_FIELDS_ERROR where a model validates it, the query or the
        path; INVALID_FIELDS_ERROR for a session name of the wrong shape."""
        signature, policy = endpoint.signature, endpoint.policy
        errors: frozenset[Refusal] = frozenset()
        if signature.body is not None or policy.reverify:
            errors |= _UNREADABLE
        if signature.body is not None or signature.query is not None or signature.path is not None:
            errors |= _INVALID
        if policy.names_session:
            errors |= answered(ErrorCode.INVALID_FIELDS_ERROR)
        return errors

    def check(self, passage: Passage) -> None:
        """The validated models (and raw body, session name) on the request, or the first 400."""
        endpoint, event, request = passage.endpoint, passage.event, passage.request
        if endpoint.signature.body is not None or endpoint.policy.reverify:
            request.raw_body = passage.peeked if passage.peeked is not None else event.json_body()
        if (body := endpoint.model("body")) is not None:
            request.body = validated(body, request.raw_body)
        if (query := endpoint.model("query")) is not None:
            request.query = validated(query, read_query(event.query))
        if (path := endpoint.model("path")) is not None:
            request.path_model = validated(path, dict(request.path))
        if endpoint.policy.names_session:
            request.session_name = session_name(request.headers)
            request.user_agent = request.headers.get("user-agent")
