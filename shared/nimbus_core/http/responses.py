"""The one place where results and errors become HTTP responses (CONTRACT sections 1, 5, 6)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response

from nimbus_core.errors import ErrorCode, NimbusError, RateLimitedError, SuccessCode
from nimbus_core.ports import CounterState

# A child of the function's Powertools logger: JSON lines, the operator's log level.
_log = Logger(child=True)

BASE_HEADERS = {"Cache-Control": "no-store"}


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response[str]:
    """A JSON response with the headers every response carries."""
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
        headers={**BASE_HEADERS, **(headers or {})},
    )


def success_response(code: SuccessCode, **extra: Any) -> Response[str]:
    """A plain success: ``{code, message}`` plus e.g. ``count``."""
    return json_response(code.status, {"code": code.name, "message": code.message, **extra})


def rate_limit_headers(state: CounterState, now: float) -> dict[str, str]:
    """The ``RateLimit-*`` headers of an endpoint's window (CONTRACT section 10)."""
    return {
        "RateLimit-Limit": str(state.limit),
        "RateLimit-Remaining": str(state.remaining()),
        "RateLimit-Reset": str(state.reset_in(now)),
    }


def error_response(error: NimbusError) -> Response[str]:
    """The response for an expected error."""
    headers = dict(error.headers)
    if isinstance(error, RateLimitedError):
        headers["Retry-After"] = str(error.retry_after)
    return json_response(error.status, error.body(), headers)


def internal_error_response(exc: BaseException) -> Response[str]:
    """The response for anything unexpected: logged with its traceback, answered without one."""
    _log.exception("unhandled error", exc_info=exc)
    return error_response(NimbusError(ErrorCode.INTERNAL_SERVER_ERROR))


def response_for_exception(exc: BaseException) -> Response[str]:
    """The response for any exception raised while handling a request."""
    if isinstance(exc, NimbusError):
        return error_response(exc)
    return internal_error_response(exc)
