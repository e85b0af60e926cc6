"""Users with many sessions, on moto in process: revoke, sweep and ban (docs/performance.md)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from functools import partial
from typing import Any

import boto3
from botocore.config import Config

from bench.harness import Harness
from bench.runs import REGION, Report
from bench.stack import ScenarioError, Tally, batch_write, moto_stack, set_config, timed
from bench.table import render
from nimbus_core.adapters.sessions import session_item
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.session_issuer import new_session, revoke_all
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub
from nimbus_tools.local.lambda_records import lambda_event, matches
from nimbus_tools.local.streams import StreamReader, latest_stream_arn
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import Template
from tests.samples import sample_user

SIZES = (10, 1000, 5000)  # revoke
STALE, CURRENT = 5_000, 3  # sweep: sessions of the old generation, and of the new (which stay)
SWEEPS = 3
BAN_SIZES, BAN_RUNS = (1, 1000), 5  # 1 session: the comparison that shows constant time
SWEEP = "SweepFunction"
OPERATIONS = ("GetItem", "Query", "BatchWriteItem")


def store_sessions(dynamodb: Any, user_id: str, count: int, generation: int = 0) -> set[str]:
    """Store ``count`` live sessions of ``user_id`` (a day left) straight to the table; their ids."""
    owner = sample_user(user_id, "owner").changed(session_generation=generation)
    now = time.time()
    made = [new_session(owner, name="Firefox 132 on Ubuntu", lifetime=86400, now=now) for _ in range(count)]
    puts = [{"PutRequest": {"Item": session_item(m.session)}} for m in made]
    batch_write(dynamodb, get_settings().sessions_table, puts)
    return {m.session.id for m in made}


def stored_ids(dynamodb: Any, user_id: str) -> set[str]:
    """The ids of every session of ``user_id`` stored now."""
    pages = dynamodb.get_paginator("query").paginate(
        TableName=get_settings().sessions_table,
        KeyConditionExpression="userId = :u",
        ExpressionAttributeValues={":u": {"S": user_id}},
        ProjectionExpression="sessionId",
    )
    return {item["sessionId"]["S"] for page in pages for item in page["Items"]}


class Sweeper:
    """SweepFunction fed the users stream as its FilterCriteria let records through, warm, counted."""

    def __init__(self, template: Template, api: InProcessApi) -> None:
        [subscription] = [s for s in stream_subscriptions(template) if s.function == SWEEP]
        self.patterns = subscription.filter_patterns
        session = boto3.Session(region_name=REGION)
        self.setup = session.client("dynamodb")  # the bench's own client, never inside a measure
        self.harness = Harness(api, session)
        streams = session.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))
        arn = latest_stream_arn(self.setup, get_settings().users_table)
        self.reader = StreamReader(streams, arn, "LATEST")
        self.handler = api.handler(SWEEP)

    def skip(self) -> None:
        """Pass over every record so far (the setup's)."""
        while self.reader.read(1000):
            pass

    def sweep(self, user_id: str) -> tuple[float, Tally]:
        """Run the sweep on the one MODIFY record of ``user_id`` since the last read; ms and calls."""
        passed = [r for r in self.reader.read(1000) if matches(r, self.patterns)]
        records = [r for r in passed if r["dynamodb"]["Keys"]["pk"]["S"] == f"USER#{user_id}"]
        if len(records) != 1 or records[0]["eventName"] != "MODIFY":
            raise ScenarioError(f"expected one MODIFY record of the user, got {records}")
        set_config("warm")
        event, context = lambda_event(records), LambdaContextStub(SWEEP)
        elapsed, tally, outcome = timed(partial(self.handler, event, context))
        if outcome != {"batchItemFailures": []}:
            raise ScenarioError(f"the sweep reported failures: {outcome}")
        return elapsed, tally


def revoke(template: Template, runs: int) -> Report:
    """Listing and revoking the sessions of a user with N of them (sizes fixed: ``runs`` unused)."""
    rows: list[list[Any]] = []
    with moto_stack(template, ["SessionsFunction"]) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        setup = boto3.Session(region_name=REGION).client("dynamodb")
        for size in SIZES:
            token = harness.register(harness.unique("revoker"))
            store_sessions(setup, token.split(".")[0], size - 1)
            listed = [timed(partial(api.call, "GET", "/users/me/sessions", token=token)) for _ in range(3)]
            revoke_ms, tally, reply = timed(
                partial(api.call, "DELETE", "/users/me/sessions/all", token=token)
            )
            list_ms = statistics.median(ms for ms, _, _ in listed)
            list_trips, revoke_trips = listed[-1][1].attempts["dynamodb"], tally.attempts["dynamodb"]
            rows.append(
                [size, list_ms, list_trips, revoke_ms, revoke_trips, int(reply.body.get("count", -1))]
            )
    headers = ["Sessions", "GET list ms", "list round trips", "DELETE all ms", "revoke round trips", "count"]
    cells = [[f"{r[0]:,}", *(f"{x:.0f}" for x in r[1:5]), f"{r[5]:,}"] for r in rows]
    table = render(headers, cells, right=frozenset({0, 1, 2, 3, 4, 5}))
    return Report(
        f"{table}\nOne user with N live sessions, moto in process (slower per item than DynamoDB: "
        "read the round trips). The revocation itself is one TransactWriteItems at any N; the rest "
        "is the COUNT Query for the answer's count (one page per MB of sessions).",
        [dict(zip(headers, r, strict=True)) for r in rows],
        [],
    )


def _sweep_once(sweeper: Sweeper) -> dict[str, Any]:
    setup = sweeper.setup
    users = DynamoUsers(setup, get_settings().users_table)
    sweeper.skip()  # earlier runs' records
    stamp = iso(time.time())
    user = sample_user(new_id(), f"sweep{new_id().lower()}").changed(created_at=stamp, updated_at=stamp)
    DynamoTransactor(setup).commit(users.create_ops(user))
    store_sessions(setup, user.id, STALE, user.session_generation)
    revoked = revoke_all(user)
    DynamoTransactor(setup).commit(users.change_ops(user, revoked))
    current = store_sessions(setup, user.id, CURRENT, revoked.session_generation)
    elapsed, tally = sweeper.sweep(user.id)
    if (left := stored_ids(setup, user.id)) != current:
        raise ScenarioError(f"{len(left)} sessions left, expected the {CURRENT} current ones")
    return {
        "seconds": elapsed / 1000,
        "operations": Counter(tally.operations()),
        "ssm_calls": len(tally.operations("ssm")),
    }


def sweep(template: Template, runs: int) -> Report:
    """The sweep of a fresh user's stale sessions, ``SWEEPS`` times (``runs`` unused)."""
    with moto_stack(template, [SWEEP]) as api:
        sweeper = Sweeper(template, api)
        done = [_sweep_once(sweeper) for _ in range(SWEEPS)]
    calls = {op: statistics.median_low(r["operations"][op] for r in done) for op in OPERATIONS}
    seconds = statistics.median(r["seconds"] for r in done)
    total = statistics.median_low(r["operations"].total() for r in done)
    ssm = statistics.median_low(r["ssm_calls"] for r in done)
    of_which = ", ".join(f"{n} {op}" for op, n in calls.items() if n)
    row = [f"{STALE:,}", str(CURRENT), f"{seconds:.2f}", str(total), of_which, str(ssm)]
    headers = ["Stale sessions", "Kept", "Sweep s (moto)", "DynamoDB calls", "Of which", "SSM"]
    table = render(headers, [row], right=frozenset({0, 1, 2, 3, 5}))
    return Report(
        f"{table}\nMeasured: median of {len(done)} sweeps of a fresh user whose generation was bumped "
        f"after {STALE:,} sessions were stored; the sweep function's handler in process on moto, warm, fed "
        "the users stream's record; calls counted on its cached clients. Query pages = Query calls; "
        "BatchWriteItem = ceil(stale / 25) plus any retries of unprocessed items.",
        {"stale_sessions": STALE, "kept_sessions": CURRENT, "operations": calls, "runs": done},
        [],
    )


def _ban_once(sweeper: Sweeper, size: int) -> dict[str, Any]:
    h, setup = sweeper.harness, sweeper.setup
    staff, old = h.account(staff=True), h.account()  # old: the session refused after the ban
    store_sessions(setup, old.id, size - 1)
    if len(stored_ids(setup, old.id)) != size:
        raise ScenarioError(f"setup: expected {size} stored sessions")
    path, body, ip = f"/users/{old.id}/ban", {"reason": "Spam"}, h.fresh_ip()
    sent = h.answer(staff, "PUT", path, body, token=staff.token, ip=ip)
    sweeper.skip()  # the setup's records
    set_config("warm")
    ban_ms, tally, reply = timed(partial(h.api.call, "PUT", path, sent, token=staff.token, ip=ip))
    if reply.status != 200 or reply.body.get("banReason") != "Spam":
        raise ScenarioError(f"PUT {path}: expected 200 with the ban, got {reply.status}: {reply.body}")
    refused = h.api.call("GET", "/users/me", token=old.token, ip=h.fresh_ip())
    if refused.status != 401:
        raise ScenarioError(f"an old session after the ban: expected 401, got {refused.status}")
    if len(stored_ids(setup, old.id)) != size:
        raise ScenarioError("the ban request itself deleted session items")
    sweep_ms, swept = sweeper.sweep(old.id)
    if left := stored_ids(setup, old.id):
        raise ScenarioError(f"{len(left)} of the banned user's sessions left after the sweep")
    return {
        "ban_ms": ban_ms,
        "ban_round_trips": tally.attempts["dynamodb"],
        "ban_operations": tally.operations(),
        "old_session": f"{refused.status} {refused.body.get('code')}",
        "sweep_ms": sweep_ms,
        "sweep_calls": Counter(swept.operations()),
    }


def ban(template: Template, runs: int) -> Report:
    """Banning users with 1 and 1,000 sessions, ``BAN_RUNS`` each, then the sweep (``runs`` unused)."""
    # Only the users stream is read (what feeds the sweep); the others would slow moto down.
    with moto_stack(template, ["StaffFunction", SWEEP], streams=["users_table"]) as api:
        sweeper = Sweeper(template, api)
        _ban_once(sweeper, BAN_SIZES[0])  # discarded: first-use imports and caches on both paths
        done: dict[int, list[dict[str, Any]]] = {size: [] for size in BAN_SIZES}
        for _ in range(BAN_RUNS):  # sizes in turn, so that they share the machine's moods
            for size in BAN_SIZES:
                done[size].append(_ban_once(sweeper, size))
    rows = []
    for size, got in done.items():
        ban_ms, sweep_ms = (f"{statistics.median(r[k] for r in got):.0f}" for k in ("ban_ms", "sweep_ms"))
        trips = statistics.median_low(r["ban_round_trips"] for r in got)
        calls = statistics.median_low(r["sweep_calls"].total() for r in got)
        first = got[0]
        ban_trips = f"{trips} ({', '.join(first['ban_operations'])})"
        of_which = ", ".join(f"{n} {op}" for op, n in first["sweep_calls"].items())
        rows.append([f"{size:,}", ban_ms, ban_trips, first["old_session"], sweep_ms, str(calls), of_which])
    headers = ["Sessions", "PUT ban ms", "ban round trips", "old session after", "sweep ms"]
    table = render([*headers, "sweep DynamoDB calls", "of which"], rows, right=frozenset({0, 1, 4, 5}))
    return Report(
        f"{table}\nMeasured: median of {BAN_RUNS} runs per size (fresh user, fresh staff member answering "
        "with TOTP; moto in process, so read the round trips): the ban is one transaction bumping the "
        "session generation, constant in the sessions, and refuses old sessions at once; SweepFunction, "
        "fed the users stream's record, deletes the stored items afterwards (1 BatchWriteItem per 25).",
        done,
        [],
    )
