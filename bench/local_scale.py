"""``make serve`` at real sizes: GET /users/me and POST /login over HTTP with 100 users, then with
100,000 users and 1,000,000 sessions, against the 1.5x goal (docs/performance.md)."""

from __future__ import annotations

import http.client
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from bench.runs import REGION, Report
from bench.table import render
from nimbus_core.adapters.sessions import session_item
from nimbus_core.adapters.user_claims import UserClaims
from nimbus_core.domain.models import Session, User
from nimbus_core.platform import clock, ids
from nimbus_core.sessions.passwords import hash_password
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from nimbus_tools.template import Template, parameter_values
from tests.samples import PASSWORD

BASE_USERS, USERS, SESSIONS = 100, 100_000, 1_000_000
TIMED = 40  # requests of each kind per size, after WARM_UP untimed ones
WARM_UP = 3
GOAL = 1.5  # the large stack's median over the small one's
BATCH = 25  # BatchWriteItem's most
SEED_WRITERS = 4
SETTLED = 20  # stream records left unread when the stack counts as idle (two of its batches)


class _Api:
    """Requests to the local API, each on a connection of its own from an address never used
    before (the per-address limits then never refuse one, as for as many clients)."""

    def __init__(self, api_url: str) -> None:
        self.host, port = api_url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self._addresses = (
            f"127.{n // 62500 % 250 + 1}.{n // 250 % 250}.{n % 250 + 2}" for n in itertools.count()
        )

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[Any, float]:
        """The answer's JSON and the milliseconds from send to the whole answer; RuntimeError for a
        status other than 200 or 201."""
        connection = http.client.HTTPConnection(
            self.host, self.port, timeout=60, source_address=(next(self._addresses), 0)
        )
        headers = {"Content-Type": "application/json"} | ({"Authorization": token} if token else {})
        try:
            started = time.perf_counter()
            connection.request(method, path, None if body is None else json.dumps(body), headers)
            response = connection.getresponse()
            payload = response.read()
            elapsed = (time.perf_counter() - started) * 1000
        finally:
            connection.close()
        if response.status not in (200, 201):
            raise RuntimeError(f"{method} {path} answered {response.status}: {payload[:200]!r}")
        return json.loads(payload), elapsed


def _users(first: int, last: int, password_hash: str, domain: str) -> Iterator[User]:
    stamp = clock.iso(clock.now())
    for n in range(first, last):
        name = f"scale{n}"
        yield User(
            id=ids.new_id(),
            username=name,
            email=f"{name}@example.com",
            password_hash=password_hash,
            created_at=stamp,
            updated_at=stamp,
            domain=domain,
            verified_at=stamp,
        )


def _items(
    api: LocalApiProcess, users: Iterator[User], sessions_each: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table, item) of each user as registration writes it (the user and its two claims; the count
    shards are not kept up), then ``sessions_each`` live sessions of it as login writes them."""
    tables = api.state["tables"]
    claims = UserClaims(None, tables["UsersTable"])  # type: ignore[arg-type]  # only builds items
    now = clock.now()
    stamp = clock.iso(now)
    for user in users:
        for op in claims.create_ops(user):
            put = getattr(op, "op", {}).get("Put")
            if put is not None:
                yield tables["UsersTable"], put["Item"]
        for _ in range(sessions_each):
            session = Session(
                user_id=user.id,
                id=ids.new_id(),
                secret_hash=hash_secret(ids.new_id()),
                user_agent="Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
                exp=int(now) + 86400,
                created_at=stamp,
                updated_at=stamp,
                used_at=stamp,
            )
            yield tables["SessionsTable"], session_item(session)


def _client(api: LocalApiProcess, service: str, config: Config | None = None) -> Any:
    key = "testing"  # the emulator's credentials
    return boto3.client(
        service,  # type: ignore[call-overload]
        REGION,
        endpoint_url=api.aws_endpoint_url,
        aws_access_key_id=key,
        aws_secret_access_key=key,
        config=config,
    )


def _seed(api: LocalApiProcess, items: Iterator[tuple[str, dict[str, Any]]]) -> int:
    """Write ``items`` with BatchWriteItem, ``SEED_WRITERS`` requests at once; how many."""
    config = Config(max_pool_connections=SEED_WRITERS, retries={"mode": "standard", "max_attempts": 10})
    dynamodb = _client(api, "dynamodb", config)

    def write(batch: tuple[tuple[str, dict[str, Any]], ...]) -> int:
        request: dict[str, list[Any]] = {}
        for table, item in batch:
            request.setdefault(table, []).append({"PutRequest": {"Item": item}})
        while request:
            request = dynamodb.batch_write_item(RequestItems=request)["UnprocessedItems"]
        return len(batch)

    written, batches = 0, itertools.batched(items, BATCH, strict=False)
    with ThreadPoolExecutor(SEED_WRITERS) as pool:
        # A few hundred batches at a time: the items are made as they are written, not all first.
        while chunk := list(itertools.islice(batches, 100 * SEED_WRITERS)):
            written += sum(pool.map(write, chunk))
    return written


def _settle(api: LocalApiProcess) -> None:
    """Wait until the users table's stream is read (its reader trims what it handled): the seed's
    records keep the sweep function busy for a while, which would be timed along otherwise."""
    table = _client(api, "dynamodb").describe_table(TableName=api.state["tables"]["UsersTable"])
    streams = _client(api, "dynamodbstreams")
    stream = table["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]["ShardId"]
    while True:
        try:
            iterator = streams.get_shard_iterator(
                StreamArn=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            if len(streams.get_records(ShardIterator=iterator, Limit=100)["Records"]) < SETTLED:
                break
        except ClientError:
            pass  # the poller trimmed the stream under the iterator (moto answers 500): read again
        time.sleep(1)
    time.sleep(2)  # the last batch's invocation


def _timed(api: _Api, users: list[str]) -> dict[str, float]:
    """Median milliseconds of POST /login (a user of ``users`` in turn) and GET /users/me."""
    token = api.call("POST", "/login", {"username": users[0], "password": PASSWORD})[0]["token"]
    logins, mes = [], []
    for n in range(WARM_UP + TIMED):
        login = api.call("POST", "/login", {"username": users[n % len(users)], "password": PASSWORD})[1]
        me = api.call("GET", "/users/me", token=token)[1]
        if n >= WARM_UP:
            logins.append(login)
            mes.append(me)
    return {"login_ms": statistics.median(logins), "me_ms": statistics.median(mes)}


def _rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its children (the emulator and the function workers)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        status = Path(f"/proc/{current}/status").read_text()
        total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
        for task in Path(f"/proc/{current}/task").iterdir():
            pending += [int(child) for child in (task / "children").read_text().split()]
    return total / 1024


def measure(
    template: Template, base: int = BASE_USERS, users: int = USERS, sessions: int = SESSIONS
) -> dict[str, Any]:
    """Start ``make serve``'s stack, time the requests with ``base`` users, seed up to ``users``
    users and ``sessions`` sessions, and time them again."""
    domain = parameter_values(template)["DefaultDomain"]  # what make serve gives new users
    password_hash = hash_password(PASSWORD)
    with tempfile.TemporaryDirectory(prefix="nimbus-bench-scale-", ignore_cleanup_errors=True) as state:
        api = start_local_api(state_dir=Path(state), timeout=120)
        try:
            client = _Api(api.api_url)
            _seed(api, _items(api, _users(0, base, password_hash, domain), 0))
            _settle(api)
            timed_users = [f"scale{n}" for n in range(base)]
            small = _timed(client, timed_users) | {"rss_mib": _rss_mib(api.process.pid)}
            started = time.perf_counter()
            seeded = _seed(
                api, _items(api, _users(base, users, password_hash, domain), -(-sessions // (users - base)))
            )
            seed_seconds = time.perf_counter() - started
            _settle(api)
            settle_seconds = time.perf_counter() - started - seed_seconds
            large = _timed(client, timed_users) | {"rss_mib": _rss_mib(api.process.pid)}
        finally:
            api.stop()
    return {
        "small": small,
        "large": large,
        "seeded_items": seeded,
        "seed_seconds": seed_seconds,
        "settle_seconds": settle_seconds,
        "users": users,
        "sessions": sessions,
        "base": base,
    }


def run(template: Template, runs: int) -> Report:
    """The two medians of each request at both sizes, their ratio against the goal, and memory
    (``runs`` unused)."""
    result = measure(template)
    small, large = result["small"], result["large"]
    rows, over = [], []
    for key, label in (("me_ms", "GET /users/me"), ("login_ms", "POST /login")):
        ratio = large[key] / small[key]
        verdict = "OK" if ratio <= GOAL else "OVER"
        rows.append(
            [label, f"{small[key]:.1f}", f"{large[key]:.1f}", f"{ratio:.2f}x", f"<= {GOAL:g}x", verdict]
        )
        over += [f"local stack at scale: {label}"] if verdict == "OVER" else []
    headers = [
        "Request",
        f"{result['base']:,} users ms",
        f"{result['users']:,} users ms",
        "Ratio",
        "Goal",
        "Verdict",
    ]
    table = render(headers, rows, frozenset({1, 2, 3}))
    text = (
        f"{table}\nMeasured: medians of {TIMED} requests of each kind over HTTP against `make serve`'s "
        f"stack (started by the bench), each from a fresh address, after {WARM_UP} untimed; then "
        f"{result['seeded_items']:,} items ({result['users'] - result['base']:,} more users with their "
        f"claims, at least {result['sessions']:,} sessions) written with BatchWriteItem in "
        f"{result['seed_seconds']:.0f} s, their stream records read by the sweep function "
        f"{result['settle_seconds']:.0f} s later.\nMemory (emulator and function workers, resident): "
        f"{small['rss_mib']:,.0f} MiB with {result['base']:,} users, {large['rss_mib']:,.0f} MiB at scale."
    )
    return Report(text, result, over)
