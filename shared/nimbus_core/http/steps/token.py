"""Step 1: read the token if present (no error yet): a Nimbus session token, or one an upstream
deployment signed. Authentication waits for the first step that needs the caller, so that it reads
all it needs (the policy's target user, a reverified request's challenge) in one round trip."""

from __future__ import annotations

from nimbus_core.http.steps.base import Check, Passage
from nimbus_core.sessions.tokens import parse_session_token
from nimbus_core.sessions.upstream_tokens import parse_upstream_token


class ReadToken(Check):
    """Reads the ``Authorization`` header's token; never refuses."""

    def check(self, passage: Passage) -> None:
        """The session the header names, on the request."""
        request = passage.request
        authorization = request.headers.get("authorization")
        request.token = parse_session_token(authorization) or parse_upstream_token(
            authorization, request.deps.settings, request.now
        )
