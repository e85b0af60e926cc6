"""Handlers in process on moto (``mock_aws``), with every resource created from template.yaml.

``api.call(...)`` routes a request exactly as the local API does (same router, same payload v2
events) and invokes the handler module in this process. ``faults`` injects AWS errors at the SDK
boundary; ``stack.emails`` holds every email the functions sent (text and HTML), once
``stack.deliver_mail()`` has run the mail function on the outbox stream (reading ``stack.emails``
does that first, as the deployed stack would within a second).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from nimbus_core import metrics
from nimbus_core.adapters import clients, runtime_config
from nimbus_core.settings import get_settings
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub, Reply
from nimbus_tools.local.provision import ProvisionedStack, provision
from nimbus_tools.local.streams import StreamReader, committed, lambda_event, latest_stream_arn, matches
from nimbus_tools.template import load_template, stream_subscriptions

REGION = "us-east-1"
PARAMS = {"VerificationUrl": "https://files.test/verify?token={token}", "DefaultDomain": "nimbus.test"}


@dataclass
class Stack:
    """The provisioned emulator and helpers to look inside it."""

    provisioned: ProvisionedStack
    # Every email SES accepted so far, without delivering pending outbox messages first.
    sent: list[dict[str, Any]] = field(default_factory=list)
    _outbox: StreamReader | None = None

    @property
    def emails(self) -> list[dict[str, Any]]:
        """Every email sent, after delivering the outbox messages written so far."""
        self.deliver_mail()
        return self.sent

    def deliver_mail(self) -> dict[str, Any]:
        """Run the mail function on the outbox stream's new records, as Lambda would (INSERTs only,
        in process); returns its answer (``batchItemFailures``). Nothing new: no invocation."""
        [subscription] = [s for s in stream_subscriptions(load_template()) if s.function == "MailFunction"]
        if self._outbox is None:
            streams = boto3.client(
                "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
            )
            arn = latest_stream_arn(self.dynamodb, self.table(subscription.table))
            self._outbox = StreamReader(streams, arn, "TRIM_HORIZON")
        records = [r for r in self._outbox.read(1000) if matches(r, subscription.filter_patterns)]
        records = committed(self.dynamodb, self.table(subscription.table), records)
        if not records:
            return {"batchItemFailures": []}
        handler = InProcessApi(load_template(), PARAMS).handler("MailFunction")
        return handler(lambda_event(records), LambdaContextStub("MailFunction"))

    @property
    def dynamodb(self) -> Any:
        return boto3.client("dynamodb", region_name=REGION)

    @property
    def ssm(self) -> Any:
        return boto3.client("ssm", region_name=REGION)

    def table(self, logical_id: str) -> str:
        return self.provisioned.tables[logical_id]

    def items(self, logical_id: str) -> list[dict[str, Any]]:
        """Every item of a table (tests only; the service never scans)."""
        return list(self.dynamodb.scan(TableName=self.table(logical_id))["Items"])

    def set_switches(self, *names: str) -> None:
        """Write the kill-switch parameter and drop the functions' cached copy."""
        self.ssm.put_parameter(
            Name=self.provisioned.parameters["KillSwitchParameter"],
            Value=json.dumps(list(names)),
            Type="String",
            Overwrite=True,
        )
        runtime_config.reset()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """A fresh emulated stack per test, with the functions' environment from the template."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    template = load_template()
    with mock_aws():
        provisioned = provision(boto3.Session(region_name=REGION), template, PARAMS)
        for key, value in InProcessApi(template, PARAMS).environment().items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        clients.reset()
        runtime_config.reset()
        metrics.reset()
        result = Stack(provisioned)
        events = clients.sesv2().meta.events
        events.register("before-parameter-build.sesv2.SendEmail", _remember_email)
        events.register("after-call.sesv2.SendEmail", _recorder(result.sent))
        yield result
        get_settings.cache_clear()
        clients.reset()
        runtime_config.reset()
        metrics.reset()


def _remember_email(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    context["nimbus_email"] = params


def _recorder(sink: list[dict[str, Any]]) -> Callable[..., None]:
    """Record an email once SES accepted it (an injected fault must leave the outbox empty)."""

    def record(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if "Error" in parsed or "nimbus_email" not in context:
            return
        params = context["nimbus_email"]
        simple = params["Content"]["Simple"]
        sink.append(
            {
                "from": params["FromEmailAddress"],
                "to": params["Destination"]["ToAddresses"],
                "subject": simple["Subject"]["Data"],
                "text": simple["Body"]["Text"]["Data"],
                "html": simple["Body"]["Html"]["Data"],
            }
        )

    return record


class Api(InProcessApi):
    """The in-process API with shortcuts for the common requests."""

    def register(
        self,
        username: str = "alice",
        email: str | None = None,
        password: str = "correct horse",
        ip: str = "198.51.100.7",
        **extra: Any,
    ) -> Reply:
        """POST /register with sensible defaults."""
        body = {
            "username": username,
            "email": email or f"{username}@example.com",
            "password": password,
            **extra,
        }
        return self.call("POST", "/register", body, ip=ip)

    def login(
        self, username: str = "alice", password: str = "correct horse", ip: str = "203.0.113.5", **extra: Any
    ) -> Reply:
        """POST /login with sensible defaults."""
        return self.call("POST", "/login", {"username": username, "password": password, **extra}, ip=ip)


@pytest.fixture
def api(stack: Stack) -> Api:
    return Api(load_template(), PARAMS)


@pytest.fixture
def token(api: Api) -> str:
    """The session token of a freshly registered "alice"."""
    reply = api.register(username="alice", ip="198.51.100.1")
    assert reply.status == 201, reply.body
    value: str = reply.body["token"]
    return value


class Faults:
    """Make chosen AWS operations fail, at the SDK boundary, as the service would see it."""

    def __init__(self) -> None:
        self._unregister: list[Callable[[], None]] = []

    def fail(
        self, service: str, operation: str, code: str = "InternalServerError", status: int = 500
    ) -> None:
        client = {
            "dynamodb": clients.dynamodb,
            "ssm": clients.ssm,
            "sesv2": clients.sesv2,
            "sqs": clients.sqs,
        }[service]()
        event = f"before-call.{service}.{operation}"

        def answer(**_: Any) -> tuple[Any, dict[str, Any]]:
            http = _HttpStub(status)
            return http, {
                "Error": {"Code": code, "Message": "injected fault"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            }

        # botocore types hooks as returning None; a before-call hook that returns a response short-circuits.
        hook: Any = answer
        client.meta.events.register(event, hook)
        self._unregister.append(lambda: client.meta.events.unregister(event, hook))

    def clear(self) -> None:
        while self._unregister:
            self._unregister.pop()()


@dataclass
class _HttpStub:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes = b""


@pytest.fixture
def faults(stack: Stack) -> Iterator[Faults]:
    injected = Faults()
    yield injected
    injected.clear()


NOW = 1_800_000_000.25  # 2027-01-15T08:00:00.250Z: a fixed moment for exact expiries and timestamps


class Clock:
    """A clock the service reads through ``nimbus_core.clock.now``; tests move it by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Freeze the service's clock at NOW so expiries and timestamps are exact."""
    from nimbus_core import clock

    fixed = Clock(NOW)
    monkeypatch.setattr(clock, "now", fixed)
    return fixed
