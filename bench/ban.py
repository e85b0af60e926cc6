"""Banning a user with 1,000 sessions: ``PUT /users/:id/ban`` end to end, then the sweep of the
1,000 stored session items it leaves behind.

A fresh staff member (staff flag and a TOTP factor) bans a fresh user whose sessions were written
straight to moto in batches (the registration's own session plus N - 1 more). The staff member
reverifies as staff do: the password first (the 401 challenge, uncounted and untimed), then the
measured request answering it with the current TOTP code. Banning revokes every session by moving
the user to a new generation in the one transaction that also stores the ban and queues the
notice, so the request does not grow with N; an old session is then refused at once (401), though
its item is still stored. The users stream's record of the ban is then read from moto, filtered by
SweepFunction's FilterCriteria (and to the banned user's key: the staff member's own record, for
the TOTP replay guard, is left out), and the sweep's handler runs on it in this process, warm.

Times are moto's, in process (slower per item than DynamoDB, so upper bounds); the round trips are
what carries over to AWS. Nothing here is asserted on time.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import boto3
import pyotp
from botocore.config import Config
from moto import mock_aws

from bench.calls import (
    FAKE_AWS,
    REGION,
    CallCounter,
    Harness,
    ScenarioError,
    _environment,
    _function_logs_captured,
    _reset_caches,
    _set_config,
    _stop_stream_records,
)
from bench.sessions import stored_sessions
from bench.sweep import _store, _stored
from bench.table import render
from nimbus_core.adapters import clients
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub
from nimbus_tools.local.provision import provision
from nimbus_tools.local.streams import StreamReader, lambda_event, latest_stream_arn, matches
from nimbus_tools.template import Template, stream_subscriptions

SIZES = (1, 1000)  # sessions of the banned user; 1 is the comparison that shows constant time
RUNS = 5
FUNCTION = "SweepFunction"
REASON = "Spam"


class BanBenchError(RuntimeError):
    """The ban or the sweep did not do what it must, so its figures would describe something else."""


@dataclass(frozen=True)
class BanRun:
    """One ban of one fresh user, and the sweep after it."""

    ban_ms: float
    ban_round_trips: int  # DynamoDB HTTP attempts of the ban request
    ban_operations: tuple[str, ...]
    old_session_status: int  # GET /users/me with a session from before the ban
    old_session_code: str  # and its error code
    sweep_ms: float
    sweep_calls: dict[str, int]  # DynamoDB operation -> API calls of the sweep
    swept: int  # session items the sweep deleted


@dataclass(frozen=True)
class BanRow:
    """Every run of one size; the figures are their medians."""

    sessions: int
    runs: list[BanRun]

    @property
    def ban_ms(self) -> float:
        """Median time of the ban request."""
        return statistics.median(r.ban_ms for r in self.runs)

    @property
    def sweep_ms(self) -> float:
        """Median time of the sweep."""
        return statistics.median(r.sweep_ms for r in self.runs)

    @property
    def ban_round_trips(self) -> int:
        """Median DynamoDB round trips of the ban request."""
        return statistics.median_low(r.ban_round_trips for r in self.runs)

    @property
    def sweep_calls(self) -> int:
        """Median DynamoDB calls of the sweep."""
        return statistics.median_low(sum(r.sweep_calls.values()) for r in self.runs)

    def sweep_operations(self) -> str:
        """The sweep's calls per operation, as the first run made them."""
        return ", ".join(f"{n} {op}" for op, n in self.runs[0].sweep_calls.items())


class _Bench:
    """The stack of one measurement: the API, the users stream and the counted clients."""

    def __init__(self, template: Template, api: InProcessApi) -> None:
        self.api = api
        session = boto3.Session(region_name=REGION)
        self.harness = Harness(api, session)
        self.setup = session.client("dynamodb")  # the bench's own client, never counted
        self.counter = CallCounter([clients.dynamodb(), clients.ssm(), clients.sesv2()])
        [subscription] = [s for s in stream_subscriptions(template) if s.function == FUNCTION]
        self.patterns = subscription.filter_patterns
        streams = session.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))
        arn = latest_stream_arn(self.setup, get_settings().users_table)
        self.reader = StreamReader(streams, arn, "LATEST")

    def run(self, size: int) -> BanRun:
        h = self.harness
        table = get_settings().sessions_table
        staff = h.register(h.unique("banner"))
        seed = h.make_staff(staff)
        old = h.register(h.unique("banned"))  # the session that must be refused after the ban
        user_id = old.split(".")[0]
        _store(self.setup, table, stored_sessions(user_id, size - 1))
        if len(_stored(self.setup, table, user_id)) != size:
            raise BanBenchError(f"setup: expected {size} stored sessions")
        path, body, ip = f"/users/{user_id}/ban", {"reason": REASON}, h.fresh_ip()
        first = h.challenge("PUT", path, body, staff, ip)
        answer = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(seed).now()}
        while self.reader.read(1000):
            pass  # the setup's records
        _set_config("warm")
        with self.counter.measure() as tally:
            started = time.perf_counter()
            reply = self.api.call("PUT", path, body | {"2fa": answer}, token=staff, ip=ip)
            ban_ms = (time.perf_counter() - started) * 1000
        if reply.status != 200 or reply.body.get("banReason") != REASON:
            raise BanBenchError(f"PUT {path}: expected 200 with the ban, got {reply.status}: {reply.body}")
        refused = self.api.call("GET", "/users/me", token=old, ip=h.fresh_ip())
        if refused.status != 401:
            raise BanBenchError(f"an old session after the ban: expected 401, got {refused.status}")
        if len(_stored(self.setup, table, user_id)) != size:
            raise BanBenchError("the ban request itself deleted session items")
        records = [
            r
            for r in self.reader.read(1000)
            if matches(r, self.patterns) and r["dynamodb"]["Keys"]["pk"]["S"] == f"USER#{user_id}"
        ]
        if len(records) != 1 or records[0]["eventName"] != "MODIFY":
            raise BanBenchError(f"expected one MODIFY record of the banned user, got {records}")
        handler = self.api.handler(FUNCTION)
        _set_config("warm")
        with self.counter.measure() as swept:
            started = time.perf_counter()
            outcome = handler(lambda_event(records), LambdaContextStub(FUNCTION))
            sweep_ms = (time.perf_counter() - started) * 1000
        if outcome != {"batchItemFailures": []}:
            raise BanBenchError(f"the sweep reported failures: {outcome}")
        left = _stored(self.setup, table, user_id)
        if left:
            raise BanBenchError(f"{len(left)} of the banned user's sessions left after the sweep")
        if tally.other_clients or swept.other_clients:
            raise BanBenchError(f"calls by unwatched clients: {tally.other_clients + swept.other_clients}")
        sweep_calls: dict[str, int] = {}
        for service, operation in swept.calls:
            if service == "dynamodb":
                sweep_calls[operation] = sweep_calls.get(operation, 0) + 1
        return BanRun(
            ban_ms=ban_ms,
            ban_round_trips=tally.attempts["dynamodb"],
            ban_operations=tuple(op for service, op in tally.calls if service == "dynamodb"),
            old_session_status=refused.status,
            old_session_code=str(refused.body.get("code")),
            sweep_ms=sweep_ms,
            sweep_calls=sweep_calls,
            swept=size,
        )


def measure_ban(template: Template, sizes: Sequence[int] = SIZES, runs: int = RUNS) -> list[BanRow]:
    """Provision moto from ``template``; for each size, ban ``runs`` fresh users and sweep after."""
    with _environment(FAKE_AWS), mock_aws():
        provision(boto3.Session(region_name=REGION), template)
        api = InProcessApi(template)
        os.environ.update(api.environment())  # before any handler import, as in bench.calls
        _reset_caches()
        # Only the users stream is read (what feeds the sweep); the others would slow moto down.
        _stop_stream_records(keep={get_settings().users_table})
        try:
            api.handler("StaffFunction")
            api.handler(FUNCTION)
            with _function_logs_captured() as logs:
                bench = _Bench(template, api)
                try:
                    bench.run(sizes[0])  # discarded: first-use imports and caches on both paths
                    done: dict[int, list[BanRun]] = {size: [] for size in sizes}
                    for _ in range(runs):  # sizes in turn, so that they share the machine's moods
                        for size in sizes:
                            done[size].append(bench.run(size))
                    return [BanRow(size, done[size]) for size in sizes]
                except (BanBenchError, ScenarioError) as error:
                    tail = "\n".join(logs.getvalue().splitlines()[-20:])
                    raise BanBenchError(f"{error}\n--- last function log lines ---\n{tail}") from None
        finally:
            _reset_caches()


def format_ban(rows: Sequence[BanRow]) -> str:
    """The table and how it was measured."""
    table = render(
        [
            "Sessions",
            "PUT ban ms",
            "ban round trips",
            "old session after",
            "sweep ms",
            "sweep DynamoDB calls",
            "of which",
        ],
        [
            [
                f"{r.sessions:,}",
                f"{r.ban_ms:.0f}",
                f"{r.ban_round_trips} ({', '.join(r.runs[0].ban_operations)})",
                f"{r.runs[0].old_session_status} {r.runs[0].old_session_code}",
                f"{r.sweep_ms:.0f}",
                str(r.sweep_calls),
                r.sweep_operations(),
            ]
            for r in rows
        ],
        right=frozenset({0, 1, 4, 5}),
    )
    runs = len(rows[0].runs) if rows else 0
    return (
        f"{table}\nMeasured: median of {runs} runs per size (fresh user, fresh staff member answering "
        "with TOTP; moto in process, so read the round trips): the ban is one transaction bumping the "
        "session generation, constant in the sessions, and refuses old sessions at once; SweepFunction, "
        "fed the users stream's record, deletes the stored items afterwards (1 BatchWriteItem per 25)."
    )


def ban_json(rows: Sequence[BanRow]) -> list[dict[str, Any]]:
    """The rows as plain data for ``--json``."""
    return [
        {
            "sessions": r.sessions,
            "ban_ms": round(r.ban_ms, 1),
            "ban_round_trips": r.ban_round_trips,
            "old_session_status": r.runs[0].old_session_status,
            "old_session_code": r.runs[0].old_session_code,
            "sweep_ms": round(r.sweep_ms, 1),
            "sweep_dynamodb_calls": r.sweep_calls,
            "runs": [
                {"ban_ms": round(run.ban_ms, 1), "sweep_ms": round(run.sweep_ms, 1), "swept": run.swept}
                for run in r.runs
            ],
        }
        for r in rows
    ]
