"""AWS answered in process by a botocore ``before-send`` hook: canned JSON bodies, no network, no moto.

Nothing from boto3 or botocore is imported here at import time: a cold child imports this before
the timed import.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # nothing beyond json at run time: the cold child imports this before timing
    from collections.abc import Iterator, Mapping
    from typing import Any


class _Raw:
    """The raw body botocore's AWSResponse reads (``stream()``)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class UnexpectedCallError(AssertionError):
    """The code made an AWS call the bench has no answer for (another code path than scripted)."""


class CannedAws:
    """Answers every HTTP attempt of the clients of one session from ``canned``; counts the calls."""

    def __init__(self, canned: Mapping[str, Any]) -> None:
        """``canned``: "service.Operation" -> the JSON body AWS would answer (DynamoDB and SSM speak
        JSON protocols)."""
        # Encoded once: the warm loops must not pay for json.dumps on the hook's side.
        self._bodies = {name: json.dumps(body).encode() for name, body in canned.items()}
        self.calls: list[str] = []
        self.sent: dict[str, bytes] = {}  # "service.Operation" -> the body of its latest request

    def install(self, session: Any) -> None:
        """Answer the calls of every client ``session`` creates from now on: a botocore Session (as
        Nimbus's functions use) or a boto3 one (the bare handler's)."""
        # boto3 exposes botocore's event emitter as ``events``; botocore hands it out as a component.
        events = session.events if hasattr(session, "events") else session.get_component("event_emitter")
        events.register_first("before-send", self._answer)

    def _answer(self, event_name: str, request: Any, **_kwargs: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from urllib3 import HTTPHeaderDict

        name = event_name.split(".", 1)[1]  # before-send.dynamodb.BatchGetItem
        body = self._bodies.get(name)
        if body is None:
            raise UnexpectedCallError(f"no canned answer for {name}")
        self.calls.append(name)
        self.sent[name] = request.body
        # Case-insensitive headers, as urllib3 gives botocore (the stubs say HTTPHeaders).
        headers = HTTPHeaderDict({"x-amzn-RequestId": "bench", "Content-Type": "application/x-amz-json-1.0"})
        return AWSResponse(request.url, 200, headers, _Raw(body))  # type: ignore[arg-type]
