"""API Gateway's part of a request: CORS, routing, the event, invoking, and the response."""

from __future__ import annotations

import json
from dataclasses import dataclass

from nimbus_tools.local.cors import CorsPolicy
from nimbus_tools.local.events import (
    HttpRequest,
    HttpResponse,
    MalformedResponseError,
    build_event,
    response_from_result,
)
from nimbus_tools.local.functions import Invoker
from nimbus_tools.local.router import Router
from nimbus_tools.local.static import StaticSite


@dataclass(frozen=True)
class GatewayResult:
    """The response plus what the console log line needs: the function, and why it failed."""

    response: HttpResponse
    function: str | None = None
    error: str | None = None


def json_message(status: int, message: str) -> HttpResponse:
    """API Gateway's own error body, e.g. 502 ``{"message":"Internal Server Error"}``."""
    return HttpResponse(
        status, [("content-type", "application/json")], json.dumps({"message": message}).encode()
    )


class Gateway:
    """Everything API Gateway does between the client and the function."""

    def __init__(
        self,
        router: Router,
        invoker: Invoker,
        cors: CorsPolicy | None = None,
        *,
        static: StaticSite | None = None,
    ) -> None:
        self.router = router
        self.invoker = invoker
        self.cors = cors
        # The console, the OpenAPI document and Swagger UI, which `make serve` offers beside the API.
        self.static = static

    def handle(self, request: HttpRequest) -> GatewayResult:
        """Answer one request."""
        if self.cors is not None and CorsPolicy.is_preflight(request):
            return self._finish(request, GatewayResult(self.cors.preflight(request)))
        if (page := self._static(request)) is not None:
            return self._finish(request, GatewayResult(page))

        match = self.router.match(request.method, request.raw_path)
        if match is None:
            return self._finish(request, GatewayResult(json_message(404, "Not Found")))

        event = build_event(request, match)
        invocation = self.invoker.invoke(match.function, event, request.request_id)
        if not invocation.ok or invocation.result_json is None:
            failure = json_message(502, "Internal Server Error")
            return self._finish(request, GatewayResult(failure, match.function, invocation.error))
        try:
            response = response_from_result(invocation.result_json)
        except MalformedResponseError as error:
            failure = json_message(502, "Internal Server Error")
            return self._finish(
                request, GatewayResult(failure, match.function, f"malformed response: {error}")
            )
        if self.cors is not None:
            response = self.cors.apply(request, response)
        return self._finish(request, GatewayResult(response, match.function))

    def _static(self, request: HttpRequest) -> HttpResponse | None:
        return self.static.answer(request) if self.static is not None else None

    @staticmethod
    def _finish(request: HttpRequest, result: GatewayResult) -> GatewayResult:
        # Every API Gateway response carries its request id.
        response = result.response
        headers = [*response.headers, ("apigw-requestid", request.request_id)]
        return GatewayResult(
            HttpResponse(response.status, headers, response.body), result.function, result.error
        )
