"""Over HTTP, against the local API: keep-alive latency and recovery timing (docs/performance.md)."""

from __future__ import annotations

import http.client
import io
import itertools
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3

from bench.runs import REGION, Report
from bench.table import render
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_tools.local.functions import Invocation
from nimbus_tools.local.gateway import Gateway
from nimbus_tools.local.launcher import start_local_api
from nimbus_tools.local.router import Router, RouteTarget
from nimbus_tools.local.server import LocalApiServer, RequestLog
from nimbus_tools.template import HttpRoute, Template
from tests.samples import PASSWORD

REQUESTS, WARM_UP = 200, 10  # keep-alive requests timed, after untimed ones
BUDGET_MS = 10.0  # a Nagle stall alone is ~40 ms
TRIES = 80  # timed requests per kind of name (30 left medians a millisecond or two apart by noise alone)
RECOVERY_WARM_UP = 3  # untimed requests per kind first: the workers' first requests import and connect
BUDGET_PERCENT = 5.0
IDLE_TIMEOUT = 30.0
# After the last request is handled: the mail function's poll (0.2 s) and one send through moto.
MAIL_SETTLE_SECONDS = 0.5
JSON = {"Content-Type": "application/json"}


class _InstantFunction:
    """A function that answers at once (the invoker protocol of the gateway)."""

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        result = {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": '{"ok":true}'}
        return Invocation(ok=True, result_json=json.dumps(result))


def keepalive(template: Template, runs: int) -> Report:
    """POST ``REQUESTS`` small JSON bodies on one connection and time each round trip (``runs``
    unused)."""
    server = LocalApiServer(("127.0.0.1", 0), RequestLog(io.StringIO()))
    server.gateway = Gateway(Router([RouteTarget(HttpRoute("ANY", "$default"), "Bench")]), _InstantFunction())
    thread = threading.Thread(target=server.serve_forever, name="bench-local-api", daemon=True)
    thread.start()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    timings: list[float] = []
    try:
        for _ in range(WARM_UP + REQUESTS):
            started = time.perf_counter()
            connection.request("POST", "/bench", body=b'{"a":1}', headers=JSON)
            connection.getresponse().read()
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
    timed = timings[WARM_UP:]
    p50, p90 = statistics.median(timed), statistics.quantiles(timed, n=10)[8]
    verdict = "OK" if p50 <= BUDGET_MS else "OVER"
    figures = [f"{ms:.2f}" for ms in (p50, p90, max(timed))]
    row = [str(len(timed)), *figures, f"p50 <= {BUDGET_MS:g} ms", verdict]
    headers = ["Requests", "p50 ms", "p90 ms", "Max ms", "Budget", "Verdict"]
    table = render(headers, [row], frozenset({0, 1, 2, 3}))
    return Report(
        f"{table}\nMeasured: POSTs on one keep-alive connection to the local API server in process, "
        f"a function that answers at once, after {WARM_UP} warm-up requests.",
        {"requests_ms": timed, "p50_ms": p50, "p90_ms": p90, "budget_p50_ms": BUDGET_MS, "verdict": verdict},
        ["keep-alive latency"] if verdict == "OVER" else [],
    )


def _post(api_url: str, ip: str, path: str, body: dict[str, Any]) -> float:
    """POST ``body`` on a connection of its own from ``ip`` (as the e2e tests do); the milliseconds
    from send to the whole answer. RuntimeError unless it is a 201."""
    host, port = api_url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(ip, 0))
    try:
        started = time.perf_counter()
        connection.request("POST", path, json.dumps(body), JSON)
        response = connection.getresponse()
        response.read()
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        connection.close()
    if response.status != 201:
        raise RuntimeError(f"POST {path} answered {response.status}, not 201")
    return elapsed


def _idle(dynamodb: Any, table: str) -> None:
    """Wait until the recovery function has handled every request, and the mail has gone out."""
    deadline = time.monotonic() + IDLE_TIMEOUT
    waiting = {
        "TableName": table,
        "ConsistentRead": True,
        "FilterExpression": "#k = :k",
        "ExpressionAttributeNames": {"#k": "kind"},
        "ExpressionAttributeValues": {":k": {"S": RECOVERY_REQUEST}},
        "Select": "COUNT",
    }
    while sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(**waiting)):
        if time.monotonic() > deadline:
            raise RuntimeError("the recovery function did not handle the requests in time")
        time.sleep(0.05)
    time.sleep(MAIL_SETTLE_SECONDS)


def _measure_recovery() -> dict[bool, list[float]]:
    """Start a local API, register ``TRIES`` accounts, then time ``TRIES`` requests for them and
    ``TRIES`` for names that are none, alternating; milliseconds by whether the name is an account."""
    with tempfile.TemporaryDirectory(prefix="nimbus-bench-recovery-", ignore_cleanup_errors=True) as state:
        api = start_local_api(state_dir=Path(state), timeout=120)
        try:
            endpoint, key = api.aws_endpoint_url, "testing"  # the emulator's credentials
            dynamodb = boto3.client(
                "dynamodb", REGION, endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=key
            )
            table = api.state["tables"]["OutboxTable"]
            addresses = (f"127.0.{n // 250}.{n % 250 + 2}" for n in itertools.count(2))  # each used once
            names = [f"timed{n}" for n in range(TRIES + RECOVERY_WARM_UP)]
            for name in names:
                body = {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
                _post(api.api_url, next(addresses), "/register", body)
            order = random.Random(0)  # noqa: S311 - the order of a benchmark's requests, not a secret
            timed: dict[bool, list[float]] = {True: [], False: []}
            for n, name in enumerate(names):
                pair = [True, False]
                order.shuffle(pair)
                for known in pair:
                    _idle(dynamodb, table)
                    asked = {"username": name if known else f"nobody{n}"}
                    elapsed = _post(api.api_url, next(addresses), "/users/recover", asked)
                    if n >= RECOVERY_WARM_UP:
                        timed[known].append(elapsed)
            return timed
        finally:
            api.stop()


def _apart(one: list[float], other: list[float]) -> float:
    """How far apart the medians are, in percent of the smaller one."""
    low, high = sorted((statistics.median(one), statistics.median(other)))
    return (high - low) / low * 100


def recovery(template: Template, runs: int) -> Report:
    """The two medians side by side, their difference, the noise, and how they were measured
    (``runs`` unused)."""
    timed = _measure_recovery()
    known, unknown = timed[True], timed[False]
    difference = _apart(known, unknown)
    # The noise: the same measure between alternate requests of one kind, which do the very same
    # thing (the larger of the two kinds), the floor under the difference.
    noise = max(_apart(known[0::2], known[1::2]), _apart(unknown[0::2], unknown[1::2]))
    verdict = "OK" if difference <= BUDGET_PERCENT else "OVER"
    rows = [
        [label, str(len(ms)), f"{statistics.median(ms):.1f}", f"{statistics.quantiles(ms, n=10)[8]:.1f}"]
        for label, ms in (("an account", known), ("no account", unknown))
    ]
    table = render(["Name asked", "Requests", "Median ms", "p90 ms"], rows, right=frozenset({1, 2, 3}))
    return Report(
        f"{table}\nMedians differ by {difference:.1f}% (budget <= {BUDGET_PERCENT:g}%): "
        f"{verdict}\nNoise: the medians of alternate requests of one kind differ by up to "
        f"{noise:.1f}% on this run.\nMeasured: POST /users/recover over HTTP against a "
        f"local API started by the bench, each request from a fresh source address, names "
        f"alternating in a shuffled order, the stack idle before each request, after {RECOVERY_WARM_UP} "
        f"untimed requests of each kind.",
        {"known_ms": known, "unknown_ms": unknown, "difference_percent": difference, "noise_percent": noise},
        ["recovery timing"] if verdict == "OVER" else [],
    )
