"""Latency of keep-alive requests through the local API's HTTP server, functions left out.

The server runs in this process with a gateway whose function answers at once, so the figure is the
HTTP server's own: parsing, the WSGI hop, the response write. With Nagle's algorithm on (the old
hand-written server) every request on a kept-alive connection waited for the client's delayed ACK,
about 40 ms; with ``TCP_NODELAY`` it is well under a millisecond.
"""

from __future__ import annotations

import http.client
import io
import json
import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.table import render
from nimbus_tools.local.functions import Invocation
from nimbus_tools.local.gateway import Gateway
from nimbus_tools.local.router import Router, RouteTarget
from nimbus_tools.local.server import LocalApiServer, RequestLog
from nimbus_tools.template import HttpRoute

REQUESTS = 200
WARM_UP = 10
BUDGET_MS = 10.0  # a Nagle stall alone is ~40 ms
JSON = {"Content-Type": "application/json"}


class _InstantFunction:
    """A function that answers at once (the invoker protocol of the gateway)."""

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        result = {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": '{"ok":true}'}
        return Invocation(ok=True, result_json=json.dumps(result))


@dataclass(frozen=True)
class KeepAliveResult:
    """Per-request milliseconds on one kept-alive connection."""

    requests_ms: list[float]

    @property
    def p50_ms(self) -> float:
        """The median."""
        return statistics.median(self.requests_ms)

    @property
    def p90_ms(self) -> float:
        """The 90th percentile."""
        return statistics.quantiles(self.requests_ms, n=10)[8]

    @property
    def verdict(self) -> str:
        """OK when the median is within the budget."""
        return "OK" if self.p50_ms <= BUDGET_MS else "OVER"


def measure_keepalive(requests: int = REQUESTS) -> KeepAliveResult:
    """POST ``requests`` small JSON bodies on one connection and time each round trip."""
    server = LocalApiServer(("127.0.0.1", 0), RequestLog(io.StringIO()))
    server.gateway = Gateway(Router([RouteTarget(HttpRoute("ANY", "$default"), "Bench")]), _InstantFunction())
    thread = threading.Thread(target=server.serve_forever, name="bench-local-api", daemon=True)
    thread.start()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    timings: list[float] = []
    try:
        for _ in range(WARM_UP + requests):
            started = time.perf_counter()
            connection.request("POST", "/bench", body=b'{"a":1}', headers=JSON)
            connection.getresponse().read()
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
    return KeepAliveResult(timings[WARM_UP:])


def format_keepalive(result: KeepAliveResult) -> str:
    """The one-row table and how it was measured."""
    table = render(
        ["Requests", "p50 ms", "p90 ms", "Max ms", "Budget", "Verdict"],
        [
            [
                str(len(result.requests_ms)),
                f"{result.p50_ms:.2f}",
                f"{result.p90_ms:.2f}",
                f"{max(result.requests_ms):.2f}",
                f"p50 <= {BUDGET_MS:g} ms",
                result.verdict,
            ]
        ],
        right=frozenset({0, 1, 2, 3}),
    )
    return (
        f"{table}\nMeasured: POSTs on one keep-alive connection to the local API server in process, "
        f"a function that answers at once, after {WARM_UP} warm-up requests."
    )


def keepalive_json(result: KeepAliveResult) -> dict[str, object]:
    """The result as plain data for ``--json``."""
    return {
        "requests": len(result.requests_ms),
        "p50_ms": round(result.p50_ms, 3),
        "p90_ms": round(result.p90_ms, 3),
        "max_ms": round(max(result.requests_ms), 3),
        "budget_p50_ms": BUDGET_MS,
        "verdict": result.verdict,
    }
