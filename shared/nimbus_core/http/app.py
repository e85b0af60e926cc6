"""The resolver factory and Lambda entry point that every function uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core import metrics
from nimbus_core.adapters import runtime_config
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.http.responses import error_response, response_for_exception
from nimbus_core.loglevels import LEVELS

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]

logger = Logger()


def create_app() -> APIGatewayHttpResolver:
    """A resolver whose errors, unknown routes and unexpected failures all answer contract JSON."""
    app = APIGatewayHttpResolver()

    app.exception_handler(Exception)(response_for_exception)
    app.not_found(_not_found)
    return app


def _not_found(_exc: Exception) -> Response[str]:
    return error_response(NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR))


def create_handler(app: APIGatewayHttpResolver) -> LambdaHandler:
    """The Lambda handler for ``app``: structured logging with the request id, the operator's log
    level, and a tolerated trailing slash."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        _apply_log_level()
        _strip_trailing_slash(event)
        metrics.begin()
        try:
            return app.resolve(event, context)
        finally:
            metrics.flush()

    return lambda_handler


def _apply_log_level() -> None:
    try:
        level = runtime_config.current().log_level
    except Exception:  # the guard reports SSM failures as a 500; logging keeps its level meanwhile
        return
    logger.setLevel(LEVELS[level])  # child loggers of every module follow


def _strip_trailing_slash(event: dict[str, Any]) -> None:
    path = event.get("rawPath") or ""
    if len(path) > 1 and path.endswith("/"):
        event["rawPath"] = path.rstrip("/") or "/"
        http = event.get("requestContext", {}).get("http", {})
        if "path" in http:
            http["path"] = event["rawPath"]
