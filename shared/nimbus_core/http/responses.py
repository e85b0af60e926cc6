"""The one place where results and errors become HTTP responses (CONTRACT sections 1, 5, 6)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response

from nimbus_core.errors import ErrorCode, NimbusError

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


def error_response(error: NimbusError) -> Response[str]:
    """The response for an expected error."""
    return json_response(error.status, error.body(), error.headers)


def internal_error_response(exc: BaseException) -> Response[str]:
    """The response for anything unexpected: logged with its traceback, answered without one."""
    _log.exception("unhandled error", exc_info=exc)
    return error_response(NimbusError(ErrorCode.INTERNAL_SERVER_ERROR))


def response_for_exception(exc: BaseException) -> Response[str]:
    """The response for any exception raised while handling a request."""
    if isinstance(exc, NimbusError):
        return error_response(exc)
    return internal_error_response(exc)
