"""The API under soak and how to reach it: requests from per-user source addresses, timed and
recorded; the emulator's DynamoDB and SES behind it."""

from __future__ import annotations

import http.client
import itertools
import json
import random
import re
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.soak.accounts import Exposed
from bench.soak.recorder import Failure, LifeAbortedError, Recorder, Reply, shorten
from nimbus_tools.local.state import ServeState

REQUEST_TIMEOUT = 60.0
MAIL_WAIT_SECONDS = 10.0  # how long a mail queued after the answer may take to appear


def traffic_random(seed: int) -> random.Random:
    """The random choices of one actor's traffic (reproducible with --seed; nothing secret)."""
    return random.Random(seed)  # noqa: S311


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
        shown = f"{method} {path} from {ip}{' with a token' if token else ''} body={shorten(payload or '')}"
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
            answer = f"{response.status} {shorten(decoded)}"
            self.recorder.fail(Failure(kind, "5xx", shown, answer), "server_errors")
        elif hostile and response.status < 300:
            answer = f"{response.status} {shorten(decoded)}"
            self.recorder.fail(Failure(kind, "hostile request accepted", shown, answer), "accepted_hostile")
        return Reply(response.status, decoded)

    def await_outbox_token(
        self,
        user_id: str,
        kind: str,
        address: str,
        link: re.Pattern[str],
        *,
        other_than: str | None,
        timeout: float = MAIL_WAIT_SECONDS,
    ) -> str | None:
        """The newest token :meth:`outbox_token` finds, once it is not ``other_than`` (mail queued
        after the answer, by a stream-fed function); after ``timeout``, whatever is newest (a mail
        withheld by its limit leaves the one before)."""
        deadline = time.monotonic() + timeout
        while True:
            token = self.outbox_token(user_id, kind, address, link)
            if (token is not None and token != other_than) or time.monotonic() > deadline:
                return token
            time.sleep(0.1)

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
