"""The client of the Nimbus HTTP API that the end-to-end tests (tests/e2e) and the soak (bench/soak)
share: requests from a chosen loopback source address, the account steps every test and simulated
user takes (register, log in, enrol TOTP), an authenticator app's codes, the tokens of mailed links
as the outbox table holds them, the emulator's AWS clients and the operator tool.

Every loopback address 127.x.y.z reaches a local server, and the local API takes the client IP from
the socket (never from a header), so a caller is "another client" simply by binding another address:
that is how the per-IP rate limits of CONTRACT section 10 are kept apart between tests and users.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pyotp
from botocore.config import Config

from nimbus_core.adapters.items import from_item

PASSWORD = "correct horse"
TOTP_PERIOD = 30
LINK_TOKEN = re.compile(r"\?token=([A-Za-z0-9_.-]+)")


@dataclass
class Reply:
    """An HTTP response, decoded (JSON when it says so, else text)."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def code(self) -> str:
        """The body's ``code`` (errors and successes), or ''."""
        return str(self.body.get("code", "")) if isinstance(self.body, dict) else ""


class UnexpectedReplyError(AssertionError):
    """An answer the caller cannot go on from (a 4xx where a success was needed, or none at all)."""


def expect(reply: Reply, *statuses: int, what: str) -> Reply:
    """``reply`` if its status is one of ``statuses``; else :class:`UnexpectedReplyError`."""
    if reply.status not in statuses:
        raise UnexpectedReplyError(f"{what}: {reply.status} {reply.code or shorten(reply.body, 80)}")
    return reply


def shorten(data: Any, limit: int = 600) -> str:
    """``data`` as text for a report, cut at ``limit`` characters."""
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def loopback(n: int, first: int = 0) -> str:
    """The ``n``-th loopback address from 127.<first>.0.1 on (160 second octets, then round again)."""
    block, host = divmod(n, 254)
    return f"127.{first + block // 256 % 160}.{block % 256}.{host + 1}"


_addresses = itertools.count(2)


def new_ip() -> str:
    """A loopback address no other caller of this process has used (127.0.0.3 onwards)."""
    return loopback(next(_addresses))


def new_name(prefix: str = "u") -> str:
    """A username no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class ApiClient:
    """A minimal HTTP client of the API that chooses its source address."""

    def __init__(self, api_url: str, *, timeout: float = 30.0) -> None:
        host, port = api_url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port, self.timeout = host, int(port), timeout

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        ip: str = "127.0.0.1",
    ) -> Reply:
        """One request from ``ip``: ``body`` as JSON (or ``raw`` bytes as they are), ``token`` as the
        Authorization header. A transport failure raises (OSError, http.client.HTTPException)."""
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = token
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if payload is not None:
            sent.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection(
            self.host, self.port, timeout=self.timeout, source_address=(ip, 0)
        )
        try:
            connection.request(method, path, body=payload, headers=sent)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        decoded: Any = data.decode(errors="replace") if data else None
        if data and (response.getheader("Content-Type") or "").startswith("application/json"):
            with contextlib.suppress(ValueError):  # a broken body is shown as text
                decoded = json.loads(data)
        return Reply(response.status, decoded, dict(response.getheaders()))

    def register(
        self, username: str, *, ip: str | None = None, password: str = PASSWORD, **extra: Any
    ) -> Reply:
        """POST /register with ``username@example.com`` (``extra``: more body fields, or ``headers``)."""
        headers = extra.pop("headers", None)
        body = {"username": username, "email": f"{username}@example.com", "password": password, **extra}
        return self.call("POST", "/register", body, ip=ip or new_ip(), headers=headers)

    def login(self, username: str, password: str = PASSWORD, *, ip: str | None = None, **extra: Any) -> Reply:
        """POST /login (``extra``: more body fields, or ``headers``)."""
        headers = extra.pop("headers", None)
        body = {"username": username, "password": password, **extra}
        return self.call("POST", "/login", body, ip=ip or new_ip(), headers=headers)

    def enrol_totp(
        self, token: str, password: str = PASSWORD, *, ip: str | None = None
    ) -> tuple[Authenticator, list[str]]:
        """TOTP set up and confirmed for ``token``'s account (no factor yet, so no challenge): the
        authenticator (the current step used up by the confirmation) and the first backup codes."""
        ip = ip or new_ip()
        setup = self.call("POST", "/users/me/2fa/totp", {"password": password}, token=token, ip=ip)
        secret = expect(setup, 200, what="POST /users/me/2fa/totp").body
        authenticator = Authenticator(secret["secret"])
        confirm = {"token": secret["token"], "name": "Phone", "code": authenticator.code()}
        done = self.call("POST", "/users/me/2fa/totp/confirm", confirm, token=token, ip=ip)
        return authenticator, list(expect(done, 201, what="POST /users/me/2fa/totp/confirm").body["codes"])


class Authenticator:
    """An authenticator app for one TOTP secret that never repeats a time step.

    Nimbus accepts each TOTP time step once per factor and one step of drift either way, so a caller
    that needs several codes takes the next unused step: the current one, then the next (valid now
    by the drift), and only a third code within one period waits for the clock.
    """

    def __init__(self, secret: str) -> None:
        self.totp = pyotp.TOTP(secret, digits=6, interval=TOTP_PERIOD)
        self.last_step = -1

    def ready(self) -> bool:
        """Whether :meth:`code` can answer without waiting for the clock."""
        return self.last_step < int(time.time()) // TOTP_PERIOD + 1

    def code(self) -> str:
        """A code for a time step not used before, valid for at least the next 30 seconds."""
        now = time.time()
        step = max(self.last_step + 1, int(now) // TOTP_PERIOD)
        wait = (step - 1) * TOTP_PERIOD - now  # until `step` is at most one step ahead
        if wait > 0:
            time.sleep(wait + 0.5)
        self.last_step = step
        return self.totp.generate_otp(step)

    def wrong_code(self) -> str:
        """A six-digit code that no time step near now has, so it is surely wrong."""
        now = time.time()
        valid = {self.totp.at(now + drift) for drift in (-60, -30, 0, 30, 60)}
        return next(code for code in (f"{n:06d}" for n in range(10)) if code not in valid)


def link_token(text: str) -> str | None:
    """The one-time token of the first link in a mail's text (``...?token=<token>``), if any."""
    match = LINK_TOKEN.search(text)
    return match.group(1) if match else None


def outbox_messages(
    dynamodb: Any, table: str, user_id: str, kind: str, *, to: str | None = None, wait: float = 0.0
) -> list[dict[str, Any]]:
    """The outbox messages of ``kind`` about ``user_id`` (to ``to`` only, if given), oldest first,
    found by the table's UserIndex as an operator finds a user's mail; polled for up to ``wait``
    seconds until there is one (mail a stream-fed function queues after the answer)."""
    deadline = time.monotonic() + wait
    while True:
        pages = dynamodb.get_paginator("query").paginate(
            TableName=table,
            IndexName="UserIndex",
            KeyConditionExpression="userId = :u",
            ExpressionAttributeValues={":u": {"S": user_id}},
        )
        keys = [{"id": item["id"]} for page in pages for item in page["Items"]]
        found: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request = {table: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
            found += dynamodb.batch_get_item(RequestItems=request)["Responses"].get(table, [])
        mine = [m for m in map(from_item, found) if m["kind"] == kind and to in (None, m["to"])]
        if mine or time.monotonic() >= deadline:
            return sorted(mine, key=lambda m: str(m["id"]))
        time.sleep(0.05)


def emulator_client(service: str, endpoint_url: str, region: str = "us-east-1", **config: Any) -> Any:
    """A boto3 client of the local API's AWS emulator (to look inside, as an operator would)."""
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(**config) if config else None,
    )


def run_nimbus(state_file: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The operator tool (``nimbus``) run against the local API that wrote ``state_file``."""
    command = [sys.executable, "-m", "nimbus_tools.cli.main", "--state", str(state_file), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
