"""AWS calls per request on a warm function, counted at the SDK boundary under moto.

The functions run in this process through ``InProcessApi`` (the local API's router and payload v2
events) against moto's ``mock_aws``, provisioned from template.yaml, like the integration tests.
Counting happens on the three cached clients every function uses (``nimbus_core.adapters.clients``):
``before-call`` fires once per API call, ``before-send`` once per HTTP attempt, so a retried call
shows up as more attempts than calls. A round trip is an HTTP attempt: that is what a budget counts.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import boto3
import pyotp
from botocore.client import BaseClient
from botocore.handlers import BUILTIN_HANDLERS
from moto import mock_aws

from bench.table import render
from nimbus_core.adapters import clients, container
from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.adapters.users import COUNT_KEY_PREFIX, user_item
from nimbus_core.domain.killswitches import KillSwitch, parameter_names, stored_value
from nimbus_core.domain.models import SecondFactor
from nimbus_core.factors.otp import new_totp_secret
from nimbus_core.platform import clock
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.auth import USED_AT_REFRESH_SECONDS
from nimbus_core.sessions.tokens import parse_session_token
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub, Reply
from nimbus_tools.local.provision import provision
from nimbus_tools.local.streams import lambda_event, lambda_record
from nimbus_tools.template import Template
from tests.passkey_authenticator import SoftwareAuthenticator
from tests.samples import sample_user

REGION = "us-east-1"
# Fake credentials and no endpoint: moto answers in process, nothing can reach a real account.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
UNSET_AWS = ("AWS_ENDPOINT_URL", "AWS_PROFILE")
SERVICES = ("dynamodb", "ssm", "sesv2")
PASSWORD = "correct horse battery"

Config = Literal["warm", "cold"]


class ScenarioError(RuntimeError):
    """A scenario did not behave as scripted, so its numbers would mean nothing."""


@dataclass
class Tally:
    """The AWS activity of one request."""

    calls: list[tuple[str, str]] = field(default_factory=list)  # (service, operation), in call order
    attempts: Counter[str] = field(default_factory=Counter)  # HTTP attempts per service
    other_clients: list[str] = field(default_factory=list)  # calls by clients we do not watch

    def key(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]]:
        """Everything counted, hashable, to check that repetitions agree."""
        return tuple(self.calls), tuple(sorted(self.attempts.items()))


_WATCHED = "nimbus_bench_watched"
_MEASURING: list[Tally] = []  # the tally of the measurement under way, if any


def _on_any_call(event_name: str, context: dict[str, Any], **_: Any) -> None:
    """Every client's ``before-call`` (botocore's builtin handler list reaches every client made
    after this module is imported): a call that no watched client marked in its request context was
    made by another client, and would escape the per-client counters."""
    if _MEASURING and not context.get(_WATCHED):
        _prefix, service, operation = event_name.split(".", 2)
        _MEASURING[-1].other_clients.append(f"{service}.{operation}")


# A public extension point of botocore (moto registers its own handler the same way); every client
# created from now on copies it.
BUILTIN_HANDLERS.append(("before-call", _on_any_call))


class CallCounter:
    """Counts the API calls and HTTP attempts of the functions' cached clients while measuring."""

    def __init__(self, watched: Sequence[BaseClient]) -> None:
        self._tally: Tally | None = None
        for client in watched:
            # First in line: before-call stops at the first handler that answers (fault injection
            # does), and a call answered that way must still be counted.
            client.meta.events.register_first("before-call", self._on_call)
            client.meta.events.register_first("before-send", self._on_send)

    def _on_call(self, event_name: str, context: dict[str, Any], **_: Any) -> None:
        context[_WATCHED] = True
        if self._tally is not None:
            _prefix, service, operation = event_name.split(".", 2)
            self._tally.calls.append((service, operation))

    def _on_send(self, event_name: str, **_: Any) -> None:
        if self._tally is not None:
            self._tally.attempts[event_name.split(".")[1]] += 1

    @contextmanager
    def measure(self) -> Iterator[Tally]:
        """Count everything the watched clients do inside the ``with`` block.

        Calls by any other client are recorded too (``Tally.other_clients``): they would escape the
        per-client counters and make a figure look better than it is.
        """
        tally = Tally()
        self._tally = tally
        _MEASURING.append(tally)
        try:
            yield tally
        finally:
            _MEASURING.remove(tally)
            self._tally = None


@dataclass(frozen=True)
class Budget:
    """A limit on one request's AWS calls; None means "not limited"."""

    text: str
    dynamodb: int | None = None
    ssm: int | None = None
    ses: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class Scenario:
    """One request to measure.

    ``prepare`` does the uncounted setup (users, sessions, clock-dependent items) and returns the
    request itself, so only that request falls inside the counting window.
    """

    name: str
    expected_status: int
    prepare: Callable[[], Callable[[], Reply]]
    budget: Budget | None = None
    config: Config = "warm"
    # Fields the answer's body must hold: a change answered 200 without changing anything (unban
    # of a user who is not banned) would be another code path.
    expect_body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceFigures:
    """Median calls and HTTP attempts of one service, and the operations called in order."""

    calls: int
    attempts: int
    operations: tuple[str, ...]


@dataclass(frozen=True)
class CallRow:
    """The result of one scenario."""

    scenario: str
    function: str
    status: int
    services: dict[str, ServiceFigures]
    constant: bool  # every repetition made exactly the same calls
    budget: Budget | None
    verdict: str  # OK, OVER, or "-" without a budget

    def round_trips(self, service: str) -> int:
        """HTTP attempts to ``service`` (a retried call costs one round trip per attempt)."""
        return self.services[service].attempts

    def total(self) -> int:
        """Round trips to every service."""
        return sum(figures.attempts for figures in self.services.values())


class Harness:
    """Requests, users and sessions for the scenarios, on the in-process API."""

    def __init__(self, api: InProcessApi, session: boto3.Session) -> None:
        self.api = api
        # The bench's own client for setup writes: it is not watched, and setup is never inside
        # a counting window anyway.
        self._dynamodb = session.client("dynamodb")
        self._ssm = session.client("ssm")
        self._sequence = itertools.count(1)

    def unique(self, prefix: str) -> str:
        """A name never used before in this run."""
        return f"{prefix}{next(self._sequence)}"

    def fresh_ip(self) -> str:
        """A source IP never used before: the per-IP rate limits (register: 1 per 6 h) never bite."""
        n = next(self._sequence)
        return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"

    def register(self, username: str) -> str:
        """Register ``username`` (uncounted) and return its session token."""
        reply = self.api.call(
            "POST",
            "/register",
            {"username": username, "email": f"{username}@example.com", "password": PASSWORD},
            ip=self.fresh_ip(),
        )
        _expect(f"setup: register {username}", 201, reply)
        token: str = reply.body["token"]
        return token

    def login(self, username: str) -> str:
        """Log ``username`` in once more (uncounted) and return the new session's token."""
        body = {"username": username, "password": PASSWORD}
        reply = self.api.call("POST", "/login", body, ip=self.fresh_ip())
        _expect(f"setup: login {username}", 201, reply)
        token: str = reply.body["token"]
        return token

    def make_staff(self, token: str) -> str:
        """Give the token's user the staff flag and a TOTP factor (staff endpoints require one);
        the factor's seed."""
        return self.add_totp(token, staff=True)

    def add_totp(self, token: str, *, staff: bool = False) -> str:
        """Give the token's user a TOTP factor no code was used with yet (written directly, so the
        current code answers the next challenge); its seed."""
        parsed = parse_session_token(token)
        if parsed is None:
            raise ScenarioError(f"setup: unreadable session token {token!r}")
        stamp = clock.iso(clock.now())
        factor = SecondFactor(
            id=new_id(),
            type="totp",
            name="Phone",
            created_at=stamp,
            updated_at=stamp,
            secret=new_totp_secret(),
        )
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{parsed.user_id}"}},
            UpdateExpression="SET staff = :t, secondFactors.#f = :factor",
            ExpressionAttributeNames={"#f": factor.id},
            ExpressionAttributeValues={
                ":t": {"BOOL": staff},
                ":factor": {"M": to_item(stored_values(factor))},
            },
        )
        assert factor.secret is not None
        return factor.secret

    def add_key(self, token: str) -> SoftwareAuthenticator:
        """Enrol a software security key through the API (uncounted); the authenticator."""
        key = SoftwareAuthenticator()
        setup = self.api.call("POST", "/users/me/2fa/webauthn", {"password": PASSWORD}, token=token)
        _expect("setup: start a security key", 200, setup)
        body = {
            "token": setup.body["token"],
            "name": "Key",
            "response": key.create(setup.body, origin=self.origin),
        }
        _expect(
            "setup: confirm a security key",
            201,
            self.api.call("POST", "/users/me/2fa/webauthn/confirm", body, token=token),
        )
        return key

    def factor_ids(self, token: str) -> list[str]:
        """The ids of the token's user's second factors (uncounted)."""
        listed = self.api.call("GET", "/users/me/2fa", token=token)
        _expect("setup: list factors", 200, listed)
        return [item["id"] for item in listed.body["items"]]

    @property
    def origin(self) -> str:
        """The page a security key answers from: the deployment's first WebAuthn origin."""
        return get_settings().relying_party().origins[0]

    def challenge(self, method: str, path: str, body: dict[str, Any], token: str | None, ip: str) -> Reply:
        """The first request of a challenged change (uncounted): the 401 with the challenge."""
        reply = self.api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=ip)
        _expect(f"setup: challenge of {method} {path}", 401, reply)
        return reply

    def verification_link(self, address: str, kind: str = "verify-email") -> str:
        """The token of the newest email of ``kind`` (a verification email unless told otherwise)
        queued for ``address`` (read from the outbox, once the recovery requests waiting became
        mail, as the recovery function does after each answer)."""
        if kind == "recover-password":
            _expect("setup: handle recovery requests", 200, self.handle_recovery_requests())
        items = self._dynamodb.scan(TableName=get_settings().outbox_table)["Items"]
        mine = sorted(
            (i for i in items if i["kind"]["S"] == kind and i["to"]["S"] == address),
            key=lambda i: i["createdAt"]["S"],
        )
        if not mine:
            raise ScenarioError(f"setup: no {kind} email for {address}")
        text: str = mine[-1]["text"]["S"]
        return text.split("token=", 1)[1].split(maxsplit=1)[0]

    def handle_recovery_requests(self) -> Reply:
        """Invoke the recovery function once on every recovery request stored, as the outbox
        stream would deliver them (this bench keeps no stream records); 200 when none failed."""
        return self.recovery_invocation()()

    def recovery_invocation(self) -> Callable[[], Reply]:
        """The invocation of the recovery function on the recovery requests stored now (read here,
        uncounted), to run later; it answers 200 when no record failed."""
        table = get_settings().outbox_table
        items = self._dynamodb.scan(
            TableName=table,
            FilterExpression="#k = :k",
            ExpressionAttributeNames={"#k": "kind"},
            ExpressionAttributeValues={":k": {"S": RECOVERY_REQUEST}},
        )["Items"]
        arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}/stream/bench"
        records = [
            lambda_record(
                {
                    "eventName": "INSERT",
                    "dynamodb": {"Keys": {"id": item["id"]}, "NewImage": item, "SequenceNumber": str(n)},
                },
                arn,
            )
            for n, item in enumerate(items, start=1)
        ]
        handler = self.api.handler("RecoveryFunction")

        def invoke() -> Reply:
            answer = handler(lambda_event(records), LambdaContextStub("RecoveryFunction"))
            return Reply(500 if answer.get("batchItemFailures") else 200, answer, {}, "RecoveryFunction")

        return invoke

    def set_user(self, token: str, **values: str) -> None:
        """Write attributes of the token's user directly (``verifiedAt="..."``): a state an
        endpoint starts from, without the requests that would lead there."""
        names = {f"#a{n}": name for n, name in enumerate(values)}
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{token.split('.', maxsplit=1)[0]}"}},
            UpdateExpression="SET " + ", ".join(f"{name} = :v{name[2:]}" for name in names),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={f":v{n}": {"S": value} for n, value in enumerate(values.values())},
        )

    def ban(self, token: str, stamp: str) -> None:
        """Ban the token's user directly, their sessions revoked (the session generation raised)
        as a ban leaves them: a banned user has no sessions."""
        self.set_user(token, bannedAt=stamp, banReason="Spam")
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{token.split('.', maxsplit=1)[0]}"}},
            UpdateExpression="SET sessionGeneration = if_not_exists(sessionGeneration, :zero) + :one",
            ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"}},
        )

    def seed_users(self, count: int) -> None:
        """Store ``count`` user items straight to the table, in batches: what GET /users lists.
        Only the user items (no claims, not in the user count): they never log in."""
        table = get_settings().users_table
        stamp = clock.iso(clock.now())
        items = []
        for _ in range(count):
            name = self.unique("listed")
            user = sample_user(new_id(), name).changed(
                created_at=stamp, updated_at=stamp, domain=get_settings().default_domain
            )
            items.append({"PutRequest": {"Item": user_item(user)}})
        for start in range(0, len(items), 25):
            request: dict[str, Any] = {table: items[start : start + 25]}
            while request:
                request = self._dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    def set_killswitches(self, enabled: Sequence[KillSwitch]) -> None:
        """Store the enabled kill switches directly in SSM (the bench refetches the runtime
        configuration right before each measured request)."""
        for switch, name in parameter_names(get_settings().killswitch_path).items():
            self._ssm.put_parameter(
                Name=name, Value=stored_value(switch in enabled), Type="String", Overwrite=True
            )

    def set_used_at(self, token: str, age_seconds: float) -> None:
        """Write the session's usedAt as ``age_seconds`` ago (what a request that long ago left)."""
        parsed = parse_session_token(token)
        if parsed is None:
            raise ScenarioError(f"setup: unreadable session token {token!r}")
        self._dynamodb.update_item(
            TableName=get_settings().sessions_table,
            Key={"userId": {"S": parsed.user_id}, "sessionId": {"S": parsed.session_id}},
            UpdateExpression="SET usedAt = :u",
            ExpressionAttributeValues={":u": {"S": clock.iso(clock.now() - age_seconds)}},
        )


def _stop_stream_records(keep: Collection[str] = ()) -> None:
    """Make moto's tables, but those named in ``keep``, record no stream (this bench reads none).

    moto keeps every stream record in its table object, and deep-copies each table a
    TransactWriteItems touches (its rollback copy), records included, once per item of the
    transaction: every request would make every later transaction slower, and the run's time grow
    with the square of its requests. Private moto state, hence the care: left as it is if absent.
    """
    from moto.dynamodb.models import dynamodb_backends

    for regions in list(dynamodb_backends.values()):
        for backend in list(regions.values()):
            for table in getattr(backend, "tables", {}).values():
                if getattr(table, "stream_shard", None) is not None and table.name not in keep:
                    table.stream_shard = None


class Leftovers:
    """Deletes what a scenario's setup stored, once the scenario is measured.

    moto's TransactWriteItems copies every table it touches (see :func:`_stop_stream_records`), so
    a transaction takes time in proportion to the tables' size: kept, each scenario's setup would
    slow every later scenario down. What was stored when the scenarios were planned (the shared
    users) stays, and so do the user count's shards (a deletion is counted in the shard of its
    user). Round trips do not depend on the tables' size here (a Query page holds 1 MB).
    """

    def __init__(self, dynamodb: Any) -> None:
        self._client = dynamodb
        self._keys: dict[str, list[str]] = {}
        for page in dynamodb.get_paginator("list_tables").paginate():
            for table in page["TableNames"]:
                schema = dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
                self._keys[table] = [k["AttributeName"] for k in schema]
        self._baseline = {table: set(self._stored(table)) for table in self._keys}

    def _stored(self, table: str) -> dict[tuple[tuple[str, str], ...], dict[str, Any]]:
        """The keys of every item of ``table``, by a hashable form of each."""
        names = {f"#k{n}": name for n, name in enumerate(self._keys[table])}
        found: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        for page in self._client.get_paginator("scan").paginate(
            TableName=table, ProjectionExpression=", ".join(names), ExpressionAttributeNames=names
        ):
            for key in page["Items"]:
                found[tuple(sorted((name, str(value)) for name, value in key.items()))] = key
        return found

    def discard(self) -> None:
        """Delete every item stored since the scenarios were planned (but the count's shards)."""
        for table in self._keys:
            new = [
                key
                for ident, key in self._stored(table).items()
                if ident not in self._baseline[table]
                and not key.get("pk", {}).get("S", "").startswith(COUNT_KEY_PREFIX)
            ]
            for start in range(0, len(new), 25):
                request: dict[str, Any] = {
                    table: [{"DeleteRequest": {"Key": key}} for key in new[start : start + 25]]
                }
                while request:
                    request = (
                        self._client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
                    )


def _expect(what: str, status: int, reply: Reply) -> None:
    if reply.status != status:
        raise ScenarioError(f"{what}: expected HTTP {status}, got {reply.status}: {reply.body}")


REGISTER_BUDGET = Budget("DynamoDB <= 2, SES 0", dynamodb=2, ses=0)
# Each self-service change is authentication + limit + one transaction, and never SES.
CHANGE_BUDGET = Budget("DynamoDB <= 3, SES 0", dynamodb=3, ses=0)
# Asking for a recovery link: the per-IP limit and the request queued, whatever the name.
RECOVER_BUDGET = Budget("DynamoDB <= 2, SES 0", dynamodb=2, ses=0)
# The reset: the per-IP limit, BatchGetItem of token and user, one transaction.
RECOVERY_BUDGET = Budget("DynamoDB <= 3, SES 0", dynamodb=3, ses=0)
# The recovery function, per request: the index Query (and the claim on a miss), one transaction.
REQUEST_BUDGET = Budget("DynamoDB <= 3, SES 0", dynamodb=3, ses=0)
LOGIN_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)
ME_BUDGET = Budget("auth 1 DynamoDB; total <= 1, SSM 0", dynamodb=1, ssm=0, total=1)
# The sessions endpoints' success paths.
SESSION_ME_BUDGET = Budget("DynamoDB 1 (the auth read)", dynamodb=1, total=1)
SESSION_ONE_BUDGET = Budget("DynamoDB <= 2", dynamodb=2)
SESSION_LIST_BUDGET = Budget("DynamoDB <= 2", dynamodb=2)
SCOPED_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)
# Each request of a login or change with a second-factor challenge.
CHALLENGE_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)
LISTED_USERS = 110  # stored for GET /users: two full pages of 50 and more
# A page of GET /users (the staff caller's authentication included).
USERS_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)
# By design: runtime_config reads the nine switches and the log level in one GetParameters.
COLD_BUDGET = Budget("SSM <= 1 (by design)", ssm=1)


def _recovery_scenarios(h: Harness) -> list[Scenario]:
    """Asking for a recovery link, for an account and for a name that is none (the same calls: the
    round trips tell nothing), the recovery function handling each request after the answer, and
    resetting with the mailed token."""

    def recover(known: bool) -> Callable[[], Callable[[], Reply]]:
        def prepare() -> Callable[[], Reply]:
            name, ip = h.unique("rec"), h.fresh_ip()
            if known:
                h.register(name)
            return lambda: h.api.call("POST", "/users/recover", {"username": name}, ip=ip)

        return prepare

    def handle(known: bool) -> Callable[[], Callable[[], Reply]]:
        def prepare() -> Callable[[], Reply]:
            name = h.unique("req")
            if known:
                h.register(name)
            asked = h.api.call("POST", "/users/recover", {"username": name}, ip=h.fresh_ip())
            _expect("setup: recover", 201, asked)
            return h.recovery_invocation()

        return prepare

    def reset() -> Callable[[], Reply]:
        name = h.unique("rst")
        h.register(name)
        asked = h.api.call("POST", "/users/recover", {"username": name}, ip=h.fresh_ip())
        _expect("setup: recover", 201, asked)
        token = h.verification_link(f"{name}@example.com", kind="recover-password")
        body = {"token": token, "newPassword": "another secret", "confirmNewPassword": "another secret"}
        return lambda: h.api.call("PUT", "/users/recover", body, ip=h.fresh_ip())

    return [
        Scenario("POST /users/recover (an account)", 201, recover(known=True), RECOVER_BUDGET),
        Scenario("POST /users/recover (no account)", 201, recover(known=False), RECOVER_BUDGET),
        Scenario("RecoveryFunction: a request (an account)", 200, handle(known=True), REQUEST_BUDGET),
        Scenario("RecoveryFunction: a request (no account)", 200, handle(known=False), REQUEST_BUDGET),
        Scenario("PUT /users/recover", 200, reset, RECOVERY_BUDGET),
    ]


def scenarios(h: Harness) -> list[Scenario]:
    """The scenarios, in table order (their shared users are registered here, uncounted)."""
    login_name = h.unique("login")
    me_token = h.register(h.unique("me"))
    h.register(login_name)

    def post(path: str, body: dict[str, Any]) -> Callable[[], Reply]:
        ip = h.fresh_ip()
        return lambda: h.api.call("POST", path, body, ip=ip)

    def get(path: str, token: str | None = None) -> Callable[[], Reply]:
        return lambda: h.api.call("GET", path, token=token)

    def register() -> Callable[[], Reply]:
        name = h.unique("reg")
        return post("/register", {"username": name, "email": f"{name}@example.com", "password": PASSWORD})

    def wrong_password() -> Callable[[], Reply]:
        # A new account each time: repeated failures on one account would lock it (429).
        name = h.unique("wrong")
        h.register(name)
        return post("/login", {"username": name, "password": "not the password"})

    def me(age_seconds: float) -> Callable[[], Callable[[], Reply]]:
        def prepare() -> Callable[[], Reply]:
            h.set_used_at(me_token, age_seconds)
            return get("/users/me", me_token)

        return prepare

    def change(
        method: str, path: str, body: Callable[[], dict[str, Any]]
    ) -> Callable[[], Callable[[], Reply]]:
        # A fresh user per request: the per-user limits (3 renames a day) never bite.
        def prepare() -> Callable[[], Reply]:
            token = h.register(h.unique("chg"))
            sent = body() | {"password": PASSWORD}
            return lambda: h.api.call(method, path, sent, token=token, ip=h.fresh_ip())

        return prepare

    def verify() -> Callable[[], Reply]:
        name = h.unique("ver")
        h.register(name)
        link = h.verification_link(f"{name}@example.com")
        return lambda: h.api.call("PUT", "/users/verify", {"token": link})

    def delete_me() -> Callable[[], Reply]:
        name = h.unique("del")
        token = h.register(name)
        for _ in range(3):  # three other sessions to delete
            _expect(
                "setup: login",
                201,
                h.api.call("POST", "/login", {"username": name, "password": PASSWORD}, ip=h.fresh_ip()),
            )
        return lambda: h.api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token)

    def own_sessions(
        method: str, path: str, body: dict[str, Any] | None = None, *, others: int = 3
    ) -> Callable[[], Callable[[], Reply]]:
        # A fresh user with `others` more sessions per request; "{other}" is the newest other one.
        def prepare() -> Callable[[], Reply]:
            name = h.unique("ses")
            token = h.register(name)
            logins = [h.login(name) for _ in range(others)]
            other = logins[-1].split(".")[1] if logins else ""
            target = path.format(other=other, uid=token.split(".")[0])
            sent = None if body is None else _fill(body, other)
            return lambda: h.api.call(method, target, sent, token=token, ip=h.fresh_ip())

        return prepare

    def staff_sessions(
        method: str, suffix: str, body: dict[str, Any] | None = None
    ) -> Callable[[], Callable[[], Reply]]:
        def prepare() -> Callable[[], Reply]:
            staff = h.register(h.unique("staff"))
            h.make_staff(staff)
            name = h.unique("target")
            target = h.register(name)
            h.login(name)
            uid, sid = target.split(".")[:2]
            path = f"/users/{uid}/sessions" + suffix.format(sid=sid)
            sent = None if body is None else _fill(body, sid)
            return lambda: h.api.call(method, path, sent, token=staff, ip=h.fresh_ip())

        return prepare

    stale = USED_AT_REFRESH_SECONDS + 300
    return [
        Scenario("POST /register", 201, register, REGISTER_BUDGET),
        Scenario(
            "POST /login (username)",
            201,
            lambda: post("/login", {"username": login_name, "password": PASSWORD}),
            LOGIN_BUDGET,
        ),
        Scenario(
            "POST /login (email)",
            201,
            lambda: post("/login", {"username": f"{login_name}@example.com", "password": PASSWORD}),
            LOGIN_BUDGET,
        ),
        Scenario("POST /login wrong password", 401, wrong_password),
        Scenario(
            "POST /login unknown user",
            404,
            lambda: post("/login", {"username": h.unique("nobody"), "password": PASSWORD}),
        ),
        Scenario("GET /users/me (usedAt recent)", 200, me(0), ME_BUDGET),
        Scenario(f"GET /users/me (usedAt {stale // 60} min old)", 200, me(stale)),
        Scenario("GET /", 200, lambda: get("/")),
        Scenario("GET /no/such/route (404)", 404, lambda: get("/no/such/route")),
        Scenario("GET /users/me, cold config cache", 200, me(0), COLD_BUDGET, config="cold"),
        Scenario(
            "PUT /users/me/username",
            200,
            change("PUT", "/users/me/username", lambda: {"username": h.unique("renamed")}),
            CHANGE_BUDGET,
        ),
        Scenario(
            "PUT /users/me/email",
            200,
            change("PUT", "/users/me/email", lambda: {"email": f"{h.unique('mail')}@example.org"}),
            CHANGE_BUDGET,
        ),
        Scenario(
            "PUT /users/me/password",
            200,
            change(
                "PUT",
                "/users/me/password",
                lambda: {"newPassword": "another secret", "confirmNewPassword": "another secret"},
            ),
            CHANGE_BUDGET,
        ),
        Scenario(
            "PUT /users/me/domain",
            200,
            change(
                "PUT",
                "/users/me/domain",
                lambda: {"domain": get_settings().default_domain, "subdomain": "me"},
            ),
            CHANGE_BUDGET,
        ),
        Scenario("GET /users/me/verify (resend)", 201, lambda: _resend(h), CHANGE_BUDGET),
        Scenario("PUT /users/verify", 200, verify, Budget("DynamoDB <= 2, SES 0", dynamodb=2, ses=0)),
        *_recovery_scenarios(h),
        Scenario("DELETE /users/me (3 other sessions)", 200, delete_me, Budget("SES 0", ses=0)),
        Scenario("GET /domains", 200, lambda: get("/domains", me_token), Budget("DynamoDB <= 2", dynamodb=2)),
        Scenario(
            "GET /domains/:id",
            200,
            lambda: get(f"/domains/{get_settings().default_domain}", me_token),
            Budget("DynamoDB <= 2", dynamodb=2),
        ),
        Scenario("GET /openapi.json", 200, lambda: get("/openapi.json")),
        Scenario(
            "GET /users/me/sessions (4 live)",
            200,
            own_sessions("GET", "/users/me/sessions"),
            SESSION_LIST_BUDGET,
        ),
        Scenario(
            "GET /users/me/sessions/me", 200, own_sessions("GET", "/users/me/sessions/me"), SESSION_ME_BUDGET
        ),
        Scenario(
            "GET /users/me/sessions/:sid (another)",
            200,
            own_sessions("GET", "/users/me/sessions/{other}"),
            SESSION_ONE_BUDGET,
        ),
        Scenario(
            "PATCH /users/me/sessions/:sid",
            200,
            own_sessions("PATCH", "/users/me/sessions/{other}", {"name": "Renamed"}),
            SESSION_ONE_BUDGET,
        ),
        Scenario(
            "DELETE /users/me/sessions/:sid",
            200,
            own_sessions("DELETE", "/users/me/sessions/{other}"),
            SESSION_ONE_BUDGET,
        ),
        Scenario(
            "DELETE /users/me/sessions (2 ids)",
            200,
            own_sessions("DELETE", "/users/me/sessions", {"ids": ["{other}", "me"]}),
        ),
        Scenario(
            "DELETE /users/me/sessions/all (3 others)", 200, own_sessions("DELETE", "/users/me/sessions/all")
        ),
        Scenario(
            "POST /users/me/sessions (scoped)",
            201,
            own_sessions(
                "POST",
                "/users/me/sessions",
                {"name": "CI", "permissionFlags": 4, "password": PASSWORD},
                others=0,
            ),
            SCOPED_BUDGET,
        ),
        Scenario("GET /users/:uid/sessions (staff)", 200, staff_sessions("GET", ""), SESSION_LIST_BUDGET),
        Scenario(
            "GET /users/:uid/sessions/:sid (staff)", 200, staff_sessions("GET", "/{sid}"), SESSION_ONE_BUDGET
        ),
        Scenario(
            "PATCH /users/:uid/sessions/:sid (staff)",
            200,
            staff_sessions("PATCH", "/{sid}", {"name": "x"}),
            SESSION_ONE_BUDGET,
        ),
        Scenario(
            "DELETE /users/:uid/sessions/:sid (staff)",
            200,
            staff_sessions("DELETE", "/{sid}"),
            SESSION_ONE_BUDGET,
        ),
        Scenario(
            "DELETE /users/:uid/sessions (staff)", 200, staff_sessions("DELETE", "", {"ids": ["{other}"]})
        ),
        Scenario("DELETE /users/:uid/sessions/all (staff)", 200, staff_sessions("DELETE", "/all")),
        *_second_factor_scenarios(h),
        *_staff_scenarios(h),
    ]


def _second_factor_scenarios(h: Harness) -> list[Scenario]:
    """Challenged logins and changes, enrolment and listing of second factors."""

    def second_factor(
        method: str, path: str, body: Callable[[], dict[str, Any]], *, step: Literal["ask", "totp", "key"]
    ) -> Callable[[], Callable[[], Reply]]:
        """A fresh user with a factor per request; "ask" measures the challenged first request,
        "totp" and "key" the answering second one. Login's path is unauthenticated."""

        def prepare() -> Callable[[], Reply]:
            name = h.unique("tfa")
            token = h.register(name)
            secret = h.add_totp(token) if step != "key" else ""
            key = h.add_key(token) if step == "key" else None
            caller = None if path == "/login" else token
            sent = body() | ({"username": name} if path == "/login" else {})
            # "{other}" in the path or body: the id of the user's factor.
            factor = h.factor_ids(token)[0] if "{other}" in path or "{other}" in str(sent) else ""
            target, sent = path.format(other=factor), _fill(sent, factor)
            ip = h.fresh_ip()
            if step == "ask":
                return lambda: h.api.call(method, target, sent | {"password": PASSWORD}, token=caller, ip=ip)
            first = h.challenge(method, target, sent, caller, ip)
            if key is not None:
                answer = {"type": "webauthn", "response": key.get(first.body["challenge"], origin=h.origin)}
            else:
                answer = {"type": "totp", "code": pyotp.TOTP(secret).now()}
            two_fa = {"token": first.body["token"], **answer}
            return lambda: h.api.call(method, target, sent | {"2fa": two_fa}, token=caller, ip=ip)

        return prepare

    def factors(method: str, path: str, *, enrolled: bool = True) -> Callable[[], Callable[[], Reply]]:
        """A fresh user (with a TOTP factor unless told otherwise) calling a factor endpoint
        ("{other}" in the path: that factor's id)."""

        def prepare() -> Callable[[], Reply]:
            token = h.register(h.unique("fac"))
            if enrolled:
                h.add_totp(token)
            target = path.format(other=h.factor_ids(token)[0]) if "{other}" in path else path
            return lambda: h.api.call(method, target, {"password": PASSWORD}, token=token, ip=h.fresh_ip())

        return prepare

    def confirm(kind: Literal["totp", "webauthn"]) -> Callable[[], Callable[[], Reply]]:
        def prepare() -> Callable[[], Reply]:
            token = h.register(h.unique("enr"))
            setup = h.api.call("POST", f"/users/me/2fa/{kind}", {"password": PASSWORD}, token=token)
            _expect(f"setup: start {kind}", 200, setup)
            if kind == "totp":
                proof: dict[str, Any] = {"code": pyotp.TOTP(setup.body["secret"]).now()}
            else:
                proof = {"response": SoftwareAuthenticator().create(setup.body, origin=h.origin)}
            body = {"token": setup.body["token"], "name": "New", **proof}
            return lambda: h.api.call("POST", f"/users/me/2fa/{kind}/confirm", body, token=token)

        return prepare

    login_body: Callable[[], dict[str, Any]] = dict
    rename_body: Callable[[], dict[str, Any]] = lambda: {"username": h.unique("tfarenamed")}  # noqa: E731
    # Each request of a challenged login or change stays within 3 round trips.
    challenged = [
        ("POST", "/login", login_body, 201),
        ("PUT", "/users/me/username", rename_body, 200),
    ]
    steps: list[tuple[str, Literal["ask", "totp", "key"]]] = [
        ("challenged", "ask"),
        ("TOTP answer", "totp"),
        ("key answer", "key"),
    ]
    return [
        *(
            Scenario(
                f"{method} {path}, 2FA: {label}",
                401 if step == "ask" else ok,
                second_factor(method, path, body, step=step),
                CHALLENGE_BUDGET,
            )
            for method, path, body, ok in challenged
            for label, step in steps
        ),
        Scenario(
            "POST /users/me/2fa/totp",
            200,
            factors("POST", "/users/me/2fa/totp", enrolled=False),
            CHANGE_BUDGET,
        ),
        Scenario("POST /users/me/2fa/totp/confirm", 201, confirm("totp"), CHANGE_BUDGET),
        Scenario(
            "POST /users/me/2fa/webauthn",
            200,
            factors("POST", "/users/me/2fa/webauthn", enrolled=False),
            CHANGE_BUDGET,
        ),
        Scenario("POST /users/me/2fa/webauthn/confirm", 201, confirm("webauthn"), CHANGE_BUDGET),
        Scenario("GET /users/me/2fa", 200, factors("GET", "/users/me/2fa"), SESSION_ME_BUDGET),
        Scenario("GET /users/me/2fa/:id", 200, factors("GET", "/users/me/2fa/{other}"), SESSION_ME_BUDGET),
        *(
            Scenario(f"{method} {shown}, TOTP answer", status, second_factor(method, path, body, step="totp"))
            for method, shown, path, body, status in (
                ("POST", "/users/me/2fa/backup", "/users/me/2fa/backup", dict, 201),
                ("DELETE", "/users/me/2fa/:id", "/users/me/2fa/{other}", dict, 200),
                ("DELETE", "/users/me/2fa (1 id)", "/users/me/2fa", lambda: {"ids": ["{other}"]}, 200),
                ("DELETE", "/users/me/2fa/all", "/users/me/2fa/all", dict, 200),
            )
        ),
    ]


Scripted = tuple[str, dict[str, Any] | None]  # path and body of a scripted request


def _staff_scenarios(h: Harness) -> list[Scenario]:
    """The staff account endpoints and the runtime-configuration endpoints, each by a
    fresh staff member with a TOTP factor (staff endpoints refuse staff without one).

    Where the endpoint reverifies, the staff member sends the password (the challenge, uncounted)
    and the measured request answers it with the current TOTP code, as a real staff change goes.
    """

    def staffed(
        method: str,
        request: Callable[[], Scripted],
        *,
        reverify: bool = True,
        step: Literal["ask", "totp"] = "totp",
    ) -> Callable[[], Callable[[], Reply]]:
        """``request`` sets up the target (uncounted) and names the path and body; ``step`` "ask"
        measures the challenged first request instead of the answer."""

        def prepare() -> Callable[[], Reply]:
            staff = h.register(h.unique("stf"))
            seed = h.make_staff(staff)
            path, body = request()
            ip = h.fresh_ip()
            if not reverify:
                return lambda: h.api.call(method, path, body, token=staff, ip=ip)
            sent = body or {}
            if step == "ask":
                return lambda: h.api.call(method, path, sent | {"password": PASSWORD}, token=staff, ip=ip)
            first = h.challenge(method, path, sent, staff, ip)
            two_fa = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(seed).now()}
            return lambda: h.api.call(method, path, sent | {"2fa": two_fa}, token=staff, ip=ip)

        return prepare

    def target(
        suffix: str = "", body: dict[str, Any] | Callable[[], dict[str, Any]] | None = None, **setup: Any
    ) -> Callable[[], Scripted]:
        """A fresh user to act on, at ``/users/<id><suffix>`` (``body`` made anew per request when
        it is a function); ``setup`` puts them in the state the endpoint changes: ``verified``,
        ``banned``, ``totp`` (a factor), ``staff``, ``logins`` (more sessions)."""

        def request() -> Scripted:
            name = h.unique("tgt")
            token = h.register(name)
            for _ in range(setup.get("logins", 0)):
                h.login(name)
            if setup.get("staff"):
                h.make_staff(token)
            elif setup.get("totp"):
                h.add_totp(token)
            stamp = clock.iso(clock.now())
            if setup.get("verified"):
                h.set_user(token, verifiedAt=stamp)
            if setup.get("banned"):
                h.ban(token, stamp)
            sent = body() if callable(body) else body
            if "{other}" in suffix or "{other}" in str(sent):  # the id of the target's factor
                factor = h.factor_ids(token)[0]
                suffix_now, sent = suffix.format(other=factor), None if sent is None else _fill(sent, factor)
                return f"/users/{token.split('.')[0]}{suffix_now}", sent
            return f"/users/{token.split('.')[0]}{suffix}", sent

        return request

    def fixed(
        path: str, body: dict[str, Any] | None = None, *, switches: Sequence[KillSwitch] | None = None
    ) -> Callable[[], Scripted]:
        """A request on no user; the kill switches are stored as ``switches`` first if given."""

        def request() -> Scripted:
            if switches is not None:
                h.set_killswitches(switches)
            return path, body

        return request

    def listing(path: str) -> Callable[[], Scripted]:
        """GET /users with ``LISTED_USERS`` more users stored (once per scenario: the users a
        scenario stores are discarded after it) so that its pages are full."""
        seeded = False

        def request() -> Scripted:
            nonlocal seeded
            if not seeded:
                h.seed_users(LISTED_USERS)
                seeded = True
            return path, None

        return request

    def delete_many() -> Scripted:
        ids = [h.register(h.unique("tgt")).split(".")[0] for _ in range(2)]
        return "/users", {"ids": ids}

    def log_level() -> Scripted:
        # The level stored now, so the change leaves the functions' logging as it was.
        return "/loglevel", {"name": container.production_deps().config.current().log_level}

    switch = KillSwitch.FILE_CREATE  # guards no Nimbus endpoint: enabling it disturbs nothing
    domain = {"domain": get_settings().default_domain, "subdomain": "staffset"}
    return [
        # One page of users within 3 round trips (auth, CreatedIndex Query, BatchGetItem).
        Scenario(
            "GET /users (page of 50)", 200, staffed("GET", listing("/users"), reverify=False), USERS_BUDGET
        ),
        Scenario(
            "GET /users?offset=50&limit=50",
            200,
            staffed("GET", listing("/users?offset=50&limit=50"), reverify=False),
            USERS_BUDGET,
        ),
        Scenario("GET /users/:id", 200, staffed("GET", target(), reverify=False)),
        Scenario(
            "GET /users/:uid/2fa (staff)", 200, staffed("GET", target("/2fa", totp=True), reverify=False)
        ),
        Scenario(
            "GET /users/:uid/2fa/:id (staff)",
            200,
            staffed("GET", target("/2fa/{other}", totp=True), reverify=False),
        ),
        Scenario(
            "DELETE /users/:uid/2fa/:id, TOTP answer",
            200,
            staffed("DELETE", target("/2fa/{other}", totp=True)),
        ),
        Scenario(
            "DELETE /users/:uid/2fa (1 id), TOTP answer",
            200,
            staffed("DELETE", target("/2fa", {"ids": ["{other}"]}, totp=True)),
        ),
        Scenario(
            "DELETE /users/:uid/2fa/all, TOTP answer", 200, staffed("DELETE", target("/2fa/all", totp=True))
        ),
        Scenario(
            "PUT /users/:id/username, TOTP answer",
            200,
            staffed("PUT", target("/username", lambda: {"username": h.unique("staffnamed")})),
        ),
        Scenario(
            "PUT /users/:id/email, TOTP answer",
            200,
            staffed("PUT", target("/email", lambda: {"email": f"{h.unique('staffmail')}@example.org"})),
        ),
        Scenario(
            "PUT /users/:id/password, TOTP answer",
            200,
            staffed(
                "PUT",
                target(
                    "/password", {"newPassword": "another secret", "confirmNewPassword": "another secret"}
                ),
            ),
        ),
        Scenario("PUT /users/:id/domain", 200, staffed("PUT", target("/domain", domain), reverify=False)),
        Scenario("PUT /users/:id/verify, TOTP answer", 200, staffed("PUT", target("/verify"))),
        Scenario(
            "DELETE /users/:id/verify, TOTP answer",
            200,
            staffed("DELETE", target("/verify", verified=True)),
            expect_body={"verifiedAt": None},
        ),
        Scenario("GET /users/:id/verify (resend)", 201, staffed("GET", target("/verify"), reverify=False)),
        Scenario(
            "PUT /users/:id/staff, TOTP answer",
            200,
            staffed("PUT", target("/staff", totp=True)),
            expect_body={"staff": True},
        ),
        Scenario(
            "DELETE /users/:id/staff, TOTP answer",
            200,
            staffed("DELETE", target("/staff", staff=True)),
            expect_body={"staff": False},
        ),
        Scenario(
            "PUT /users/:id/ban, challenged",
            401,
            staffed("PUT", target("/ban", {"reason": "Spam"}), step="ask"),
        ),
        Scenario(
            "PUT /users/:id/ban (3 sessions), TOTP answer",
            200,
            staffed("PUT", target("/ban", {"reason": "Spam"}, logins=2)),
            expect_body={"banReason": "Spam"},
        ),
        Scenario(
            "DELETE /users/:id/ban, TOTP answer",
            200,
            staffed("DELETE", target("/ban", banned=True)),
            expect_body={"bannedAt": None},
        ),
        Scenario(
            "DELETE /users/:id (3 sessions), TOTP answer",
            200,
            staffed("DELETE", target(logins=2)),
        ),
        Scenario(
            "DELETE /users (2 ids), TOTP answer",
            200,
            staffed("DELETE", delete_many),
            expect_body={"count": 2},
        ),
        Scenario("GET /killswitches", 200, staffed("GET", fixed("/killswitches"), reverify=False)),
        # The runtime-configuration changes write SSM; each starts from switches that make it write.
        Scenario(
            "PUT /killswitches/:id, TOTP answer",
            200,
            staffed("PUT", fixed(f"/killswitches/{int(switch)}", switches=())),
        ),
        Scenario(
            "DELETE /killswitches/:id, TOTP answer",
            200,
            staffed("DELETE", fixed(f"/killswitches/{int(switch)}", switches=[switch])),
        ),
        Scenario(
            "DELETE /killswitches (1 on), TOTP answer",
            200,
            staffed("DELETE", fixed("/killswitches", switches=[switch])),
        ),
        Scenario("GET /loglevel", 200, staffed("GET", fixed("/loglevel"), reverify=False)),
        Scenario("PATCH /loglevel, TOTP answer", 200, staffed("PATCH", log_level)),
    ]


def _fill(body: dict[str, Any], other: str) -> dict[str, Any]:
    """``body`` with "{other}" (in strings and lists of strings) replaced by a session id."""

    def one(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{other}", other)
        if isinstance(value, list):
            return [one(v) for v in value]
        return value

    return {key: one(value) for key, value in body.items()}


def _resend(h: Harness) -> Callable[[], Reply]:
    token = h.register(h.unique("resend"))
    return lambda: h.api.call("GET", "/users/me/verify", token=token, ip=h.fresh_ip())


def _set_config(config: Config) -> None:
    """Put the runtime-config cache in the state the scenario is about.

    Warm: fetched a moment ago. The cache lives ``config_cache_seconds`` (10 s) and a repetition
    with argon2 and moto can take a noticeable part of that, so the bench refetches right before
    each measured request instead of hoping the entry has not expired. Cold: nothing cached, as
    in a new container.
    """
    deps = container.production_deps()
    forget = getattr(deps.config, "forget", None)
    if forget is not None:
        forget()
    if config == "warm":
        deps.config.current()


def run_scenario(scenario: Scenario, counter: CallCounter, repetitions: int) -> CallRow:
    """Measure ``scenario`` ``repetitions`` times after one discarded warm-up request."""
    tallies: list[Tally] = []
    reply: Reply | None = None
    for repetition in range(repetitions + 1):
        send = scenario.prepare()
        _set_config(scenario.config)
        with counter.measure() as tally:
            reply = send()
        _expect(scenario.name, scenario.expected_status, reply)
        wrong = {k: reply.body.get(k) for k, v in scenario.expect_body.items() if reply.body.get(k) != v}
        if wrong:
            raise ScenarioError(f"{scenario.name}: expected {dict(scenario.expect_body)}, got {wrong}")
        if tally.other_clients:
            raise ScenarioError(f"{scenario.name}: calls by unwatched clients: {tally.other_clients}")
        if repetition:  # repetition 0 warms lazy imports and first-use caches on this path
            tallies.append(tally)
    assert reply is not None  # repetitions + 1 >= 1
    services = {service: _figures(service, tallies) for service in SERVICES}
    row = CallRow(
        scenario=scenario.name,
        function=reply.function,
        status=reply.status,
        services=services,
        constant=len({t.key() for t in tallies}) == 1,
        budget=scenario.budget,
        verdict="-",
    )
    return replace(row, verdict=_verdict(row))


def _figures(service: str, tallies: Sequence[Tally]) -> ServiceFigures:
    # median_low keeps whole numbers; with constant figures every statistic is the same anyway.
    calls = statistics.median_low([sum(1 for s, _ in t.calls if s == service) for t in tallies])
    attempts = statistics.median_low([t.attempts[service] for t in tallies])
    sequences = Counter(tuple(op for s, op in t.calls if s == service) for t in tallies)
    return ServiceFigures(calls=calls, attempts=attempts, operations=sequences.most_common(1)[0][0])


def _verdict(row: CallRow) -> str:
    budget = row.budget
    if budget is None:
        return "-"
    limits = (
        (budget.dynamodb, row.round_trips("dynamodb")),
        (budget.ssm, row.round_trips("ssm")),
        (budget.ses, row.round_trips("sesv2")),
        (budget.total, row.total()),
    )
    return "OVER" if any(limit is not None and value > limit for limit, value in limits) else "OK"


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` (and drop real-AWS settings) for the block; restore everything after."""
    saved = dict(os.environ)
    for name in UNSET_AWS:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


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
    try:
        # Metrics (EMF) are printed, not logged: they go to the same buffer.
        with redirect_stdout(buffer):
            yield buffer
    finally:
        for handler, stream in redirected:
            handler.setStream(stream)


def _reset_caches() -> None:
    """Forget settings, clients and runtime config, as the integration tests do between cases."""
    get_settings.cache_clear()
    container.reset()


def measure_calls(template: Template, repetitions: int) -> list[CallRow]:
    """Provision moto from ``template``, warm every function, and measure every scenario."""
    with _environment(FAKE_AWS), mock_aws():
        provision(boto3.Session(region_name=REGION), template)
        _stop_stream_records()
        api = InProcessApi(template)
        # Before any handler import: Powertools reads its environment when the module loads.
        os.environ.update(api.environment())
        _reset_caches()
        try:
            for logical_id in api.specs:
                api.handler(logical_id)  # import every handler now, as a warm container has
            counter = CallCounter([clients.dynamodb(), clients.ssm(), clients.sesv2()])
            with _function_logs_captured() as logs:
                harness = Harness(api, boto3.Session(region_name=REGION))
                try:
                    planned = scenarios(harness)
                    leftovers = Leftovers(boto3.Session(region_name=REGION).client("dynamodb"))
                    rows = []
                    for scenario in planned:
                        rows.append(run_scenario(scenario, counter, repetitions))
                        leftovers.discard()
                    return rows
                except ScenarioError as error:
                    tail = "\n".join(logs.getvalue().splitlines()[-20:])
                    raise ScenarioError(f"{error}\n--- last function log lines ---\n{tail}") from None
        finally:
            _reset_caches()


def _cell(figures: ServiceFigures) -> str:
    text = str(figures.attempts)
    if figures.attempts != figures.calls:
        text += f" ({figures.calls} call{'' if figures.calls == 1 else 's'})"
    if figures.operations:
        text += " " + ", ".join(figures.operations)
    return text


def format_calls(rows: Sequence[CallRow], repetitions: int) -> str:
    """The calls table, with how its figures were measured."""
    headers = ["Scenario", "HTTP", "DynamoDB round trips", "SSM", "SES", "Budget", "Verdict"]
    body = [
        [
            row.scenario + ("" if row.constant else " (varies!)"),
            str(row.status),
            _cell(row.services["dynamodb"]),
            _cell(row.services["ssm"]),
            _cell(row.services["sesv2"]),
            row.budget.text if row.budget else "-",
            row.verdict,
        ]
        for row in rows
    ]
    how = (
        f"Measured: median of {repetitions} requests per scenario after 1 discarded warm-up, handlers in "
        "process on moto, SSM config cached just before each warm request; counts are HTTP attempts "
        "(botocore before-send) on the 3 cached clients, '(n calls)' = before-call count when retries differ."
    )
    return "\n".join([render(headers, body), how])


def calls_json(rows: Sequence[CallRow]) -> list[dict[str, Any]]:
    """The rows as plain data for ``--json``."""
    return [
        {
            "scenario": row.scenario,
            "function": row.function,
            "status": row.status,
            "constant": row.constant,
            "services": {
                name: {"calls": f.calls, "attempts": f.attempts, "operations": list(f.operations)}
                for name, f in row.services.items()
            },
            "budget": row.budget.text if row.budget else None,
            "verdict": row.verdict,
        }
        for row in rows
    ]
