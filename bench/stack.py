"""The stack the moto benchmarks run on, in this process: moto's ``mock_aws`` provisioned from
template.yaml, the functions behind ``InProcessApi``, the AWS calls counted (``before-call`` once per
API call, ``before-send`` once per HTTP attempt, of every client), and the uncounted setup of users,
sessions and factors that the requests measured start from.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from typing import Any, cast
from unittest.mock import patch

import boto3
import pyotp
from botocore.handlers import BUILTIN_HANDLERS, REGISTER_FIRST
from moto import mock_aws

from bench.runs import REGION, aws_environment
from nimbus_core.adapters import container
from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.adapters.runtime_config import SsmRuntimeConfig
from nimbus_core.adapters.user_factors import totp_secret_attribute
from nimbus_core.adapters.users import user_item
from nimbus_core.domain.killswitches import KillSwitch, parameter_names, stored_value
from nimbus_core.domain.models import SecondFactor
from nimbus_core.factors.otp import new_totp_secret
from nimbus_core.platform import clock
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub, Reply
from nimbus_tools.local.provision import provision, put_default_domain
from nimbus_tools.local.streams import lambda_event, lambda_record
from nimbus_tools.moto_internals import empty_tables, stop_stream_records
from nimbus_tools.template import Template
from tests.passkey_authenticator import SoftwareAuthenticator
from tests.samples import PASSWORD, sample_user


class ScenarioError(RuntimeError):
    """A request did not behave as scripted, so its numbers would mean nothing."""


@dataclass
class Tally:
    """The AWS activity of one request."""

    calls: list[tuple[str, str]] = field(default_factory=list)  # (service, operation), in call order
    attempts: Counter[str] = field(default_factory=Counter)  # HTTP attempts per service

    def operations(self, service: str = "dynamodb") -> list[str]:
        """The operations called on ``service``, in order."""
        return [op for s, op in self.calls if s == service]


_MEASURING: list[Tally] = []  # the tally of the measurement under way, if any


def _on_call(event_name: str, **_: Any) -> None:
    if _MEASURING:
        _prefix, service, operation = event_name.split(".", 2)
        _MEASURING[-1].calls.append((service, operation))


def _on_send(event_name: str, **_: Any) -> None:
    if _MEASURING:
        _MEASURING[-1].attempts[event_name.split(".")[1]] += 1


# A public extension point of botocore: every client created from now on (the functions' three
# cached ones included) counts its calls, first in line: moto answers in before-send, and the
# first handler that answers ends the event.
BUILTIN_HANDLERS.extend(
    [("before-call", _on_call, REGISTER_FIRST), ("before-send", _on_send, REGISTER_FIRST)]
)


@contextmanager
def measure() -> Iterator[Tally]:
    """Count the API calls and HTTP attempts of every client inside the block."""
    tally = Tally()
    _MEASURING.append(tally)
    try:
        yield tally
    finally:
        _MEASURING.remove(tally)


def timed[T](call: Callable[[], T]) -> tuple[float, Tally, T]:
    """Milliseconds of ``call``, its AWS calls, and its result."""
    with measure() as tally:
        started = time.perf_counter()
        result = call()
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, tally, result


@contextmanager
def moto_stack(
    template: Template, handlers: Sequence[str] | None = None, streams: Collection[str] | None = None
) -> Iterator[InProcessApi]:
    """moto provisioned from ``template``, the in-process API with ``handlers`` imported (all by
    default), as in a warm container, and the functions' log lines captured (a ScenarioError gets
    the last ones), for the block. ``streams``: the settings naming the tables whose streams keep
    recording (None: all of them); see ``stop_stream_records`` for why.

    moto's data starts empty and is emptied after, and the environment is put back: inside another
    mock (a test worker's stack; nested mocks share moto's data) nothing the bench made, its tables
    with their streams turned off among them, is left for the outer stack to mistake for its own."""
    with aws_environment(), patch.dict(os.environ), mock_aws() as mocked:
        mocked.reset()
        provision(boto3.Session(region_name=REGION), template)
        api = InProcessApi(template)
        # Before any handler import: Powertools reads its environment when the module loads.
        os.environ.update(api.environment())
        get_settings.cache_clear()  # settings, clients and runtime config made anew, then forgotten
        container.reset()
        if streams is not None:
            stop_stream_records(keep={getattr(get_settings(), name) for name in streams})
        try:
            for logical_id in api.specs if handlers is None else handlers:
                api.handler(logical_id)
            with _function_logs_captured() as logs:
                try:
                    yield api
                except ScenarioError as error:
                    tail = "\n".join(logs.getvalue().splitlines()[-20:])
                    raise ScenarioError(f"{error}\n--- last function log lines ---\n{tail}") from None
        finally:
            mocked.reset()
            get_settings.cache_clear()
            container.reset()


_LOGS: list[io.StringIO] = []  # the buffer the functions log to, while a stack is up


def logged_characters() -> int:
    """How many characters the functions have logged so far on the stack that is up (0 without
    one): the difference around a request is what it logs."""
    return _LOGS[-1].tell() if _LOGS else 0


@contextmanager
def _function_logs_captured() -> Iterator[io.StringIO]:
    """Send the functions' log lines (Powertools writes JSON to stdout, Lambda's log stream) to a
    buffer for the block: the bench's stdout is its report. The buffer explains a failed scenario."""
    buffer = io.StringIO()
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    redirected: list[tuple[logging.StreamHandler[Any], Any]] = []
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                redirected.append((handler, handler.setStream(buffer)))
    _LOGS.append(buffer)
    try:
        with redirect_stdout(buffer):  # metrics (EMF) are printed, not logged
            yield buffer
    finally:
        _LOGS.remove(buffer)
        for handler, stream in redirected:
            handler.setStream(stream)


def set_config(config: str = "warm") -> None:
    """Put the runtime-config cache in the state a measurement is about. Warm: fetched a moment ago
    (it lives 10 s, and a setup with argon2 on moto takes a good part of that). Cold: nothing cached,
    as in a new container."""
    source = cast("SsmRuntimeConfig", container.production_deps().config)  # what production_deps makes
    source.forget()
    if config == "warm":
        source.current()


def expect(what: str, status: int, reply: Reply) -> None:
    """Stop unless ``reply`` has ``status``."""
    if reply.status != status:
        raise ScenarioError(f"{what}: expected HTTP {status}, got {reply.status}: {reply.body}")


def batch_write(dynamodb: Any, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """BatchWriteItem ``requests`` (PutRequest or DeleteRequest) to ``table``, 25 at a time (uncounted)."""
    for start in range(0, len(requests), 25):
        pending: dict[str, Any] = {table: list(requests[start : start + 25])}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


@dataclass(frozen=True)
class Account:
    """A user made for a request: its name, id and token, and the second factor it answers with."""

    name: str
    id: str
    token: str
    other_session: str  # the id of its newest session but the token's (the token's when alone)
    seed: str | None = None  # the TOTP factor's seed
    factor: str | None = None  # the TOTP factor's id
    key: SoftwareAuthenticator | None = None


class Harness:
    """Requests, users and sessions for the scenarios, on the in-process API (uncounted setup)."""

    def __init__(self, api: InProcessApi, session: boto3.Session) -> None:
        self.api = api
        self._dynamodb = session.client("dynamodb")  # the bench's own clients: never watched
        self._ssm = session.client("ssm")
        self._sequence = itertools.count(1)
        self._seeded: set[str] = set()

    def unique(self, prefix: str) -> str:
        """A name never used before in this run."""
        return f"{prefix}{next(self._sequence)}"

    def fresh_ip(self) -> str:
        """A source IP never used before: the per-IP rate limits (register: 1 per 6 h) never bite."""
        n = next(self._sequence)
        return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"

    def register(self, username: str) -> str:
        """Register ``username``; its session token."""
        body = {"username": username, "email": f"{username}@example.com", "password": PASSWORD}
        return self._session("/register", body)

    def login(self, username: str) -> str:
        """Log ``username`` in once more; the new session's token."""
        return self._session("/login", {"username": username, "password": PASSWORD})

    def _session(self, path: str, body: dict[str, str]) -> str:
        reply = self.api.call("POST", path, body, ip=self.fresh_ip())
        expect(f"setup: POST {path} {body['username']}", 201, reply)
        return str(reply.body["token"])

    def account(
        self, *, logins: int = 0, factor: str | None = None, staff: bool = False, **state: bool
    ) -> Account:
        """A fresh user with ``logins`` more sessions, a ``factor`` ("totp" or "key"; staff always
        have a TOTP factor: staff endpoints require one), and ``state`` (``verified``, ``banned``)."""
        name = self.unique("u")
        token = self.register(name)
        tokens = [token, *(self.login(name) for _ in range(logins))]
        factor_id, seed = self.add_totp(token, staff=staff) if staff or factor == "totp" else (None, None)
        key = self.add_key(token, passkey=factor == "passkey") if factor in ("key", "passkey") else None
        stamp = clock.iso(clock.now())
        if state.get("verified"):
            self.set_user(token, verifiedAt=stamp)
        if state.get("banned"):  # as a ban leaves the user: their sessions revoked
            self.set_user(token, revoke=True, bannedAt=stamp, banReason="Spam")
        return Account(name, token.split(".")[0], token, tokens[-1].split(".")[1], seed, factor_id, key)

    def add_totp(self, token: str, *, staff: bool = False) -> tuple[str, str]:
        """Give the token's user a TOTP factor no code was used with yet (written directly, so the
        current code answers the next challenge; its seed sealed as an enrolment seals it, by the
        functions' own sealer), and the staff flag if ``staff``; (its id, seed)."""
        stamp, seed = clock.iso(clock.now()), new_totp_secret()
        user_id = token.split(".", 1)[0]
        factor = SecondFactor(id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp)
        sealed = container.production_deps().sealer.seal(seed, user_id=user_id, factor_id=factor.id)
        values: dict[str, Any] = {
            ":t": {"BOOL": staff},
            ":factor": {"M": to_item(stored_values(factor))},
            ":seed": {"S": sealed},
        }
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{user_id}"}},
            UpdateExpression="SET staff = :t, secondFactors.#f = :factor, #seed = :seed",
            ExpressionAttributeNames={"#f": factor.id, "#seed": totp_secret_attribute(factor.id)},
            ExpressionAttributeValues=values,
        )
        return factor.id, seed

    def enrolment(self, token: str, kind: str, *, passkey: bool = False) -> dict[str, Any]:
        """Start enrolling a ``kind`` ("totp" or "webauthn", a ``passkey`` if asked) factor; the
        body to confirm it with (uncounted), the code or key response included."""
        body = {"password": PASSWORD} | ({"passkey": True} if passkey else {})
        started = self.api.call("POST", f"/users/me/2fa/{kind}", body, token=token)
        expect(f"setup: start {kind}", 200, started)
        if kind == "totp":
            proof: dict[str, Any] = {"code": pyotp.TOTP(started.body["secret"]).now()}
        else:
            key = SoftwareAuthenticator()
            proof = {"response": key.create(started.body, origin=self.origin), "key": key}
        return {"token": started.body["token"], "name": "New", **proof}

    def add_key(self, token: str, *, passkey: bool = False) -> SoftwareAuthenticator:
        """Enrol a software security key (or passkey) through the API; the authenticator."""
        body = self.enrolment(token, "webauthn", passkey=passkey)
        key: SoftwareAuthenticator = body.pop("key")
        confirmed = self.api.call("POST", "/users/me/2fa/webauthn/confirm", body, token=token)
        expect("setup: confirm a security key", 201, confirmed)
        return key

    @property
    def origin(self) -> str:
        """The page a security key answers from: the deployment's first WebAuthn origin."""
        return get_settings().relying_party().origins[0]

    def answer(
        self, caller: Account, method: str, path: str, body: dict[str, Any], *, token: str | None, ip: str
    ) -> dict[str, Any]:
        """``body`` answering, with ``caller``'s security key or TOTP code, the challenge its first
        request (with the password, uncounted) is answered."""
        asked = self.api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=ip)
        expect(f"setup: challenge of {method} {path}", 401, asked)
        if caller.key is not None:
            proof = {
                "type": "webauthn",
                "response": caller.key.get(asked.body["challenge"], origin=self.origin),
            }
        else:
            proof = {"type": "totp", "code": pyotp.TOTP(str(caller.seed)).now()}
        kept = {k: v for k, v in body.items() if k != "password"}
        return kept | {"2fa": {"token": asked.body["token"], **proof}}

    def verification_link(self, address: str, kind: str = "verify-email") -> str:
        """The token of the newest email of ``kind`` queued for ``address`` (read from the outbox,
        once the recovery requests waiting became mail, as the recovery function does)."""
        if kind == "recover-password":
            expect("setup: handle recovery requests", 200, self.recovery_invocation()())
        items = self._dynamodb.scan(TableName=get_settings().outbox_table)["Items"]
        mine = sorted(
            (i for i in items if i["kind"]["S"] == kind and i["to"]["S"] == address),
            key=lambda i: i["createdAt"]["S"],
        )
        if not mine:
            raise ScenarioError(f"setup: no {kind} email for {address}")
        return str(mine[-1]["text"]["S"]).split("token=", 1)[1].split(maxsplit=1)[0]

    def recovery_invocation(self) -> Callable[[], Reply]:
        """The invocation of the recovery function on the recovery requests stored now, as the outbox
        stream would deliver them (this bench keeps no stream records), to run later; it answers
        200 when no record failed."""
        table = get_settings().outbox_table
        stored = self._dynamodb.scan(TableName=table)["Items"]
        items = [i for i in stored if i["kind"]["S"] == RECOVERY_REQUEST]
        arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}/stream/bench"
        inserted = [
            {"Keys": {"id": i["id"]}, "NewImage": i, "SequenceNumber": str(n)} for n, i in enumerate(items, 1)
        ]
        event = lambda_event([lambda_record({"eventName": "INSERT", "dynamodb": d}, arn) for d in inserted])
        handler = self.api.handler("RecoveryFunction")

        def invoke() -> Reply:
            answer = handler(event, LambdaContextStub("RecoveryFunction"))
            return Reply(500 if answer.get("batchItemFailures") else 200, answer, {}, "RecoveryFunction")

        return invoke

    def set_user(self, token: str, *, revoke: bool = False, **values: str) -> None:
        """Write attributes of the token's user directly (``verifiedAt="..."``), and with ``revoke``
        move it to a new session generation: a state an endpoint starts from, without the requests
        that would lead there."""
        names = {f"#a{n}": name for n, name in enumerate(values)}
        attributes = {f":v{n}": {"S": value} for n, value in enumerate(values.values())}
        setting = [f"#a{n} = :v{n}" for n in range(len(values))]
        if revoke:
            setting.append("sessionGeneration = if_not_exists(sessionGeneration, :zero) + :one")
            attributes |= {":zero": {"N": "0"}, ":one": {"N": "1"}}
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{token.split('.', 1)[0]}"}},
            UpdateExpression="SET " + ", ".join(setting),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=attributes,
        )

    def set_used_at(self, token: str, age_seconds: float) -> None:
        """Write the session's usedAt as ``age_seconds`` ago (what a request that long ago left)."""
        user_id, session_id = token.split(".")[:2]
        self._dynamodb.update_item(
            TableName=get_settings().sessions_table,
            Key={"userId": {"S": user_id}, "sessionId": {"S": session_id}},
            UpdateExpression="SET usedAt = :u",
            ExpressionAttributeValues={":u": {"S": clock.iso(clock.now() - age_seconds)}},
        )

    def seed_users(self, count: int, once: str) -> None:
        """Store ``count`` user items straight to the table, the first time only for ``once`` (a
        scenario: its repetitions find them): what GET /users lists. Only the user items (no claims,
        not in the user count): they never log in."""
        if once in self._seeded:
            return
        self._seeded.add(once)
        stamp, settings = clock.iso(clock.now()), get_settings()
        stored = {"created_at": stamp, "updated_at": stamp, "domain": settings.default_domain}
        users = [sample_user(new_id(), self.unique("listed")).changed(**stored) for _ in range(count)]
        puts = [{"PutRequest": {"Item": user_item(u)}} for u in users]
        batch_write(self._dynamodb, settings.users_table, puts)

    def set_killswitches(self, enabled: Sequence[KillSwitch]) -> None:
        """Store the enabled kill switches directly in SSM (the bench refetches the runtime
        configuration right before each measured request)."""
        for switch, name in parameter_names(get_settings().killswitch_path).items():
            value = stored_value(switch in enabled)
            self._ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def reset(self) -> None:
        """Empty every table inside moto and offer the default domain again, as provisioned: a
        scenario's setup, kept, would slow every later one down (moto's TransactWriteItems copies
        each table it touches). Round trips do not depend on the tables' size (a Query page holds 1 MB)."""
        empty_tables(REGION, self._dynamodb.list_tables()["TableNames"])
        settings = get_settings()
        put_default_domain(self._dynamodb, settings.domains_table, settings.default_domain)
