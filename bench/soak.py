"""``python -m bench.soak`` (``make soak``): minutes of mixed traffic against the local API, judged.

It starts its own local API (``start_local_api``, as tests/e2e/conftest.py does: free ports, a
temporary state directory) or, with ``--state .local/serve.json``, attaches to a running ``make
serve``. Then ``--clients`` threads (default 8) each play simulated users one after another, and one
more thread plays a staff member, for ``--minutes`` (default 2):

* a user registers, reads ``/users/me`` and the domains, logs in (sometimes first with a wrong
  password or an unknown name), lists, reads, renames and revokes its sessions, creates a scoped
  session and uses it (and what its scopes forbid), changes its username, email (and verifies it with
  the mailed token), domain and password, enrols TOTP and logs in through the challenge (answered
  with TOTP or backup codes, sometimes wrongly first), asks for a recovery email and resets its
  password with the mailed token, and finally deletes its account; each step but the first and last
  with some probability, so the mix differs between users;
* on the way it sends hostile input: bodies that are not JSON, not UTF-8, not objects, nested 5,000
  deep, over 64 KiB; fields of the wrong type; tampered tokens, dead users' tokens, other users'
  session and user ids; unknown routes. Each must be refused with a 4xx (a 2xx is a failure, as a
  5xx is);
* the staff member (promoted with ``nimbus staff promote`` after enrolling TOTP, as staff must have a
  second factor) registers victims and reads, renames, bans, unbans and deletes them, reverifying
  with backup codes or TOTP and regenerating the codes when they run low.

Every user has its own loopback source address (127.64.0.1 onwards, randomly offset per run; the
local API takes the client IP from the socket, never from a header), and the per-IP and per-user
rate limits of CONTRACT section 10 are respected per user, so the soak is not a 429 test; a recovery
and a challenged login come from a second address, as from another device. Users pause before each
request (``--think-ms``, 200 ms on average): without pauses eight users saturate the emulator on a
two-core machine, the stream-fed mail and sweep functions fall behind, and every figure then
describes the backlog rather than the service.

Verdict (the exit status is 1 if any fails): no 5xx and no transport error, no hostile request
accepted, the invariants of tests/invariants.py (``stack_violations``: users, sessions, tokens,
outbox) hold, checked every ``--invariant-seconds`` while the traffic runs (a finding counts if an
immediate second check repeats it: the Scans are no snapshot) and once more after it has stopped,
and the memory does not grow.

Memory. The RSS of the local API's process and its descendants (the moto emulator, the gateway and
the HTTP server live in the main process, each function's warm workers are its children) is read
from /proc every ``--sample-seconds``. moto keeps every item in memory, so a growing data set raises
the RSS legitimately. The data set is therefore kept bounded rather than judged per item: every user
deletes its account at the end of its life (its sessions, factors, tokens and stored mail go with
it), the staff member deletes its victims, the emulator's captured mail is cleared at every sample,
and the rate-limit counters of finished users (their addresses, ids and recovery names: no request
comes from them again) are deleted every ``EXPIRY_SECONDS``, as DynamoDB's TTL would once their
windows closed; moto has no TTL. What stays is counted and allowed for: items still added (sweeps
behind, counters of live users) and moto's own record of every email SES sent, which no API clears.

The figure judged is the growth over the second half of the run of the processes alive through all
of it (a worker spawned late is new memory, not growth), each less its largest rise between two
readings if that rise is a step of at least ``STEP_MIB``: a one-time step, not a leak (a worker's
first argon2 hash leaves 19 MiB mapped; its first request on a route imports that route's modules).
It must stay within

    allowance = 16 MiB + 8 KiB per item added + 16 KiB per email sent (over the second half)

The per-item and per-email figures are twice what moto was measured to keep (tracemalloc, in
process: 1.2 KiB per counter item, 4.8 KiB per outbox message, 7.7 KiB per email sent), so data
never fails the soak. The fixed 16 MiB is noise: RSS read between requests across some twenty
processes, and memory that settles late (pymalloc arenas kept after a peak, caches filling). With
moto's instance tracker emptied (see docs/performance.md, "Soak") the default run measured +6 MiB
and a five-minute run +3 MiB. At about 30 requests a second, 16 MiB is 8 KiB per request of the
default run's second half, and under 1 KiB per request for ``--minutes 20``: run longer to catch
smaller leaks.

Printed: requests, throughput, per kind of request the statuses and p50/p95/p99 latency, the
failures (request and response), RSS at the start (after the warm-up, the first ``--warm-up``
fraction of the run), peak and end, the slope and growth over the second half, items and emails,
and the invariant checks run with their violations.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pyotp
from botocore.config import Config

from bench.table import render
from nimbus_core.scopes import Scope
from nimbus_core.tokens import hash_secret
from nimbus_tools.local.control import ControlError, clear_mail
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from nimbus_tools.local.state import ServeState, process_alive, read_state
from tests.invariants import stack_violations

PASSWORD = "correct horse battery"
DEFAULT_MINUTES = 2.0
DEFAULT_CLIENTS = 8
THINK_MS = 200.0  # a user's average pause before a request
SAMPLE_SECONDS = 2.0
INVARIANT_SECONDS = 30.0
WARM_UP_FRACTION = 0.25
EXPIRY_SECONDS = 10.0  # how often the counters of finished users are deleted (moto has no TTL)
PROGRESS_SECONDS = 15.0
# The memory allowance over the second half, and the one-time step a process may take (module docstring).
FIXED_ALLOWANCE_MIB = 16.0
ITEM_ALLOWANCE_KIB = 8.0
MAIL_ALLOWANCE_KIB = 16.0
STEP_MIB = 4.0
MIB = 1024 * 1024
SETTLE_SECONDS = 60.0  # at most, after the traffic, for the stream-fed functions to catch up
STOP_SECONDS = 60.0  # for the local API to stop on Ctrl-C
REQUEST_TIMEOUT = 60.0
SHOWN_FAILURES = 20
BODY_LIMIT = 64 * 1024
CHALLENGE = "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
VERIFY_LINK = re.compile(r"verify\?token=([A-Za-z0-9_.-]+)")
RECOVER_LINK = re.compile(r"recover\?token=([A-Za-z0-9_.-]+)")


# ------------------------------------------------------------------------------------- pure figures


def traffic_random(seed: int) -> random.Random:
    """The random choices of one actor's traffic (reproducible with --seed; nothing secret)."""
    return random.Random(seed)  # noqa: S311


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; NaN if empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * min(max(q, 0.0), 100.0) / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(x, y)`` points (y per unit of x); 0.0 for fewer than two x."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


@dataclass(frozen=True)
class Sample:
    """One reading: seconds since the traffic started, RSS bytes per process, items, mail sent."""

    at: float
    rss: dict[int, int]
    items: int
    mails: int

    @property
    def total(self) -> int:
        """The RSS of every process of the local API, in bytes."""
        return sum(self.rss.values())


@dataclass(frozen=True)
class MemoryFigures:
    """What the samples say about memory, and whether the growth stays within the allowance."""

    start: int  # bytes, every process, the first sample after the warm-up
    peak: int
    end: int
    steady_processes: int  # alive through the whole second half
    spawned: int  # processes that appeared during the second half
    slope_per_minute: float  # bytes per minute, steady processes, second half (least squares)
    growth: int  # bytes, steady processes, second half, less each one's one-time step: judged
    main_growth: int  # bytes, the part of it in the main process (emulator, gateway, HTTP server)
    steps: int  # one-time steps discounted (processes whose largest rise was at least STEP_MIB)
    stepped: int  # bytes discounted
    items_added: int  # over the second half
    mails_sent: int  # over the second half
    allowance: float  # bytes

    @property
    def ok(self) -> bool:
        """Whether the growth stays within the allowance."""
        return self.growth <= self.allowance


def allowance_bytes(items_added: int, mails_sent: int) -> float:
    """The growth the second half may show for ``items_added`` and ``mails_sent`` (module docstring)."""
    return (
        FIXED_ALLOWANCE_MIB * MIB
        + max(items_added, 0) * ITEM_ALLOWANCE_KIB * 1024
        + max(mails_sent, 0) * MAIL_ALLOWANCE_KIB * 1024
    )


def stepless_growth(series: Sequence[int], step: int) -> tuple[int, int]:
    """The growth of one process's RSS ``series`` (first to last), less its largest rise between two
    readings when that rise is at least ``step``: a one-time step, not a leak (a worker's first
    argon2 hash keeps 19 MiB mapped, its first request on a route imports that route's modules).
    Returns (growth, the step discounted or 0)."""
    if len(series) < 2:
        return 0, 0
    largest = max(b - a for a, b in itertools.pairwise(series))
    discounted = largest if largest >= step else 0
    return series[-1] - series[0] - discounted, discounted


def memory_figures(samples: Sequence[Sample], warm_up: float, main: int) -> MemoryFigures | None:
    """The figures of ``samples`` (in time order): start after ``warm_up`` seconds, the second half
    from the midpoint of the sampled span; ``main`` is the local API's own pid. None without two
    samples in the second half."""
    if not samples:
        return None
    measured = [s for s in samples if s.at >= warm_up] or list(samples)
    middle = (samples[0].at + samples[-1].at) / 2
    second = [s for s in samples if s.at >= middle]
    if len(second) < 2:
        return None
    steady = set.intersection(*(set(s.rss) for s in second))
    spawned = set.union(*(set(s.rss) for s in second)) - set(second[0].rss)
    points = [(s.at, float(sum(s.rss[pid] for pid in steady))) for s in second]
    per_process = {pid: stepless_growth([s.rss[pid] for s in second], int(STEP_MIB * MIB)) for pid in steady}
    items_added = second[-1].items - second[0].items
    mails_sent = second[-1].mails - second[0].mails
    return MemoryFigures(
        start=measured[0].total,
        peak=max(s.total for s in measured),
        end=samples[-1].total,
        steady_processes=len(steady),
        spawned=len(spawned),
        slope_per_minute=slope(points) * 60,
        growth=sum(growth for growth, _ in per_process.values()),
        main_growth=per_process.get(main, (0, 0))[0],
        steps=sum(1 for _, step in per_process.values() if step),
        stepped=sum(step for _, step in per_process.values()),
        items_added=items_added,
        mails_sent=mails_sent,
        allowance=allowance_bytes(items_added, mails_sent),
    )


def verdict(
    *,
    server_errors: int,
    transport_errors: int,
    accepted_hostile: int,
    soak_errors: int,
    invariant_checks: int,
    violations: int,
    memory: MemoryFigures | None,
) -> list[str]:
    """Why the soak fails, one line per reason (empty when it passes)."""
    reasons: list[str] = []
    if server_errors:
        reasons.append(f"{server_errors} answers with a 5xx status")
    if transport_errors:
        reasons.append(f"{transport_errors} requests without an answer (connection errors, timeouts)")
    if accepted_hostile:
        reasons.append(f"{accepted_hostile} hostile requests answered with a 2xx")
    if soak_errors:
        reasons.append(f"{soak_errors} errors in the soak's own code (a bug here, see above)")
    if invariant_checks == 0:
        reasons.append("no invariant check ran")
    if violations:
        reasons.append(f"{violations} invariant violations")
    if memory is None:
        reasons.append("too few memory samples to judge growth (run longer)")
    elif not memory.ok:
        reasons.append(
            f"memory grew {memory.growth / MIB:.1f} MiB over the second half, "
            f"more than the {memory.allowance / MIB:.1f} MiB allowed"
        )
    return reasons


# ------------------------------------------------------------------------------------- recording


@dataclass
class Reply:
    """An HTTP response, decoded."""

    status: int
    body: Any

    @property
    def code(self) -> str:
        """The body's ``code`` (errors and successes), or ''."""
        return str(self.body.get("code", "")) if isinstance(self.body, dict) else ""


@dataclass
class Failure:
    """A request that failed the soak, as it was sent and answered."""

    kind: str
    what: str
    request: str
    response: str


@dataclass
class KindFigures:
    """Counts and latencies of one kind of request."""

    statuses: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)


class Recorder:
    """Every request's kind, status and latency, and the failures, from every thread."""

    def __init__(self) -> None:
        self.kinds: dict[str, KindFigures] = {}
        self.failures: list[Failure] = []
        self.server_errors = 0
        self.transport_errors = 0
        self.accepted_hostile = 0
        self.soak_errors = 0
        self.aborted: Counter[str] = Counter()
        self.lives = 0
        self._lock = threading.Lock()

    @property
    def requests(self) -> int:
        """Requests answered so far."""
        with self._lock:
            return sum(k.statuses.total() for k in self.kinds.values())

    def record(self, kind: str, status: int, ms: float) -> None:
        """One answered request."""
        with self._lock:
            figures = self.kinds.setdefault(kind, KindFigures())
            figures.statuses[status] += 1
            figures.latencies_ms.append(ms)

    def fail(self, failure: Failure, counter: str) -> None:
        """A failing request (``counter``: which count it adds to)."""
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            if len(self.failures) < 1000:
                self.failures.append(failure)

    def abort(self, reason: str) -> None:
        """A user's life cut short by an answer it could not go on from (not a failure)."""
        with self._lock:
            self.aborted[reason] += 1

    def life_done(self) -> None:
        """One simulated user lived (to the end, or aborted)."""
        with self._lock:
            self.lives += 1


class LifeAbortedError(Exception):
    """An answer the simulated user cannot go on from (a 4xx where a success was needed)."""


def _shorten(data: Any, limit: int = 600) -> str:
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# ------------------------------------------------------------------------------------- the client


class Soak:
    """The API under soak, how to reach it and its emulator, and what is recorded."""

    def __init__(self, state: ServeState, state_file: Path, deadline: float, seed: int) -> None:
        self.state = state
        self.state_file = state_file
        host, port = state["api_url"].removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.deadline = deadline
        self.recorder = Recorder()
        self.stop = threading.Event()  # set when the traffic has ended (samplers stop)
        self.seed = seed
        rng = traffic_random(seed)
        self._addresses = itertools.count(rng.randrange(5_000_000))
        self.think = 0.0  # seconds a user waits before each request, on average
        self._pauses = traffic_random(seed)
        self._retired: set[str] = set()
        self._retired_lock = threading.Lock()
        self.exposed: deque[Exposed] = deque(maxlen=64)  # other users' ids and tokens, for the hostile
        # Every actor reads the outbox through it, and the sampler and the invariant checks too.
        config = Config(max_pool_connections=64, retries={"max_attempts": 2, "mode": "standard"})
        self.dynamodb: Any = boto3.client(
            "dynamodb",
            endpoint_url=state["aws_endpoint_url"],
            region_name=state.get("region", "us-east-1"),
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=config,
        )
        self.ses: Any = boto3.client(
            "ses",
            endpoint_url=state["aws_endpoint_url"],
            region_name=state.get("region", "us-east-1"),
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=config,
        )

    def retire(self, subjects: set[str]) -> None:
        """Nothing will ever come again from these addresses, users and names."""
        with self._retired_lock:
            self._retired |= subjects

    def expire_counters(self) -> int:
        """Delete the rate-limit counters of retired subjects: what DynamoDB's TTL does once their
        windows close, and moto never does. No request of this run can tell the difference (none
        comes from a retired subject again). The number deleted."""
        table = self.state["tables"]["CountersTable"]
        with self._retired_lock:
            retired = set(self._retired)
        keys = [
            {"pk": item["pk"]}
            for page in self.dynamodb.get_paginator("scan").paginate(
                TableName=table, ProjectionExpression="pk"
            )
            for item in page["Items"]
            if item["pk"]["S"].split("#", 2)[-1] in retired
        ]
        for start in range(0, len(keys), 25):
            batch = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
            pending: dict[str, Any] = {table: batch}
            while pending:
                pending = self.dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        return len(keys)

    def running(self) -> bool:
        """Whether the traffic's time is not over yet."""
        return time.monotonic() < self.deadline

    def new_address(self) -> str:
        """A loopback source address no other simulated user of this run has: 127.64.0.1 onwards."""
        n = next(self._addresses)
        block, host = divmod(n, 254)
        return f"127.{64 + block // 256 % 160}.{block % 256}.{host + 1}"

    def call(
        self,
        kind: str,
        method: str,
        path: str,
        body: Any = None,
        *,
        ip: str,
        raw: bytes | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        hostile: bool = False,
    ) -> Reply:
        """One request from ``ip``, after the user's think time, recorded under ``kind``;
        ``hostile``: only a 4xx is right."""
        if self.think > 0:
            time.sleep(self._pauses.uniform(0, 2 * self.think))
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = token
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if payload is not None:
            sent.setdefault("Content-Type", "application/json")
        shown = f"{method} {path} from {ip}{' with a token' if token else ''} body={_shorten(payload or '')}"
        started = time.perf_counter()
        connection = http.client.HTTPConnection(
            self.host, self.port, timeout=REQUEST_TIMEOUT, source_address=(ip, 0)
        )
        try:
            connection.request(method, path, body=payload, headers=sent)
            response = connection.getresponse()
            data = response.read()
            content_type = response.getheader("Content-Type") or ""
        except (OSError, http.client.HTTPException) as error:
            self.recorder.fail(Failure(kind, "no answer", shown, repr(error)), "transport_errors")
            raise LifeAbortedError(f"{kind}: no answer") from error
        finally:
            connection.close()
        ms = (time.perf_counter() - started) * 1000
        try:
            decoded: Any = json.loads(data) if data and content_type.startswith("application/json") else None
        except ValueError:
            decoded = None
        if decoded is None and data:
            decoded = data.decode(errors="replace")
        self.recorder.record(kind, response.status, ms)
        if response.status >= 500:
            answer = f"{response.status} {_shorten(decoded)}"
            self.recorder.fail(Failure(kind, "5xx", shown, answer), "server_errors")
        elif hostile and response.status < 300:
            answer = f"{response.status} {_shorten(decoded)}"
            self.recorder.fail(Failure(kind, "hostile request accepted", shown, answer), "accepted_hostile")
        return Reply(response.status, decoded)

    def outbox_token(self, user_id: str, kind: str, address: str, link: re.Pattern[str]) -> str | None:
        """The token of the newest ``kind`` message to ``address`` about ``user_id`` (read from the
        outbox table, as an operator would: the mailbox of a simulated user)."""
        table = self.state["tables"]["OutboxTable"]
        keys = [
            item
            for page in self.dynamodb.get_paginator("query").paginate(
                TableName=table,
                IndexName="UserIndex",
                KeyConditionExpression="userId = :u",
                ExpressionAttributeValues={":u": {"S": user_id}},
            )
            for item in page["Items"]
        ]
        messages: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request = {table: {"Keys": [{"id": k["id"]} for k in keys[start : start + 100]]}}
            answer = self.dynamodb.batch_get_item(RequestItems=request)
            messages += answer["Responses"].get(table, [])
        found = sorted(
            (m["id"]["S"], m["text"]["S"])
            for m in messages
            if m["kind"]["S"] == kind and m["to"]["S"] == address
        )
        for _, text in reversed(found):
            match = link.search(text)
            if match:
                return match.group(1)
        return None


def expect(reply: Reply, *statuses: int, what: str) -> Reply:
    """``reply`` if its status is one of ``statuses``; else the life cannot go on."""
    if reply.status not in statuses:
        raise LifeAbortedError(f"{what}: {reply.status} {reply.code or _shorten(reply.body, 80)}")
    return reply


@dataclass(frozen=True)
class Exposed:
    """What a hostile user could have learnt of another: ids, and a token that must be dead by now."""

    user_id: str
    session_id: str
    dead_token: str = ""


@dataclass
class Account:
    """A simulated user: what it knows about its own account."""

    name: str
    password: str
    ip: str
    email: str = ""
    token: str = ""
    user_id: str = ""
    session_id: str = ""
    totp: pyotp.TOTP | None = None
    backup_codes: list[str] = field(default_factory=list)
    last_step: int = -1  # the TOTP time step last answered (each is accepted once)
    # What the service keys rate-limit counters by for this user: its addresses, its id, the hash of
    # a name it asked a recovery for. Retired with the account (see Soak.retire).
    subjects: set[str] = field(default_factory=set)

    def answer(self, challenge: Reply, rng: random.Random) -> dict[str, str]:
        """A right answer to ``challenge``: TOTP when its step is unused, else a backup code, else
        TOTP after waiting for the next step."""
        token = str(challenge.body["token"])
        types = set(challenge.body.get("types") or [])
        step = int(time.time() // 30)
        use_totp = self.totp is not None and "totp" in types and step != self.last_step
        if use_totp and (not self.backup_codes or rng.random() < 0.5):
            return self._totp(token, step)
        if self.backup_codes and "backup" in types:
            return {"token": token, "type": "backup", "code": self.backup_codes.pop()}
        if self.totp is None:
            raise LifeAbortedError("challenged without a factor to answer with")
        time.sleep(max(0.0, (step + 1) * 30 - time.time()) + 0.05)
        return self._totp(token, int(time.time() // 30))

    def wrong_code(self) -> str:
        """A six-digit code no time step near now has (so a wrong answer is surely wrong)."""
        assert self.totp is not None
        now = time.time()
        valid = {self.totp.at(now + drift) for drift in (-60, -30, 0, 30, 60)}
        return next(code for code in (f"{n:06d}" for n in range(10)) if code not in valid)

    def _totp(self, token: str, step: int) -> dict[str, str]:
        assert self.totp is not None
        self.last_step = step
        return {"token": token, "type": "totp", "code": self.totp.at(step * 30)}


class Actor:
    """One thread's simulated user (or staff member): the requests it makes."""

    def __init__(self, soak: Soak, rng: random.Random) -> None:
        self.soak = soak
        self.rng = rng

    def run(self) -> None:
        """One life of this actor."""
        raise NotImplementedError

    def address_for(self, account: Account) -> str:
        """A new source address of ``account``'s (another device)."""
        address = self.soak.new_address()
        account.subjects.add(address)
        return address

    def maybe(self, probability: float) -> bool:
        """True with ``probability``, and only while the run lasts (the end skips to the cleanup)."""
        return self.soak.running() and self.rng.random() < probability

    def new_account(self, prefix: str) -> Account:
        """A registered account: its session, id and session id."""
        name = f"{prefix}_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:14]}"
        account = Account(name=name, password=PASSWORD, ip="", email=f"{name}@example.com")
        account.ip = self.address_for(account)
        body = {"username": name, "email": account.email, "password": account.password}
        if self.rng.random() < 0.3:
            body["confirmPassword"] = account.password
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        reply = self.soak.call("POST /register", "POST", "/register", body, ip=account.ip, headers=headers)
        account.token = str(expect(reply, 201, what="register").body["token"])
        me = expect(self.me(account), 200, what="GET /users/me").body
        account.user_id = str(me["id"])
        account.subjects.add(account.user_id)
        current = self.soak.call(
            "GET /users/me/sessions/:sid", "GET", "/users/me/sessions/me", ip=account.ip, token=account.token
        )
        account.session_id = str(expect(current, 200, what="GET /users/me/sessions/me").body["id"])
        return account

    def me(self, account: Account, token: str = "", kind: str = "GET /users/me") -> Reply:
        """GET /users/me (with another token of the account's: a dead one when ``kind`` says so)."""
        hostile = kind.endswith(("revoked token]", "deleted user]", "banned]"))
        return self.soak.call(
            kind, "GET", "/users/me", ip=account.ip, token=token or account.token, hostile=hostile
        )

    def reverified(
        self, account: Account, kind: str, method: str, path: str, body: dict[str, Any], *, ip: str = ""
    ) -> Reply:
        """A Reverify request: with the password, then the challenge's answer when one is asked."""
        ip = ip or account.ip
        first = self.soak.call(
            kind, method, path, {**body, "password": account.password}, ip=ip, token=account.token
        )
        if first.code != CHALLENGE:
            return first
        answer = account.answer(first, self.rng)
        return self.soak.call(
            f"{kind} 2fa", method, path, {**body, "2fa": answer}, ip=ip, token=account.token
        )

    def enrol_totp(self, account: Account) -> None:
        """TOTP enrolled (and its first backup codes kept)."""
        setup = self.reverified(account, "POST /users/me/2fa/totp", "POST", "/users/me/2fa/totp", {})
        body = expect(setup, 200, what="POST /users/me/2fa/totp").body
        totp = pyotp.TOTP(body["secret"])
        step = int(time.time() // 30)
        confirm = {"token": body["token"], "name": "Phone", "code": totp.at(step * 30)}
        confirmed = self.soak.call(
            "POST /users/me/2fa/totp/confirm",
            "POST",
            "/users/me/2fa/totp/confirm",
            confirm,
            ip=account.ip,
            token=account.token,
        )
        codes = expect(confirmed, 201, what="POST /users/me/2fa/totp/confirm").body.get("codes") or []
        account.totp, account.last_step, account.backup_codes = totp, step, list(codes)

    def login(self, account: Account, ip: str, *, wrong_answer: bool = False) -> Reply:
        """POST /login, through the challenge when the account has a second factor."""
        body: dict[str, Any] = {
            "username": self.rng.choice((account.name, account.email)),
            "password": account.password,
        }
        if self.rng.random() < 0.3:
            body["rememberMe"] = True
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        if self.rng.random() < 0.3:
            headers["X-Session-Name"] = "Soak device"
        first = self.soak.call("POST /login", "POST", "/login", body, ip=ip, headers=headers)
        if first.code != CHALLENGE:
            return first
        if wrong_answer:
            wrong = {"token": first.body["token"], "type": "totp", "code": account.wrong_code()}
            self.soak.call(
                "POST /login 2fa [wrong code]", "POST", "/login", {"2fa": wrong}, ip=ip, hostile=True
            )
        answer = {"2fa": account.answer(first, self.rng), "rememberMe": False}
        return self.soak.call("POST /login 2fa", "POST", "/login", answer, ip=ip, headers=headers)


USER_AGENTS = (
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Safari/605.1.15",
    "curl/8.5.0",
    "cumulonimbus-wrapper/5.0.0",
    "",
)


# ------------------------------------------------------------------------------------- a user's life


class UserLife(Actor):
    """One simulated user, from registration to the deletion of its account."""

    def run(self) -> None:
        """Live, then delete the account (always attempted once registered)."""
        account = self.new_account("soak")
        try:
            self.live(account)
        finally:
            try:
                self.delete(account)
            finally:
                self.soak.retire(account.subjects)

    def live(self, account: Account) -> None:
        """Everything but registering and deleting, each part with its probability."""
        soak = self.soak
        for _ in range(self.rng.randint(1, 4)):
            expect(self.me(account), 200, what="GET /users/me")
        domains = expect(
            soak.call("GET /domains", "GET", "/domains", ip=account.ip, token=account.token),
            200,
            what="domains",
        ).body
        if self.maybe(0.6):
            self.hostile(account)
        second = self.log_in_again(account)
        if self.maybe(0.5):
            self.scoped(account)
        if self.maybe(0.4) and domains.get("items"):
            self.choose_domain(account, domains["items"][0])
        if self.maybe(0.5):
            self.change_username(account)
        if self.maybe(0.4):
            self.change_email(account)
        if self.maybe(0.4):
            self.change_password(account, second)
        if self.maybe(0.5):
            self.enrol_totp(account)
            soak.call("GET /users/me/2fa", "GET", "/users/me/2fa", ip=account.ip, token=account.token)
            if self.maybe(0.7):  # another device logs in through the challenge
                device = self.address_for(account)
                login = self.login(account, device, wrong_answer=self.rng.random() < 0.3)
                expect(login, 201, what="challenged login")
        if self.maybe(0.3):
            self.recover(account)
        if self.maybe(0.5):
            query = "?include-self=false" if self.rng.random() < 0.5 else "?includeSelf=0"
            soak.call(
                "DELETE /users/me/sessions/all",
                "DELETE",
                f"/users/me/sessions/all{query}",
                ip=account.ip,
                token=account.token,
            )

    def log_in_again(self, account: Account) -> str:
        """Another login (sometimes after a wrong password or name), then its sessions looked after;
        the second session's token, or '' when there was no login."""
        soak = self.soak
        if self.maybe(0.3):
            body = {"username": account.name, "password": "not the password"}
            soak.call("POST /login [wrong password]", "POST", "/login", body, ip=account.ip, hostile=True)
        if self.maybe(0.1):
            body = {"username": f"nobody_{uuid.uuid4().hex[:10]}", "password": PASSWORD}
            soak.call("POST /login [unknown user]", "POST", "/login", body, ip=account.ip, hostile=True)
        if not self.maybe(0.8):
            return ""
        second = str(expect(self.login(account, account.ip), 201, what="login").body["token"])
        self.sessions(account, second)
        return second

    def choose_domain(self, account: Account, domain: dict[str, Any]) -> None:
        """PUT /users/me/domain (with a subdomain where the domain allows one)."""
        body = {"domain": domain["id"]}
        if domain.get("subdomains"):
            body["subdomain"] = f"My Site {self.rng.randint(1, 999)}"
        self.soak.call(
            "PUT /users/me/domain", "PUT", "/users/me/domain", body, ip=account.ip, token=account.token
        )

    def sessions(self, account: Account, second: str) -> None:
        """List, read, rename and revoke sessions (the second one is revoked half the time)."""
        soak = self.soak
        listed = soak.call(
            "GET /users/me/sessions",
            "GET",
            f"/users/me/sessions?limit={self.rng.choice((10, 50, 'abc'))}",
            ip=account.ip,
            token=account.token,
        )
        items = expect(listed, 200, what="list sessions").body["items"]
        other = next((s["id"] for s in items if s["id"] != account.session_id), None)
        if other is None:
            return
        soak.call(
            "GET /users/me/sessions/:sid",
            "GET",
            f"/users/me/sessions/{other}",
            ip=account.ip,
            token=account.token,
        )
        soak.call(
            "PATCH /users/me/sessions/:sid",
            "PATCH",
            f"/users/me/sessions/{other}",
            {"name": f"Renamed {self.rng.randint(1, 99)}"},
            ip=account.ip,
            token=account.token,
        )
        if self.rng.random() < 0.5:
            if self.rng.random() < 0.5:
                revoke = soak.call(
                    "DELETE /users/me/sessions/:sid",
                    "DELETE",
                    f"/users/me/sessions/{other}",
                    ip=account.ip,
                    token=account.token,
                )
            else:
                revoke = soak.call(
                    "DELETE /users/me/sessions",
                    "DELETE",
                    "/users/me/sessions",
                    {"ids": [other, "01JUNKJUNKJUNKJUNKJUNKJUNK"]},
                    ip=account.ip,
                    token=account.token,
                )
            expect(revoke, 200, what="revoke a session")
            self.me(account, second, "GET /users/me [revoked token]")
            soak.exposed.append(Exposed(account.user_id, other, second))
        else:
            soak.exposed.append(Exposed(account.user_id, other))

    def scoped(self, account: Account) -> None:
        """A scoped session: created, used within and beyond its scopes, revoked."""
        soak = self.soak
        body = {"name": "Soak API key", "permissionFlags": int(Scope.ACCOUNT_READ | Scope.SESSION_READ)}
        if self.rng.random() < 0.5:
            body["longLived"] = True
        created = self.reverified(account, "POST /users/me/sessions", "POST", "/users/me/sessions", body)
        scoped = expect(created, 201, what="scoped session").body
        key = str(scoped["token"])
        self.me(account, key, "GET /users/me [scoped]")
        soak.call("GET /users/me/sessions [scoped]", "GET", "/users/me/sessions", ip=account.ip, token=key)
        forbidden = (
            (
                "PUT /users/me/username [scoped]",
                "PUT",
                "/users/me/username",
                {"username": "x", "password": PASSWORD},
            ),
            ("DELETE /users/me [scoped]", "DELETE", "/users/me", {"password": PASSWORD}),
            (
                "POST /users/me/sessions [scoped]",
                "POST",
                "/users/me/sessions",
                {"name": "x", "permissionFlags": int(Scope.ACCOUNT_READ)},
            ),
            ("POST /users/me/2fa/totp [scoped]", "POST", "/users/me/2fa/totp", {"password": PASSWORD}),
        )
        kind, method, path, payload = self.rng.choice(forbidden)
        soak.call(kind, method, path, payload, ip=account.ip, token=key, hostile=True)
        if self.rng.random() < 0.3:
            staff_bits = {
                "name": "Sneaky",
                "permissionFlags": int(Scope.STAFF_READ_ACCOUNTS),
                "password": account.password,
            }
            soak.call(
                "POST /users/me/sessions [staff scope]",
                "POST",
                "/users/me/sessions",
                staff_bits,
                ip=account.ip,
                token=account.token,
                hostile=True,
            )
        revoked = soak.call(
            "DELETE /users/me/sessions/:sid",
            "DELETE",
            f"/users/me/sessions/{scoped['id']}",
            ip=account.ip,
            token=account.token,
        )
        expect(revoked, 200, what="revoke the scoped session")
        soak.call("GET /users/me [revoked token]", "GET", "/users/me", ip=account.ip, token=key, hostile=True)

    def change_username(self, account: Account) -> None:
        """PUT /users/me/username."""
        name = f"soak_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:14]}"
        body = {"username": name.upper() if self.rng.random() < 0.3 else name}
        reply = self.reverified(account, "PUT /users/me/username", "PUT", "/users/me/username", body)
        if reply.status == 200:
            account.name = str(reply.body["username"])

    def change_email(self, account: Account) -> None:
        """PUT /users/me/email, then the verification email resent and its link followed."""
        soak = self.soak
        address = f"{uuid.UUID(int=self.rng.getrandbits(128)).hex[:12]}@example.org"
        reply = self.reverified(account, "PUT /users/me/email", "PUT", "/users/me/email", {"email": address})
        if reply.status != 200:
            return
        account.email = address
        if self.rng.random() < 0.5:
            soak.call("GET /users/me/verify", "GET", "/users/me/verify", ip=account.ip, token=account.token)
        token = soak.outbox_token(account.user_id, "verify-email", address, VERIFY_LINK)
        if token is not None:
            soak.call("PUT /users/verify", "PUT", "/users/verify", {"token": token}, ip=account.ip)
            soak.call(
                "PUT /users/verify [used token]",
                "PUT",
                "/users/verify",
                {"token": token},
                ip=account.ip,
                hostile=True,
            )

    def change_password(self, account: Account, second: str) -> None:
        """PUT /users/me/password (sometimes mistyped first): other sessions die."""
        new = f"{PASSWORD} {self.rng.randint(1000, 9999)}"
        if self.rng.random() < 0.3:
            mismatch = {"newPassword": new, "confirmNewPassword": new + "!", "password": account.password}
            self.soak.call(
                "PUT /users/me/password [mismatch]",
                "PUT",
                "/users/me/password",
                mismatch,
                ip=account.ip,
                token=account.token,
                hostile=True,
            )
        body = {"newPassword": new, "confirmNewPassword": new}
        reply = self.reverified(account, "PUT /users/me/password", "PUT", "/users/me/password", body)
        if reply.status == 200:
            account.password = new
            if second:
                self.me(account, second, "GET /users/me [revoked token]")

    def recover(self, account: Account) -> None:
        """Forgot the password: the mailed link, a new password (through the challenge with a second
        factor), every session revoked, and a login with the new password."""
        soak = self.soak
        device = self.address_for(account)
        account.subjects.add(hash_secret(account.name.casefold()))
        asked = soak.call(
            "POST /users/recover", "POST", "/users/recover", {"username": account.name}, ip=device
        )
        expect(asked, 201, what="recovery request")
        token = soak.outbox_token(account.user_id, "recover-password", account.email, RECOVER_LINK)
        if token is None:
            raise LifeAbortedError("no recovery email in the outbox")
        new = f"{PASSWORD} recovered {self.rng.randint(1000, 9999)}"
        body: dict[str, Any] = {"token": token, "newPassword": new, "confirmNewPassword": new}
        reset = soak.call("PUT /users/recover", "PUT", "/users/recover", body, ip=device)
        if reset.code == CHALLENGE:
            body["2fa"] = account.answer(reset, self.rng)
            reset = soak.call("PUT /users/recover 2fa", "PUT", "/users/recover", body, ip=device)
        expect(reset, 200, what="password reset")
        account.password = new
        self.me(account, kind="GET /users/me [revoked token]")
        login = expect(self.login(account, device), 201, what="login after recovery")
        account.token, account.ip = str(login.body["token"]), device
        current = soak.call(
            "GET /users/me/sessions/:sid", "GET", "/users/me/sessions/me", ip=account.ip, token=account.token
        )
        account.session_id = str(expect(current, 200, what="current session").body["id"])

    def delete(self, account: Account) -> None:
        """DELETE /users/me; the token dies with the account."""
        reply = self.reverified(account, "DELETE /users/me", "DELETE", "/users/me", {})
        expect(reply, 200, what="delete the account")
        self.me(account, kind="GET /users/me [deleted user]")
        self.soak.exposed.append(Exposed(account.user_id, account.session_id, account.token))

    def hostile(self, account: Account) -> None:
        """A few requests an attacker (or a broken client) sends, each of which must get a 4xx."""
        ip, token = account.ip, account.token

        def probe(kind: str, method: str, path: str, body: Any = None, **extra: Any) -> Callable[[], Reply]:
            return lambda: self.soak.call(kind, method, path, body, ip=ip, hostile=True, **extra)

        nested = b'{"username": ' + b"[" * 5000 + b"]" * 5000 + b', "password": "x"}'
        huge = json.dumps({"username": "x", "email": "x@example.com", "password": "x" * BODY_LIMIT}).encode()
        forged = f"{account.user_id}.{account.session_id}.{'A' * 43}"
        probes = [
            probe("POST /login [bad JSON]", "POST", "/login", raw=b'{"username": "a", '),
            probe("POST /login [nested 5000 deep]", "POST", "/login", raw=nested),
            probe("POST /login [not UTF-8]", "POST", "/login", raw=b'{"username": "\xff\xfe"}'),
            probe("POST /login [NaN]", "POST", "/login", raw=b'{"username": NaN, "password": 1}'),
            probe(
                "POST /login [duplicate keys]", "POST", "/login", raw=b'{"username": "a", "username": "b"}'
            ),
            probe("POST /register [over 64 KiB]", "POST", "/register", raw=huge),
            probe(
                "PUT /users/me/username [wrong types]",
                "PUT",
                "/users/me/username",
                {"username": 5, "password": ["x"]},
                token=token,
            ),
            probe(
                "PATCH /users/me/sessions/:sid [not an object]",
                "PATCH",
                "/users/me/sessions/me",
                raw=b"[1, 2, 3]",
                token=token,
            ),
            probe(
                "DELETE /users/me/sessions [51 ids]",
                "DELETE",
                "/users/me/sessions",
                {"ids": ["x"] * 51},
                token=token,
            ),
            probe("GET /users/me [forged token]", "GET", "/users/me", token=forged),
            probe("GET /users/me [garbage token]", "GET", "/users/me", token="Bearer ../../etc/passwd"),
            probe("GET /nowhere [unknown route]", "GET", f"/nowhere/{uuid.uuid4().hex}"),
            probe("PATCH /register [wrong method]", "PATCH", "/register", {}),
            probe("GET /users [not staff]", "GET", "/users?limit=5", token=token),
        ]
        exposed = list(self.soak.exposed)
        if exposed:
            them = self.rng.choice(exposed)
            theirs = f"/users/me/sessions/{them.session_id}"
            probes += [
                probe("GET /users/me/sessions/:sid [another's]", "GET", theirs, token=token),
                probe(
                    "PATCH /users/me/sessions/:sid [another's]",
                    "PATCH",
                    theirs,
                    {"name": "mine"},
                    token=token,
                ),
                probe("DELETE /users/me/sessions/:sid [another's]", "DELETE", theirs, token=token),
                probe("GET /users/:id [not staff]", "GET", f"/users/{them.user_id}", token=token),
                probe(
                    "GET /users/me [another's ids, own secret]",
                    "GET",
                    "/users/me",
                    token=f"{them.user_id}.{them.session_id}.{token.rsplit('.', 1)[-1]}",
                ),
            ]
            dead = [e for e in exposed if e.dead_token]
            if dead:
                probes.append(
                    probe(
                        "GET /users/me [dead token]",
                        "GET",
                        "/users/me",
                        token=self.rng.choice(dead).dead_token,
                    )
                )
        for send in self.rng.sample(probes, k=min(len(probes), self.rng.randint(2, 5))):
            send()


# ------------------------------------------------------------------------------------- staff


class StaffMember(Actor):
    """A staff member with TOTP, looking after victims it registers: read, renamed, banned, deleted."""

    def __init__(self, soak: Soak, rng: random.Random) -> None:
        super().__init__(soak, rng)
        self.account = Account(name="", password=PASSWORD, ip="")
        self.domain = ""

    def setup(self) -> None:
        """Register, enrol TOTP, be promoted with the operator tool (``nimbus staff promote``)."""
        account = self.new_account("staff")
        self.enrol_totp(account)
        command = [sys.executable, "-m", "nimbus_tools.cli.main", "--state", str(self.soak.state_file)]
        promoted = subprocess.run(
            [*command, "staff", "promote", account.name],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if promoted.returncode != 0:
            raise RuntimeError(f"nimbus staff promote failed: {promoted.stdout}{promoted.stderr}")
        me = expect(self.me(account), 200, what="GET /users/me").body
        if me.get("staff") is not True:
            raise RuntimeError(f"the promoted user is not staff: {me}")
        domains = self.soak.call("GET /domains", "GET", "/domains", ip=account.ip, token=account.token).body
        self.domain = str(domains["items"][0]["id"]) if domains.get("items") else ""
        self.account = account

    def run(self) -> None:
        """One victim, from registration to deletion."""
        soak, staff = self.soak, self.account
        victim = self.new_account("victim")
        deleted = False
        try:
            users = f"/users/{victim.user_id}"
            calls = (
                ("GET /users", "GET", f"/users?limit={self.rng.choice((5, 20, 50))}", None),
                ("GET /users/:id", "GET", users, None),
                ("GET /users/:uid/sessions", "GET", f"{users}/sessions", None),
                ("GET /users/:uid/2fa", "GET", f"{users}/2fa", None),
            )
            for kind, method, path, body in calls:
                expect(soak.call(kind, method, path, body, ip=staff.ip, token=staff.token), 200, what=kind)
            soak.call(
                "PATCH /users/:uid/sessions/:sid",
                "PATCH",
                f"{users}/sessions/{victim.session_id}",
                {"name": "Renamed by staff"},
                ip=staff.ip,
                token=staff.token,
            )
            if self.domain and self.rng.random() < 0.5:
                body = {"domain": self.domain}
                soak.call(
                    "PUT /users/:id/domain", "PUT", f"{users}/domain", body, ip=staff.ip, token=staff.token
                )
            if self.rng.random() < 0.3:
                soak.call(
                    "GET /users/:id [unknown]",
                    "GET",
                    f"/users/{uuid.uuid4().hex}",
                    ip=staff.ip,
                    token=staff.token,
                )
            if self.rng.random() < 0.6:
                ban = self.reverified(
                    staff, "PUT /users/:id/ban", "PUT", f"{users}/ban", {"reason": "Soak test"}
                )
                expect(ban, 200, what="ban")
                self.me(victim, kind="GET /users/me [banned]")
                body = {"username": victim.name, "password": victim.password}
                self.soak.call("POST /login [banned]", "POST", "/login", body, ip=victim.ip, hostile=True)
                if self.rng.random() < 0.5:
                    unban = self.reverified(staff, "DELETE /users/:id/ban", "DELETE", f"{users}/ban", {})
                    expect(unban, 200, what="unban")
            gone = self.reverified(staff, "DELETE /users/:id", "DELETE", users, {})
            expect(gone, 200, what="delete a user")
            deleted = True
            soak.call("GET /users/:id [deleted]", "GET", users, ip=staff.ip, token=staff.token, hostile=True)
            if len(staff.backup_codes) <= 1:
                fresh = self.reverified(
                    staff, "POST /users/me/2fa/backup", "POST", "/users/me/2fa/backup", {}
                )
                staff.backup_codes = list(expect(fresh, 201, what="new backup codes").body["codes"])
        finally:
            if not deleted:  # the victim's data must not stay behind (memory is judged)
                self.reverified(staff, "DELETE /users/:id", "DELETE", f"/users/{victim.user_id}", {})
            soak.retire(victim.subjects)


# ------------------------------------------------------------------------------------- measuring


def process_tree_rss(root: int) -> dict[int, int]:
    """RSS bytes of ``root`` and every descendant (read from /proc; a process that exits while it is
    read is left out)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    family, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in family]
        family.update(children)
        frontier += children
    rss: dict[int, int] = {}
    for pid in family:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[pid] = int(line.split()[1]) * 1024
    return rss


def table_items(soak: Soak) -> dict[str, int]:
    """Items per table of the stack (DescribeTable; moto counts them live)."""
    return {
        logical: int(soak.dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0))
        for logical, table in soak.state["tables"].items()
    }


def mails_sent(soak: Soak) -> int:
    """Emails SES accepted since the emulator started (moto keeps every one)."""
    return int(soak.ses.get_send_quota()["SentLast24Hours"])


def invariant_violations(soak: Soak) -> list[str]:
    """What tests/invariants.py finds broken in the stack's tables (users, sessions, tokens, outbox)."""
    return stack_violations(soak.dynamodb, soak.state["tables"])


@dataclass
class Checks:
    """Invariant checks run, and the violations they found."""

    name: str = "tests/invariants.py stack_violations"
    runs: int = 0
    violations: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def check(self, soak: Soak, *, settled: bool) -> None:
        """One check. Its Scans are no snapshot, so while traffic runs one can read a table before a
        transaction and the next after it: a finding then counts only if a second check at once finds
        it too (a real one persists). ``settled``: no traffic runs, every finding counts."""
        started = time.perf_counter()
        found = invariant_violations(soak)
        if found and not settled:
            again = set(invariant_violations(soak))
            found = [f for f in found if f in again]
        self.seconds.append(time.perf_counter() - started)
        self.runs += 1
        self.violations += found


class Sampler:
    """Memory, items and mail every few seconds; invariants every ``invariant_seconds``."""

    def __init__(
        self,
        soak: Soak,
        pid: int,
        *,
        started: float,
        every: float,
        invariant_every: float,
        tidy: Callable[[], None],
    ) -> None:
        self.soak, self.pid, self.started = soak, pid, started
        self.every, self.invariant_every, self.tidy = every, invariant_every, tidy
        self.samples: list[Sample] = []
        self.checks = Checks()
        self.expired = 0  # rate-limit counters of retired subjects deleted
        self.errors: list[str] = []

    def read(self) -> Sample:
        """One reading (the emulator's captured mail is cleared first: the traffic reads tokens
        from the outbox table, and the capture would otherwise grow without bound)."""
        try:
            clear_mail(self.soak.state["aws_endpoint_url"])
        except ControlError as error:
            self.errors.append(f"clearing the captured mail: {error}")
        self.tidy()
        return Sample(
            at=time.monotonic() - self.started,
            rss=process_tree_rss(self.pid),
            items=sum(table_items(self.soak).values()),
            mails=mails_sent(self.soak),
        )

    def sample(self) -> Sample:
        """One reading, kept among the judged samples."""
        reading = self.read()
        self.samples.append(reading)
        return reading

    def settle(self) -> tuple[Sample, float]:
        """After the traffic, the stream-fed functions catch up (mail sent, deleted users' sessions
        and mail swept): a reading once items and mail stop changing between two readings (at most
        :data:`SETTLE_SECONDS`), and the seconds that took."""
        started = time.monotonic()
        self.expired += self.soak.expire_counters()
        last = self.read()
        while time.monotonic() - started < SETTLE_SECONDS:
            time.sleep(self.every)
            now = self.read()
            if (now.items, now.mails) == (last.items, last.mails):
                return now, time.monotonic() - started
            last = now
        return last, time.monotonic() - started

    def run(self) -> None:
        """Until the traffic has stopped."""
        next_check = self.started + self.invariant_every
        next_progress = self.started + PROGRESS_SECONDS
        next_expiry = self.started + EXPIRY_SECONDS
        while not self.soak.stop.wait(
            max(0.0, self.started + len(self.samples) * self.every - time.monotonic())
        ):
            try:
                reading = self.sample()
                now = time.monotonic()
                if now >= next_expiry:
                    self.expired += self.soak.expire_counters()
                    next_expiry = now + EXPIRY_SECONDS
                if now >= next_check:
                    self.checks.check(self.soak, settled=False)
                    next_check = now + self.invariant_every
                if now >= next_progress:
                    next_progress = now + PROGRESS_SECONDS
                    recorder = self.soak.recorder
                    main = reading.rss.get(self.pid, 0) / MIB
                    print(
                        f"  {reading.at:5.0f} s {recorder.requests:7d} requests  {recorder.server_errors} 5xx"
                        f"  RSS {reading.total / MIB:6.1f} MiB (main {main:5.1f})"
                        f"  {reading.items} items  {reading.mails} emails",
                        flush=True,
                    )
            except Exception:
                self.errors.append(traceback.format_exc())
                self.soak.recorder.soak_errors += 1


# ------------------------------------------------------------------------------------- running


def run_actor(soak: Soak, make: Callable[[], Actor]) -> None:
    """Lives of one actor until the run's time is over; each life ends with its cleanup."""
    actor = make()
    while soak.running():
        try:
            actor.run()
        except LifeAbortedError as error:
            soak.recorder.abort(str(error))
        except Exception:
            soak.recorder.fail(Failure("soak", "soak error", "", traceback.format_exc()), "soak_errors")
        soak.recorder.life_done()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=(
            "Minutes of mixed traffic (users, staff, hostile input) against the local API: fails on any "
            "5xx, on memory growth beyond the allowance, or on a broken invariant."
        ),
    )
    parser.add_argument(
        "--minutes", type=float, default=DEFAULT_MINUTES, help=f"traffic time (default {DEFAULT_MINUTES:g})"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=DEFAULT_CLIENTS,
        help=f"concurrent users (default {DEFAULT_CLIENTS}), plus one staff member",
    )
    parser.add_argument(
        "--state",
        type=Path,
        help="attach to the local API that wrote this serve.json (`make serve`: .local/serve.json)",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=THINK_MS,
        help=f"a user's average pause before each request (default {THINK_MS:g} ms)",
    )
    parser.add_argument("--seed", type=int, help="random seed of the traffic (default: a new one, printed)")
    parser.add_argument("--sample-seconds", type=float, default=SAMPLE_SECONDS, help="memory sampling period")
    parser.add_argument(
        "--invariant-seconds",
        type=float,
        default=INVARIANT_SECONDS,
        help="invariant check period while traffic runs",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_FRACTION,
        help="fraction of the run before the start figure (default 0.25)",
    )
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.clients < 1 or args.sample_seconds <= 0 or args.invariant_seconds <= 0:
        parser.error("--minutes, --clients, --sample-seconds and --invariant-seconds must be positive")
    if not 0 <= args.warm_up < 0.5:
        parser.error("--warm-up must be in [0, 0.5): the second half is judged")
    return args


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def format_kinds(recorder: Recorder) -> str:
    """Per kind of request: count, statuses, latency percentiles."""
    rows = []
    for kind in sorted(recorder.kinds, key=lambda k: (k.split(" ", 1)[1].split(" [")[0], k)):
        figures = recorder.kinds[kind]
        statuses = " ".join(f"{status}x{count}" for status, count in sorted(figures.statuses.items()))
        latencies = figures.latencies_ms
        rows.append(
            [
                kind,
                str(figures.statuses.total()),
                statuses,
                *(_ms(percentile(latencies, q)) for q in (50, 95, 99)),
            ]
        )
    headers = ["request", "count", "statuses", "p50 ms", "p95 ms", "p99 ms"]
    return render(headers, rows, right=frozenset({1, 3, 4, 5}))


def format_memory(memory: MemoryFigures | None, samples: Sequence[Sample]) -> str:
    """The memory figures, in MiB."""
    if memory is None:
        return "  too few samples"
    first, last = samples[0], samples[-1]
    workers = memory.growth - memory.main_growth
    lines = [
        f"  RSS of the local API and its {len(last.rss) - 1} child processes: start {memory.start / MIB:.1f}"
        f" MiB (after the warm-up), peak {memory.peak / MIB:.1f} MiB, end {memory.end / MIB:.1f} MiB",
        f"  second half, the {memory.steady_processes} processes alive throughout ({memory.spawned} spawned"
        f" meanwhile, not counted): slope {memory.slope_per_minute / MIB:+.2f} MiB/min;",
        f"    growth {memory.growth / MIB:+.2f} MiB ({memory.main_growth / MIB:+.2f} in the main process:"
        f" emulator, gateway; {workers / MIB:+.2f} in the workers), less {memory.steps} one-time"
        f" steps of {memory.stepped / MIB:.1f} MiB in all",
        f"  data: {first.items} items at the first sample, {last.items} at the end"
        f" ({memory.items_added:+d} in the second half); {last.mails - first.mails} emails sent"
        f" ({memory.mails_sent} in the second half)",
        f"  allowance: {FIXED_ALLOWANCE_MIB:g} MiB + {ITEM_ALLOWANCE_KIB:g} KiB/item + {MAIL_ALLOWANCE_KIB:g}"
        f" KiB/email = {memory.allowance / MIB:.1f} MiB: {'OK' if memory.ok else 'EXCEEDED'}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; 0 when every check passes, 1 otherwise (2: nothing to attach to)."""
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    api: LocalApiProcess | None = None
    state_dir: Path | None = None
    if args.state is not None:
        state = read_state(args.state)
        if state is None or not process_alive(state["pid"]):
            print(f"no running local API wrote {args.state}: is `make serve` running?", file=sys.stderr)
            return 2
        state_file = args.state
        print(f"Attached to the local API on {state['api_url']} (pid {state['pid']})", flush=True)
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="nimbus-soak-"))
        print("Starting the local API...", flush=True)
        api = start_local_api(state_dir=state_dir, timeout=120)
        state, state_file = api.state, state_dir / "serve.json"
        print(
            f"Local API on {state['api_url']} (pid {state['pid']}, logs in {state_dir / 'logs'})", flush=True
        )
    reasons = ["the soak did not finish"]
    try:
        reasons = run_soak(args, seed, state, state_file, api)
    finally:
        if api is not None:
            print("Stopping the local API...", flush=True)
            stopped = api.stop(timeout=STOP_SECONDS)
            if stopped != 0:
                reasons.append(f"the local API did not stop cleanly on Ctrl-C (exit status {stopped})")
                print("\n".join(api.stdout[-10:] + api.stderr[-20:]))
    print()
    print("PASS" if not reasons else "FAIL:\n" + "\n".join(f"  {r}" for r in reasons), flush=True)
    if state_dir is not None:
        if reasons:
            print(f"The local API's function logs are kept in {state_dir / 'logs'}")
        else:
            shutil.rmtree(state_dir, ignore_errors=True)
    return 1 if reasons else 0


def run_soak(
    args: argparse.Namespace, seed: int, state: ServeState, state_file: Path, api: LocalApiProcess | None
) -> list[str]:
    """The traffic, the samples, the report; the reasons the soak fails."""
    soak = Soak(state, state_file, deadline=math.inf, seed=seed)
    soak.think = args.think_ms / 1000

    def tidy() -> None:
        if api is not None:  # the launcher keeps every line the server prints: only the first are needed
            del api.stdout[100:]

    staff = StaffMember(soak, traffic_random(seed - 1))
    staff.setup()
    print(f"Soak: {args.minutes:g} min, {args.clients} users at a time and one staff member, seed {seed}")
    started = time.monotonic()
    soak.deadline = started + args.minutes * 60
    sampler = Sampler(
        soak,
        state["pid"],
        started=started,
        every=args.sample_seconds,
        invariant_every=args.invariant_seconds,
        tidy=tidy,
    )
    actors = [
        threading.Thread(
            target=run_actor,
            args=(soak, lambda i=i: UserLife(soak, traffic_random(seed + i))),
            name=f"user-{i}",
            daemon=True,  # Ctrl-C must not wait for them
        )
        for i in range(args.clients)
    ]
    actors.append(threading.Thread(target=run_actor, args=(soak, lambda: staff), name="staff", daemon=True))
    watcher = threading.Thread(target=sampler.run, name="sampler", daemon=True)
    watcher.start()
    for thread in actors:
        thread.start()
    try:
        for thread in actors:
            thread.join()
    except KeyboardInterrupt:  # Ctrl-C: every user skips to its cleanup, nothing more is judged
        soak.deadline = -math.inf
        soak.stop.set()
        raise
    elapsed = time.monotonic() - started
    soak.stop.set()
    watcher.join()
    sampler.sample()  # the traffic has stopped: every life has deleted its account
    settled, settling = sampler.settle()
    sampler.checks.check(soak, settled=True)
    memory = memory_figures(sampler.samples, args.warm_up * args.minutes * 60, state["pid"])
    report(soak, sampler, memory, elapsed, args)
    left = ", ".join(f"{table} {count}" for table, count in table_items(soak).items() if count)
    print(
        f"  after the traffic, {settling:.0f} s for mail and sweeps to catch up: RSS"
        f" {settled.total / MIB:.1f} MiB, {settled.mails} emails sent in all, items left: {left or 'none'}"
    )
    print(f"  rate-limit counters of finished users deleted (moto has no TTL): {sampler.expired}")
    print()
    print_invariants(sampler)
    return verdict(
        server_errors=soak.recorder.server_errors,
        transport_errors=soak.recorder.transport_errors,
        accepted_hostile=soak.recorder.accepted_hostile,
        soak_errors=soak.recorder.soak_errors,
        invariant_checks=sampler.checks.runs,
        violations=len(sampler.checks.violations),
        memory=memory,
    )


def report(
    soak: Soak, sampler: Sampler, memory: MemoryFigures | None, elapsed: float, args: argparse.Namespace
) -> None:
    """Print the figures."""
    recorder = soak.recorder
    requests = recorder.requests
    print()
    print(
        f"{requests} requests in {elapsed:.1f} s ({requests / elapsed:.1f} req/s) from {recorder.lives}"
        f" simulated users ({sum(recorder.aborted.values())} cut short), {args.clients} at a time,"
        " and one staff member"
    )
    print("A 401 on a kind that has a '2fa' row is mostly the second-factor challenge that row answers.")
    print()
    print(format_kinds(recorder))
    print()
    print(
        f"5xx answers: {recorder.server_errors}; no answer: {recorder.transport_errors}; "
        f"hostile requests accepted: {recorder.accepted_hostile}"
    )
    for failure in recorder.failures[:SHOWN_FAILURES]:
        print(f"  {failure.what}: {failure.kind}")
        print(f"    request:  {failure.request}")
        print(f"    response: {failure.response}")
    if len(recorder.failures) > SHOWN_FAILURES:
        print(f"  ... and {len(recorder.failures) - SHOWN_FAILURES} more")
    if recorder.aborted:
        print("Lives cut short (a 4xx where the user needed a success; counted, not failed):")
        for reason, count in recorder.aborted.most_common(10):
            print(f"  {count} x {reason}")
    print()
    print("Memory")
    print(format_memory(memory, sampler.samples))
    print(f"  ({len(sampler.samples)} samples while the traffic ran, every {args.sample_seconds:g} s)")


def print_invariants(sampler: Sampler) -> None:
    """The invariant checks and what they found."""
    checks = sampler.checks
    print(
        f"Invariants ({checks.name}): {checks.runs} checks,"
        f" the longest {max(checks.seconds, default=0):.2f} s;"
        f" {len(checks.violations)} violations"
    )
    for violation in checks.violations[:SHOWN_FAILURES]:
        print(f"  {violation}")
    for error in sampler.errors[:5]:
        print(f"Sampler error: {error}")


if __name__ == "__main__":
    sys.exit(main())
