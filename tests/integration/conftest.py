"""Handlers in process on moto (``mock_aws``), with every resource created from template.yaml.

``api.call(...)`` routes a request exactly as the local API does (same router, same payload v2
events) and invokes the handler module in this process. ``faults`` injects AWS errors at the SDK
boundary; ``stack.emails`` holds every email the functions sent (text and HTML), once
``stack.deliver_mail()`` has run the recovery function, then the mail function, on the outbox
stream (reading ``stack.emails`` does that first, as the deployed stack would within a second);
``stack.handle_recovery_requests()`` runs the recovery function alone. ``stack.sweep()`` runs the
sweep function on the users table's stream as its event source mapping would
(tests/integration/stream_feed.py).
"""

from __future__ import annotations

import copy
import functools
import importlib
import io
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import boto3
import botocore.loaders
import botocore.session
import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from botocore.config import Config
from moto import mock_aws
from pydantic import TypeAdapter

from nimbus_core.adapters import clients, container, runtime_config
from nimbus_core.adapters.kms import KmsKeys
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.domain.killswitches import KillSwitch, enabled_in, parameter_names, stored_value
from nimbus_core.http.policy import Endpoint
from nimbus_core.platform import metrics
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.faults import Fault, FaultRegistry, botocore_hook
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub, Reply
from nimbus_tools.local.lambda_records import lambda_event, matches
from nimbus_tools.local.provision import ProvisionedStack, provision, put_default_domain
from nimbus_tools.local.streams import StreamReader, committed, latest_stream_arn
from nimbus_tools.moto_internals import (
    TablesSnapshot,
    empty_queues,
    empty_tables,
    restore_tables,
    snapshot_tables,
    table_names,
)
from nimbus_tools.openapi import endpoint_errors
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import Template, load_template, parameter_values
from tests.integration.stream_feed import Handler, Invocation, StreamFeed

# A real PostgreSQL holding an upstream deployment, for the import's tests (started only when used).
from tests.migration.conftest import postgres, upstream  # noqa: F401

REGION = "us-east-1"
PARAMS = {
    "VerificationUrl": "https://files.test/verify?token={token}",
    "DefaultDomain": "nimbus.test",
    "WebAuthnRpId": "files.test",
    "WebAuthnOrigins": "https://files.test",
}
ORIGIN = "https://files.test"  # where the software authenticator's "browser" runs


@dataclass
class Stack:
    """The provisioned emulator and helpers to look inside it."""

    provisioned: ProvisionedStack
    template: Template

    def ensure_provisioned(self) -> None:
        """Provision again if a test with its own fresh moto wiped the backends."""
        if not set(self.provisioned.tables.values()) <= table_names(REGION):
            provision(boto3.Session(region_name=REGION), self.template, PARAMS)
            self._outbox = None  # a new table has a new stream
            self._feeds.clear()
            self._domains = None
        # A new data key for each test: moto may have been wiped and provisioned again by another
        # suite's fixture (tests/contract's) since the last test, the TOTP key under its pinned id
        # but with new key material, which no data key made before opens.
        self.__dict__.pop("sealer", None)

    # Every email SES accepted so far, without delivering pending outbox messages first.
    sent: list[dict[str, Any]] = field(default_factory=list)
    _outbox: StreamReader | None = None
    _feeds: dict[str, StreamFeed] = field(default_factory=dict)
    _domains: TablesSnapshot | None = None  # the domains table as provisioned (see truncate)

    @property
    def emails(self) -> list[dict[str, Any]]:
        """Every email sent, after delivering the outbox messages written so far."""
        self.deliver_mail()
        return self.sent

    def handle_recovery_requests(self, handler: Handler | None = None) -> list[Invocation]:
        """Run the recovery function (or ``handler``) on the recovery requests the outbox stream
        brought since the last call, as its event source mapping would; its invocations."""
        return self.feed("RecoveryFunction").drain(handler or self.routed.handler("RecoveryFunction"))

    def deliver_mail(self, handler: Callable[[dict[str, Any], Any], Any] | None = None) -> dict[str, Any]:
        """Run the mail function (or ``handler``) on the outbox stream's new records, as Lambda
        would (INSERTs of messages only, in process), after the recovery function has turned the
        recovery requests waiting into mail; returns the mail function's answer
        (``batchItemFailures``). Nothing new: no invocation."""
        self.handle_recovery_requests()
        [subscription] = [s for s in stream_subscriptions(self.template) if s.function == "MailFunction"]
        if self._outbox is None:
            streams = boto3.client(
                "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
            )
            arn = latest_stream_arn(self.dynamodb, self.table(subscription.table))
            self._outbox = StreamReader(streams, arn, "TRIM_HORIZON")
        # The stack lives for the whole session, so earlier tests' records (their truncation's REMOVEs
        # included) may come first: read to the end.
        backlog: list[dict[str, Any]] = []
        while batch := self._outbox.read(1000):
            backlog += batch
        records = [r for r in backlog if matches(r, subscription.filter_patterns)]
        records = committed(self.dynamodb, self.table(subscription.table), records)
        if not records:
            return {"batchItemFailures": []}
        invoke = handler or self.routed.handler("MailFunction")
        answer: dict[str, Any] = invoke(lambda_event(records), LambdaContextStub("MailFunction"))
        return answer

    def store_activity(self, handler: Handler | None = None) -> list[Invocation]:
        """Run the activity function (or ``handler``) on the events the outbox stream brought since
        the last call, as its event source mapping would; its invocations."""
        return self.feed("ActivityFunction").drain(handler or self.routed.handler("ActivityFunction"))

    def sweep(self, handler: Handler | None = None) -> list[Invocation]:
        """Run the sweep function (or ``handler``) on the users table's stream as its event source
        mapping would: what a failed batch held back first, then every new record FilterCriteria
        accept (changed or removed user items), BatchSize at a time, until nothing is left or a
        batch fails (the next call retries it; after MaximumRetryAttempts the batch goes to the
        OnFailure queue). Returns this call's invocations; ``stack.feed("SweepFunction")`` has all."""
        return self.feed("SweepFunction").drain(handler or self.routed.handler("SweepFunction"))

    def feed(self, function: str) -> StreamFeed:
        """The event source mapping of a stream-fed function (made on first use, then kept)."""
        if function not in self._feeds:
            [subscription] = [s for s in stream_subscriptions(self.template) if s.function == function]
            queue = self.provisioned.queues.get(subscription.on_failure_queue or "")
            self._feeds[function] = StreamFeed(
                subscription,
                table=self.table(subscription.table),
                dynamodb=self.dynamodb,
                streams=boto3.client(
                    "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
                ),
                sqs=boto3.client("sqs", region_name=REGION),
                on_failure_queue_url=queue,
            )
        return self._feeds[function]

    # The tests' own clients, made once per worker (a client costs milliseconds to build, and every
    # test reads and resets the tables through them); the functions' clients are new for each test.
    @functools.cached_property
    def dynamodb(self) -> Any:
        return boto3.client("dynamodb", region_name=REGION)

    @functools.cached_property
    def sealer(self) -> Sealer:
        """Seals TOTP seeds as the functions do: the stack's key, the stage's encryption context."""
        kms = boto3.client("kms", region_name=REGION)
        stage = parameter_values(self.template, PARAMS)["Stage"]
        return Sealer(lambda: KmsKeys(kms), key_id=self.provisioned.keys["TotpKey"], stage=stage)

    @functools.cached_property
    def ssm(self) -> Any:
        return boto3.client("ssm", region_name=REGION)

    @functools.cached_property
    def sqs(self) -> Any:
        return boto3.client("sqs", region_name=REGION)

    @functools.cached_property
    def routed(self) -> Api:
        """The in-process API with the functions' specifications and routes worked out from the
        template once per worker; each test's ``api`` is a copy of it (``copy.copy``: the specs and
        the router, read only, are shared)."""
        return Api(self.template, PARAMS)

    def table(self, logical_id: str) -> str:
        return self.provisioned.tables[logical_id]

    def items(self, logical_id: str) -> list[dict[str, Any]]:
        """Every item of a table (tests only; the service never scans)."""
        return list(self.dynamodb.scan(TableName=self.table(logical_id))["Items"])

    def messages(self) -> list[dict[str, Any]]:
        """The outbox's mail and recovery requests: every item but the bare activity events on
        their way to the activity table."""
        return [i for i in self.items("OutboxTable") if i.get("kind", {}).get("S") != "activity"]

    @property
    def switch_parameters(self) -> dict[KillSwitch, str]:
        """Each kill switch's SSM parameter, as the functions read them."""
        return parameter_names(os.environ["KILLSWITCH_PATH"])

    def write_switches(self, *names: str) -> None:
        """Turn exactly ``names`` on (every switch's parameter written) WITHOUT dropping the
        functions' cached copy: what an operator does."""
        for switch, name in self.switch_parameters.items():
            value = stored_value(switch.name in names)
            self.ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def enabled_switches(self) -> set[str]:
        """The names of the switches stored as on."""
        names = self.switch_parameters
        found = self.ssm.get_parameters(Names=list(names.values()))["Parameters"]
        return {s.name for s in enabled_in({p["Name"]: p["Value"] for p in found}, names)}

    def set_switches(self, *names: str) -> None:
        """Turn exactly ``names`` on and drop the functions' cached copy."""
        self.write_switches(*names)
        container.reset()

    def truncate(self) -> None:
        """Empty every table and its stream and every queue, then offer the default domain again
        (provisioned state, cheaply).

        The items and stream records are dropped inside moto (``moto_internals.empty_tables``):
        a DeleteItem per item left a REMOVE record per item, which moto deep-copies on every
        TransactWriteItems, so every transaction of a worker grew slower test after test. The
        domains table is put back from a copy taken when the default domain was first offered
        through the API (a read and a write per test otherwise). The queues are emptied inside moto
        too (``moto_internals.empty_queues``), messages in flight included: a receive and a delete
        per queue otherwise, and a message received but not deleted would stay out of reach.
        """
        empty_tables(REGION, self.provisioned.tables.values())
        # The stream readers start again on the emptied streams.
        self._outbox = None
        self._feeds.clear()
        if self._domains is None:
            put_default_domain(self.dynamodb, self.table("DomainsTable"), PARAMS["DefaultDomain"])
            self._domains = snapshot_tables(REGION, [self.table("DomainsTable")])
        else:
            restore_tables(self._domains)
        empty_queues(REGION, self.provisioned.queues.values())


_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def take_messages(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message of the queue at ``url``, consumed: received and deleted. A message only
    received is hidden for the queue's visibility timeout (30 s), out of reach of the next test's
    emptying, and comes back into sight in whatever test runs then."""
    taken: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        taken += messages
    return taken


@contextmanager
def fresh_aws() -> Iterator[None]:
    """moto with empty backends, even inside the session's mock (nested mocks share data).

    A test that needs AWS all to itself uses this; the session stack is provisioned again on the
    next test that uses it (see :func:`stack`).
    """
    with mock_aws() as mocked:
        mocked.reset()
        yield


@pytest.fixture(scope="session")
def _provisioned() -> Iterator[Stack]:
    """moto, provisioned from template.yaml ONCE per test session (per xdist worker)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in _ENV.items():
            patch.setenv(key, value)
        patch.delenv("AWS_ENDPOINT_URL", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        # Every test starts with new clients (container.reset()); they share one botocore loader, so
        # the service models are read from disk once per worker, not on every test.
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))
        template = load_template()
        with mock_aws():
            provisioned = provision(boto3.Session(region_name=REGION), template, PARAMS)
            for key, value in InProcessApi(template, PARAMS).environment().items():
                patch.setenv(key, value)
            yield Stack(provisioned, template)


# argon2id's test profile for every test that does not examine the profile itself (marked
# real_argon2): passwords are still hashed and verified by argon2, in milliseconds instead of the
# production profile's tens of them, which most tests pay on every registration and login.


@pytest.fixture(autouse=True)
def _cheap_argon2(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("real_argon2") is None:
        request.getfixturevalue("cheap_password_hashing")


@pytest.fixture(scope="session")
def _sdk_session(_provisioned: Stack) -> botocore.session.Session:
    """The botocore session the functions' clients are made from in every test of a worker, with
    the hooks that record each email SES accepted (a test that sends no mail builds no SES client).

    Building a session registers botocore's hundreds of built-in handlers, which cost more than
    most tests' requests; the functions' clients, caches and settings are still new in every test
    (``container.reset()``), and every test runs with the same test credentials."""
    clients.reset()
    return _recording_emails(clients.session(), _provisioned.sent)


@pytest.fixture
def stack(
    _provisioned: Stack,
    _sdk_session: botocore.session.Session,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Stack]:
    """The session's emulated stack, emptied for this test, with fresh clients and caches."""
    _provisioned.ensure_provisioned()
    _provisioned.truncate()
    _provisioned.sent.clear()
    get_settings.cache_clear()
    container.reset()
    metrics.reset()
    if request.node.get_closest_marker("new_sdk_sessions") is None:
        monkeypatch.setattr(clients, "session", functools.cache(lambda: _sdk_session))
    else:  # a new session, with the same hooks
        _recording_emails(clients.session(), _provisioned.sent)
    yield _provisioned
    if _provisioned.enabled_switches():
        _provisioned.set_switches()
    get_settings.cache_clear()
    container.reset()
    metrics.reset()


def _recording_emails(
    session: botocore.session.Session, sink: list[dict[str, Any]]
) -> botocore.session.Session:
    """``session``, its SES clients hooked to add each email SES accepted to ``sink``."""
    session.register("before-parameter-build.sesv2.SendEmail", _remember_email)
    session.register("after-call.sesv2.SendEmail", _recorder(sink))
    return session


def _remember_email(**event: Any) -> None:
    event["context"]["nimbus_email"] = event["params"]


def _recorder(sink: list[dict[str, Any]]) -> Callable[..., None]:
    """Record an email once SES accepted it (an injected fault must leave the outbox empty)."""

    def record(**event: Any) -> None:
        parsed, context = event["parsed"], event["context"]
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
    """The in-process API with shortcuts for the common requests.

    Every successful answer is also checked against the view its route's signature returns
    (``-> Reply[UserView]``) and the status it declares, so the document cannot drift from them.
    """

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        """Send one request (see InProcessApi.call) and check a 2xx body against its declared model."""
        reply = super().call(method, path, body, **kwargs)
        endpoint = _endpoint(self, method, path, reply)
        if endpoint is not None and 200 <= reply.status < 300:
            _check_response_model(endpoint, reply)
        elif endpoint is not None:
            _check_documented_error(endpoint, reply)
        return reply

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


def _endpoint(api: InProcessApi, method: str, path: str, reply: Reply) -> Endpoint | None:
    """The registered endpoint that answered, or None when the gateway answered by itself."""
    match = api.router.match(method, path.split("?", 1)[0])
    if match is None or match.route_key == "$default" or reply.function is None:
        return None
    route_method, route_path = match.route_key.split(" ", 1)
    app = importlib.import_module(api.specs[reply.function].handler_module).app
    wanted = (route_method, route_path.replace("{", "<").replace("}", ">"))
    [endpoint] = [e for e in app.endpoints if (e.method, e.path) == wanted]
    return cast(Endpoint, endpoint)


def _check_response_model(endpoint: Endpoint, reply: Reply) -> None:
    """The success's body is its view's shape exactly: every key the TypedDict has, of its type
    (strict: no coercion), and no other (a closed view)."""
    view = endpoint.successes().get(reply.status)
    assert view is not None, f"{endpoint.path} declares no response view for {reply.status}"
    _adapter(view).validate_python(reply.body, strict=True)


@functools.cache
def _adapter(view: type) -> TypeAdapter[Any]:
    return TypeAdapter(view)


def _check_documented_error(endpoint: Endpoint, reply: Reply) -> None:
    """Every error answered is one the OpenAPI document lists for the endpoint (docs/openapi.json)."""
    code = reply.body.get("code") if isinstance(reply.body, dict) else None
    listed = endpoint_errors(endpoint).get(reply.status, [])
    assert code in listed, (
        f"{endpoint.method} {endpoint.path} answered {reply.status} {code}, which its document does not "
        f"list ({listed}): declare it with the route (errors=...)"
    )


@pytest.fixture
def api(stack: Stack) -> Api:
    return copy.copy(stack.routed)


@pytest.fixture
def token(api: Api) -> str:
    """The session token of a freshly registered "alice"."""
    reply = api.register(username="alice", ip="198.51.100.1")
    assert reply.status == 201, reply.body
    value: str = reply.body["token"]
    return value


class Faults(FaultRegistry):
    """The emulator's fault registry, consulted at the SDK boundary of the functions' clients.

    ``fail(service, operation, code, status, after=n)`` makes the functions' next calls fail as the
    local API's ``POST /_nimbus/faults`` would (same matching, same error on the wire).
    """

    def __init__(self) -> None:
        super().__init__()
        self._hook = botocore_hook(self)
        self._hooked: list[Any] = []

    def add(self, spec: Any) -> Fault:
        """Register a fault (see :meth:`FaultRegistry.fail`), hooked on the client the functions
        use now for its service (container.reset() makes new ones)."""
        fault = super().add(spec)
        factory = {"dynamodb": clients.dynamodb, "ssm": clients.ssm, "ses": clients.sesv2, "sqs": clients.sqs}
        client = factory[fault.service]()
        if not any(hooked is client for hooked in self._hooked):
            client.meta.events.register("before-call", self._hook)
            self._hooked.append(client)
        return fault

    def remove_hooks(self) -> None:
        """Take the registry off every client it was put on."""
        while self._hooked:
            self._hooked.pop().meta.events.unregister("before-call", self._hook)


@pytest.fixture
def faults(stack: Stack) -> Iterator[Faults]:
    injected = Faults()
    yield injected
    injected.clear()
    injected.remove_hooks()


NOW = 1_800_000_000.25  # 2027-01-15T08:00:00.250Z: a fixed moment for exact expiries and timestamps


class Clock:
    """A clock the service reads through ``nimbus_core.platform.clock.now``; tests move it by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Freeze the service's clock at NOW so expiries and timestamps are exact."""
    from nimbus_core.platform import clock

    fixed = Clock(NOW)
    monkeypatch.setattr(clock, "now", fixed)
    return fixed


@pytest.fixture
def parameter_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Move the clock that the runtime configuration's cache reads (its 10 s max age), without
    sleeping."""
    offset = [0.0]
    monkeypatch.setattr(runtime_config, "monotonic", lambda: time.monotonic() + offset[0])

    def advance(seconds: float) -> None:
        offset[0] = seconds

    return advance


@pytest.fixture
def service_logs() -> Iterator[io.StringIO]:
    """Every line the functions log, as the JSON they write."""
    service_logger = logging.getLogger("nimbus")  # the functions' Powertools logger (service "nimbus")
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(LambdaPowertoolsFormatter())
    service_logger.addHandler(handler)
    yield sink
    service_logger.removeHandler(handler)


@pytest.fixture
def log_level(stack: Stack) -> Iterator[Callable[[str], None]]:
    """Set the operator's log level in SSM for every function from the next request on (fresh
    containers); the level before the test is restored afterwards."""
    name = stack.provisioned.parameters["LogLevelParameter"]
    before = stack.ssm.get_parameter(Name=name)["Parameter"]["Value"]

    def set_level(level: str) -> None:
        stack.ssm.put_parameter(Name=name, Value=level, Type="String", Overwrite=True)
        container.reset()

    yield set_level
    set_level(before)
