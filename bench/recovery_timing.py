"""How long ``POST /users/recover`` takes for a name that is an account and for one that is none,
over HTTP against a local API this bench starts (CONTRACT section 14: the same time for every name,
the two medians within 5%).

Each request comes from a source address never used before (the per-IP limit never answers), and
known and unknown names alternate, in an order shuffled per pair, so a drift of the machine's load
falls on both alike. Before each timed request the bench waits until the stack is idle: no recovery
request is left for the recovery function, and a moment more for the mail function, so the work a
request leaves behind (the lookup and the mail, after the answer) is never timed as part of the
next one.
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from bench.table import render
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api

TRIES = 80  # timed requests per kind of name (30 left medians a millisecond or two apart by noise alone)
WARM_UP = 3  # untimed requests per kind first: the workers' first requests import and connect
BUDGET_PERCENT = 5.0
IDLE_TIMEOUT = 30.0
# After the last request is handled: the mail function's poll (0.2 s) and one send through moto.
MAIL_SETTLE_SECONDS = 0.5
PASSWORD = "correct horse battery"


@dataclass(frozen=True)
class RecoveryTiming:
    """Milliseconds per ``POST /users/recover``, by whether the name is an account."""

    known_ms: list[float]
    unknown_ms: list[float]

    @property
    def known_median(self) -> float:
        """The median for names that are accounts."""
        return statistics.median(self.known_ms)

    @property
    def unknown_median(self) -> float:
        """The median for names that are none."""
        return statistics.median(self.unknown_ms)

    @property
    def difference_percent(self) -> float:
        """How far apart the medians are, in percent of the smaller one."""
        low, high = sorted((self.known_median, self.unknown_median))
        return (high - low) / low * 100

    @property
    def noise_percent(self) -> float:
        """The same measure between the two halves of each kind's own requests (alternate ones),
        the larger of the two: how far apart medians of requests that do the very same thing
        come out on this machine, the floor under :attr:`difference_percent`."""

        def halves(timings: list[float]) -> float:
            low, high = sorted((statistics.median(timings[0::2]), statistics.median(timings[1::2])))
            return (high - low) / low * 100

        return max(halves(self.known_ms), halves(self.unknown_ms))

    @property
    def verdict(self) -> str:
        """OK when the medians are within the budget."""
        return "OK" if self.difference_percent <= BUDGET_PERCENT else "OVER"


class _Client:
    """One request per connection, from a source address of its own (as the e2e tests do)."""

    def __init__(self, api: LocalApiProcess) -> None:
        host, port = api.api_url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self._addresses = itertools.count(2)

    def fresh_ip(self) -> str:
        """A loopback address never used before in this run."""
        n = next(self._addresses)
        return f"127.0.{n // 250}.{n % 250 + 2}"

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, float]:
        """POST ``body`` from a fresh address; (status, milliseconds from send to the whole answer)."""
        connection = http.client.HTTPConnection(
            self.host, self.port, timeout=30, source_address=(self.fresh_ip(), 0)
        )
        try:
            started = time.perf_counter()
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            elapsed = (time.perf_counter() - started) * 1000
        finally:
            connection.close()
        return response.status, elapsed


def _waiting_requests(dynamodb: Any, table: str) -> int:
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table,
        ConsistentRead=True,
        FilterExpression="#k = :k",
        ExpressionAttributeNames={"#k": "kind"},
        ExpressionAttributeValues={":k": {"S": RECOVERY_REQUEST}},
        Select="COUNT",
    )
    return sum(page["Count"] for page in pages)


def _idle(dynamodb: Any, table: str) -> None:
    """Wait until the recovery function has handled every request, and the mail has gone out."""
    deadline = time.monotonic() + IDLE_TIMEOUT
    while _waiting_requests(dynamodb, table):
        if time.monotonic() > deadline:
            raise RuntimeError("the recovery function did not handle the requests in time")
        time.sleep(0.05)
    time.sleep(MAIL_SETTLE_SECONDS)


def _recover(client: _Client, name: str) -> float:
    status, elapsed = client.post("/users/recover", {"username": name})
    if status != 201:
        raise RuntimeError(f"POST /users/recover answered {status}, not 201")
    return elapsed


def measure_recovery_timing(tries: int = TRIES, seed: int = 0) -> RecoveryTiming:
    """Start a local API, register ``tries`` accounts, then time ``tries`` requests for them and
    ``tries`` for names that are none, alternating."""
    state_dir = Path(tempfile.mkdtemp(prefix="nimbus-bench-recovery-"))
    api = start_local_api(state_dir=state_dir, timeout=120)
    try:
        client = _Client(api)
        dynamodb = boto3.client(
            "dynamodb",
            endpoint_url=api.aws_endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        table = api.state["tables"]["OutboxTable"]
        names = [f"timed{n}" for n in range(tries + WARM_UP)]
        for name in names:
            body = {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
            status, _ = client.post("/register", body)
            if status != 201:
                raise RuntimeError(f"setup: POST /register answered {status}")
        order = random.Random(seed)  # noqa: S311 - the order of a benchmark's requests, not a secret
        timed: dict[bool, list[float]] = {True: [], False: []}
        for n, name in enumerate(names):
            pair = [True, False]
            order.shuffle(pair)
            for known in pair:
                _idle(dynamodb, table)
                elapsed = _recover(client, name if known else f"nobody{n}")
                if n >= WARM_UP:
                    timed[known].append(elapsed)
        return RecoveryTiming(known_ms=timed[True], unknown_ms=timed[False])
    finally:
        api.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def format_recovery_timing(result: RecoveryTiming) -> str:
    """The two medians side by side, their difference, and how they were measured."""
    table = render(
        ["Name asked", "Requests", "Median ms", "p90 ms"],
        [
            [
                label,
                str(len(timings)),
                f"{statistics.median(timings):.1f}",
                f"{statistics.quantiles(timings, n=10)[8]:.1f}",
            ]
            for label, timings in (("an account", result.known_ms), ("no account", result.unknown_ms))
        ],
        right=frozenset({1, 2, 3}),
    )
    return (
        f"{table}\nMedians differ by {result.difference_percent:.1f}% (budget <= {BUDGET_PERCENT:g}%): "
        f"{result.verdict}\nNoise: the medians of alternate requests of one kind differ by up to "
        f"{result.noise_percent:.1f}% on this run.\nMeasured: POST /users/recover over HTTP against a "
        f"local API started by the bench, each request from a fresh source address, names "
        f"alternating in a shuffled order, the stack idle before each request, after {WARM_UP} "
        f"untimed requests of each kind."
    )


def recovery_timing_json(result: RecoveryTiming) -> dict[str, object]:
    """The result as plain data for ``--json``."""
    return {
        "requests_per_kind": len(result.known_ms),
        "known_median_ms": round(result.known_median, 3),
        "unknown_median_ms": round(result.unknown_median, 3),
        "difference_percent": round(result.difference_percent, 2),
        "noise_percent": round(result.noise_percent, 2),
        "budget_percent": BUDGET_PERCENT,
        "verdict": result.verdict,
    }
