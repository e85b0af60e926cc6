"""Revoking every session of a user with many of them: request time and round trips against N.

For N in (10, 1,000, 5,000) sessions of one user (written straight to moto, in batches), this times
``DELETE /users/me/sessions/all`` and ``GET /users/me/sessions`` through the in-process API and
counts their DynamoDB round trips. Revocation is one transaction moving the user to a new
generation, so its cost does not grow with N except for the ``count`` in the answer (a COUNT Query:
one more page per MB of sessions, about 3,000 of them). moto is much slower per item than
DynamoDB, so the milliseconds are an upper bound; the round trips are what carries over.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from moto import mock_aws

from bench.calls import (
    FAKE_AWS,
    PASSWORD,
    REGION,
    CallCounter,
    _environment,
    _function_logs_captured,
    _reset_caches,
)
from bench.table import render
from nimbus_core.adapters import clients
from nimbus_core.adapters.batch import WRITE_BATCH
from nimbus_core.adapters.sessions import session_item
from nimbus_core.domain.models import Session
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.local.inprocess import InProcessApi
from nimbus_tools.local.provision import provision
from nimbus_tools.template import Template

SIZES = (10, 1000, 5000)


@dataclass(frozen=True)
class RevokeRow:
    """One size: how long listing and revoking took, and their DynamoDB round trips."""

    sessions: int
    list_ms: float
    list_round_trips: int
    revoke_ms: float
    revoke_round_trips: int
    count: int


def stored_sessions(user_id: str, count: int, generation: int = 0) -> list[Session]:
    """``count`` live sessions of ``user_id`` (a day left), as a bench stores them directly."""
    now = time.time()
    stamp = iso(now)
    return [
        Session(
            user_id=user_id,
            id=new_id(),
            secret_hash=hash_secret(new_id()),
            name="Firefox 132 on Ubuntu",
            exp=int(now) + 86400,
            created_at=stamp,
            updated_at=stamp,
            used_at=stamp,
            generation=generation,
        )
        for _ in range(count)
    ]


def _add_sessions(dynamodb: Any, user_id: str, generation: int, count: int) -> None:
    table = get_settings().sessions_table
    items = [session_item(session) for session in stored_sessions(user_id, count, generation)]
    for start in range(0, len(items), WRITE_BATCH):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + WRITE_BATCH]]
        dynamodb.batch_write_item(RequestItems={table: batch})


def _timed(counter: CallCounter, call: Any) -> tuple[float, int, Any]:
    with counter.measure() as tally:
        started = time.perf_counter()
        reply = call()
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, tally.attempts["dynamodb"], reply


def measure_revoke(template: Template, sizes: Sequence[int] = SIZES) -> list[RevokeRow]:
    """Provision moto, then for each size make a user with that many sessions and time the requests."""
    rows = []
    with _environment(FAKE_AWS), mock_aws():
        provision(boto3.Session(region_name=REGION), template)
        api = InProcessApi(template)
        os.environ.update(api.environment())
        _reset_caches()
        try:
            api.handler("SessionsFunction")
            counter = CallCounter([clients.dynamodb(), clients.ssm(), clients.sesv2()])
            setup = boto3.Session(region_name=REGION).client("dynamodb")
            with _function_logs_captured():
                for index, size in enumerate(sizes):
                    name = f"revoker{index}"
                    body = {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
                    token = api.call("POST", "/register", body, ip=f"10.9.0.{index + 1}").body["token"]
                    _add_sessions(setup, token.split(".")[0], 0, size - 1)
                    list_runs = [
                        _timed(counter, lambda t=token: api.call("GET", "/users/me/sessions", token=t))
                        for _ in range(3)
                    ]
                    revoke_ms, revoke_trips, reply = _timed(
                        counter, lambda t=token: api.call("DELETE", "/users/me/sessions/all", token=t)
                    )
                    rows.append(
                        RevokeRow(
                            sessions=size,
                            list_ms=statistics.median(r[0] for r in list_runs),
                            list_round_trips=list_runs[-1][1],
                            revoke_ms=revoke_ms,
                            revoke_round_trips=revoke_trips,
                            count=int(reply.body.get("count", -1)),
                        )
                    )
        finally:
            _reset_caches()
    return rows


def format_revoke(rows: Sequence[RevokeRow]) -> str:
    """The table."""
    table = render(
        ["Sessions", "GET list ms", "list round trips", "DELETE all ms", "revoke round trips", "count"],
        [
            [
                f"{r.sessions:,}",
                f"{r.list_ms:.0f}",
                str(r.list_round_trips),
                f"{r.revoke_ms:.0f}",
                str(r.revoke_round_trips),
                f"{r.count:,}",
            ]
            for r in rows
        ],
        right=frozenset({0, 1, 2, 3, 4, 5}),
    )
    return (
        f"{table}\nOne user with N live sessions, moto in process (slower per item than DynamoDB: "
        "read the round trips). The revocation itself is one TransactWriteItems at any N; the rest "
        "is the COUNT Query for the answer's count (one page per MB of sessions)."
    )


def revoke_json(rows: Sequence[RevokeRow]) -> list[dict[str, Any]]:
    """The rows, for ``--json``."""
    return [row.__dict__ for row in rows]
