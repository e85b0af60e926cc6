"""What Nimbus reads of an API Gateway HTTP API event (payload format 2.0), read from the raw dict.

Only the fields the dispatcher and the guard use, each read when asked for (no copy of the event,
no data class per request). Field for field, these are the values Powertools' event data class gave:
the same stage handling of the path, the same empty defaults, the same KeyError for an event without
``requestContext.http.method``, ``requestContext.stage`` or ``rawPath`` (API Gateway always sends
them; a hand-made event without them fails loudly instead of answering).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimbus_core.http.request_input import read_json_body


class HttpEvent:
    """Accessors over one raw payload 2.0 event."""

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw

    @property
    def method(self) -> str:
        """The HTTP method, upper-cased (``get`` is GET)."""
        method: str = self.raw["requestContext"]["http"]["method"]
        return method.upper()

    @property
    def path(self) -> str:
        """The raw (still percent-encoded) path, without the stage's prefix when the API is not
        on its ``$default`` stage (``/prod/users/me`` on stage ``prod`` is ``/users/me``)."""
        raw_path: str = self.raw["rawPath"]
        stage: str = self.raw["requestContext"]["stage"]
        return raw_path if stage == "$default" else raw_path[len(stage) + 1 :]

    def headers(self) -> dict[str, str]:
        """The request headers under lower-case names (API Gateway sends them lower-cased; tests and
        other callers may not). A new dict on each call: call once per request."""
        return {name.lower(): value for name, value in (self.raw.get("headers") or {}).items()}

    @property
    def source_ip(self) -> str:
        """The address of the TCP connection that reached API Gateway."""
        source_ip: str = self.raw["requestContext"]["http"]["sourceIp"]
        return source_ip

    @property
    def query(self) -> dict[str, str]:
        """The query-string parameters (repeated keys already joined with commas by API Gateway)."""
        query: dict[str, str] = self.raw.get("queryStringParameters") or {}
        return query

    @property
    def body(self) -> str | None:
        """The body as API Gateway passed it: text, or base64 when :attr:`is_base64_encoded`."""
        body: str | None = self.raw.get("body")
        return body

    @property
    def is_base64_encoded(self) -> bool:
        """Whether API Gateway base64-encoded the body (it does for bodies that are not text)."""
        return bool(self.raw.get("isBase64Encoded"))

    def json_body(self) -> dict[str, Any]:
        """The body as a JSON object, base64-decoded first when it was encoded; a missing body is
        ``{}``; anything else is 400 (see :func:`nimbus_core.http.request_input.read_json_body`)."""
        return read_json_body(self.body, is_base64=self.is_base64_encoded)
