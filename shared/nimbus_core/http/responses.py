"""The one place where results and errors become HTTP responses (CONTRACT sections 1, 5, 6).

A route answers a success with a :class:`Reply` (``Reply(user.to_public())``, :func:`success`,
:func:`counted`): its payload only, of the type its return annotation names (``-> Reply[UserView]``,
which mypy checks). The guard sends it with the status the route was declared with
(:meth:`Reply.response`), so that status is written once, where the OpenAPI document reads it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from aws_lambda_powertools import Logger

from nimbus_core.domain.errors import ErrorCode, NimbusError, RateLimitedError, SuccessCode
from nimbus_core.domain.ports import CounterState

if TYPE_CHECKING:
    from collections.abc import Collection

    from nimbus_core.http.views import CountedSuccessView, SuccessView

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)

BASE_HEADERS = {"Cache-Control": "no-store"}
JSON = "application/json"


@dataclass(slots=True)
class Response:
    """An HTTP response as a route returns it; the guard may still add headers (RateLimit-*).

    Every body Nimbus answers is JSON text, so the body is a ``str`` and never base64-encoded.
    """

    status_code: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)

    def to_lambda(self) -> dict[str, Any]:
        """The Lambda result for API Gateway's payload format 2.0, key for key what Powertools'
        APIGatewayHttpResolver returned (the local API and the tests read this shape): ``cookies``
        is always there and empty, and ``headers`` is this response's own dict (nothing else holds
        it once the request is answered)."""
        return {
            "statusCode": self.status_code,
            "body": self.body,
            "isBase64Encoded": False,
            "headers": self.headers,
            "cookies": [],
        }


def json_response(status: int, payload: object, headers: dict[str, str] | None = None) -> Response:
    """A JSON response with the headers every response carries (Content-Type last, as before)."""
    all_headers = {**BASE_HEADERS, **headers} if headers else dict(BASE_HEADERS)
    all_headers.setdefault("Content-Type", JSON)
    return Response(status, json.dumps(payload, separators=(",", ":"), ensure_ascii=False), all_headers)


def json_text_response(status: int, text: str) -> Response:
    """A response whose body is JSON text as it is (a stored document), with the usual headers."""
    return Response(status, text, {**BASE_HEADERS, "Content-Type": JSON})


class MisdeclaredStatusError(RuntimeError):
    """A route answered a success code whose status is not the one it was declared with."""


@dataclass(frozen=True, slots=True, init=False)
class Reply[V]:
    """A route's success: its payload, of the type ``V`` its route's return annotation names
    (``-> Reply[UserView]``, a view of :mod:`nimbus_core.http.views`, for mypy and the OpenAPI
    document; never imported to answer), sent with the status its route was declared with. Or JSON
    text as it is (``Reply(json_text=...)``: a stored document, GET /openapi.json), which the view
    still describes. ``code`` is the success code the payload carries, if any (its status must be
    the declared one); ``status`` another success the route declared (``also``), e.g. the first
    step of a two-step endpoint."""

    payload: V | None
    code: SuccessCode | None
    status: int | None
    json_text: str | None

    @overload
    def __init__(self, payload: V, code: SuccessCode | None = None, *, status: int | None = None) -> None: ...
    @overload
    def __init__(self, *, json_text: str, status: int | None = None) -> None: ...
    def __init__(
        self,
        payload: V | None = None,
        code: SuccessCode | None = None,
        *,
        status: int | None = None,
        json_text: str | None = None,
    ) -> None:
        # Two constructors, so mypy reads a payload against V alone (and says which key is wrong).
        object.__setattr__(self, "payload", payload)  # a frozen dataclass's own way to set a field
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "json_text", json_text)

    def response(self, status: int, others: Collection[int] = ()) -> Response:
        """This reply as the Response of a route declared with ``status`` (and ``others``)."""
        if self.status is not None:
            if self.status not in others:
                raise MisdeclaredStatusError(f"{self.status} is not declared")
            status = self.status
        if self.code is not None and self.code.status != status:
            raise MisdeclaredStatusError(f"{self.code.name} is {self.code.status}, declared {status}")
        if self.json_text is not None:
            return json_text_response(status, self.json_text)
        return json_response(status, self.payload)


def success_payload(code: SuccessCode) -> SuccessView:
    """The payload of a plain success: ``{code, message}``."""
    return {"code": code.name, "message": code.message}


def success(code: SuccessCode) -> Reply[SuccessView]:
    """A plain success: ``{code, message}``."""
    return Reply(success_payload(code), code)


def counted(code: SuccessCode, count: int) -> Reply[CountedSuccessView]:
    """A plural success: ``{code, message, count}``."""
    return Reply({"code": code.name, "message": code.message, "count": count}, code)


def rate_limit_headers(state: CounterState, now: float) -> dict[str, str]:
    """The ``RateLimit-*`` headers of an endpoint's window (CONTRACT section 10)."""
    return {
        "RateLimit-Limit": str(state.limit),
        "RateLimit-Remaining": str(state.remaining()),
        "RateLimit-Reset": str(state.reset_in(now)),
    }


def error_response(error: NimbusError) -> Response:
    """The response for an expected error."""
    headers = dict(error.headers)
    if isinstance(error, RateLimitedError):
        headers["Retry-After"] = str(error.retry_after)
    return json_response(error.status, error.body(), headers)


def internal_error_response(exc: BaseException) -> Response:
    """The response for anything unexpected: logged with its traceback, answered without one."""
    _log.exception("unhandled error", exc_info=exc)
    return error_response(NimbusError(ErrorCode.INTERNAL_SERVER_ERROR))


def response_for_exception(exc: BaseException) -> Response:
    """The response for any exception raised while handling a request."""
    if isinstance(exc, NimbusError):
        return error_response(exc)
    return internal_error_response(exc)
