"""The store contract: one suite, two implementations of every port.

``stores`` yields a :class:`Stores` bundle built either from the in-memory fakes (``tests/fakes``)
or from the DynamoDB adapters on moto, with tables created from template.yaml once per test session
(per xdist worker). Tests isolate themselves with fresh ids made while they run, so they share the
session's tables safely. A :class:`Probe` looks at what was stored where no port method can, so
"nothing was written" is checked against the storage itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import boto3
import pytest
from moto import mock_aws

from nimbus_core.adapters.counters import DynamoCounters
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.adapters.transactions import DynamoTransactor, TransactOp
from nimbus_core.adapters.user_items import COUNT_KEY_PREFIX, user_item
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.deployment_ports import CounterStore, DomainStore, Outbox
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import Transactor
from nimbus_core.domain.token_ports import TokenStore
from nimbus_core.domain.user_ports import SessionStore, UserStore
from nimbus_tools.local.provision import provision
from nimbus_tools.template import load_template
from tests.fakes import (
    FakeCounters,
    FakeDb,
    FakeDomains,
    FakeOutbox,
    FakeSessions,
    FakeTokens,
    FakeTransactor,
    FakeUsers,
)

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

REGION = "us-east-1"
PARAMS = {"VerificationUrl": "https://files.test/verify?token={token}", "DefaultDomain": "nimbus.test"}
# Query pages are forced this small on moto, so paging code (sessions, domains) really pages.
PAGE = 7
_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


class Probe(Protocol):
    """What a test may look at beyond the ports (never used by services)."""

    def claim_owner(self, kind: str, key: str) -> str | None:
        """The user id holding the ``username``/``email`` claim ``key``, or None."""
        ...

    def outbox_to(self, address: str) -> list[str]:
        """The kinds of the queued emails addressed to ``address``."""
        ...

    def store_unsharded(self, user: User) -> None:
        """Create ``user`` as a release from before the list shards did: listed under the one
        ``USERS`` partition and counted in one of the 16 count shards of that time."""
        ...


@dataclass(frozen=True)
class Stores:
    """Every store port of one implementation, the transactor that commits their ops, and a probe."""

    name: str
    users: UserStore
    sessions: SessionStore
    counters: CounterStore
    tokens: TokenStore
    domains: DomainStore
    outbox: Outbox
    tx: Transactor
    probe: Probe


class _FakeProbe:
    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def claim_owner(self, kind: str, key: str) -> str | None:
        table = self.db.usernames if kind == "username" else self.db.emails
        return table.get(username_key(key) if kind == "username" else email_key(key))

    def outbox_to(self, address: str) -> list[str]:
        return [kind for kind, email in self.db.outbox if email.to == address]

    def store_unsharded(self, user: User) -> None:
        # The fakes model no index partitions: a user from before the shards is a user.
        FakeTransactor(self.db).commit(FakeUsers(self.db).create_ops(user))


class _DynamoProbe:
    def __init__(self, client: DynamoDBClient, tables: dict[str, str]) -> None:
        self.client = client
        self.tables = tables

    def claim_owner(self, kind: str, key: str) -> str | None:
        pk = f"USERNAME#{username_key(key)}" if kind == "username" else f"EMAIL#{email_key(key)}"
        item = self.client.get_item(
            TableName=self.tables["UsersTable"], Key={"pk": {"S": pk}}, ConsistentRead=True
        ).get("Item")
        return item["userId"]["S"] if item else None

    def outbox_to(self, address: str) -> list[str]:
        items = self.client.scan(  # tests only: the service never scans
            TableName=self.tables["OutboxTable"],
            FilterExpression="#to = :to",
            ExpressionAttributeNames={"#to": "to"},
            ExpressionAttributeValues={":to": {"S": address}},
        )["Items"]
        return [str(from_item(item)["kind"]) for item in items]

    def store_unsharded(self, user: User) -> None:
        table = self.tables["UsersTable"]
        _, *claims, count = DynamoUsers(self.client, table).create_ops(user)
        item = {**user_item(user), "listPartition": {"S": "USERS"}}
        shard = {"pk": {"S": f"{COUNT_KEY_PREFIX}{zlib.crc32(user.id.encode()) % 16}"}}
        ops = [
            TransactOp({"Put": {"TableName": table, "Item": item}}),
            *claims,
            TransactOp({"Update": {**cast("TransactOp", count).op["Update"], "Key": shard}}),
        ]
        DynamoTransactor(self.client).commit(ops)


class _SmallPages:
    """The DynamoDB client with every Query limited to :data:`PAGE` items (unless it sets its own)."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._client = client

    def query(self, **kwargs: Any) -> Any:
        kwargs.setdefault("Limit", PAGE)
        return self._client.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass(frozen=True)
class _Moto:
    client: DynamoDBClient
    tables: dict[str, str]

    def ensure_provisioned(self) -> None:
        """Provision again if another suite's fresh moto wiped the backends meanwhile."""
        if self.tables["UsersTable"] not in self.client.list_tables()["TableNames"]:
            provision(boto3.Session(region_name=REGION), load_template(), PARAMS)


@pytest.fixture(scope="session")
def _moto() -> Iterator[_Moto]:
    """moto with the template's tables, provisioned ONCE per test session (per xdist worker)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in _ENV.items():
            patch.setenv(key, value)
        patch.delenv("AWS_ENDPOINT_URL", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        with mock_aws():
            provisioned = provision(boto3.Session(region_name=REGION), load_template(), PARAMS)
            yield _Moto(boto3.client("dynamodb", region_name=REGION), provisioned.tables)


def _fake_stores() -> Stores:
    db = FakeDb()
    return Stores(
        name="fake",
        users=FakeUsers(db),
        sessions=FakeSessions(db),
        counters=FakeCounters(db),
        tokens=FakeTokens(db),
        domains=FakeDomains(db),
        outbox=FakeOutbox(db),
        tx=FakeTransactor(db),
        probe=_FakeProbe(db),
    )


def _dynamo_stores(moto: _Moto) -> Stores:
    moto.ensure_provisioned()
    client = cast("DynamoDBClient", _SmallPages(moto.client))
    t = moto.tables
    return Stores(
        name="dynamodb",
        users=DynamoUsers(client, t["UsersTable"]),
        sessions=DynamoSessions(client, t["SessionsTable"], t["UsersTable"], t["TokensTable"]),
        counters=DynamoCounters(client, t["CountersTable"]),
        tokens=DynamoTokens(client, t["TokensTable"], t["UsersTable"]),
        domains=DynamoDomains(client, t["DomainsTable"]),
        outbox=DynamoOutbox(client, t["OutboxTable"]),
        tx=DynamoTransactor(client),
        probe=_DynamoProbe(moto.client, t),
    )


@pytest.fixture(params=["fake", "dynamodb"])
def stores(request: pytest.FixtureRequest) -> Stores:
    """Every store of one implementation: the fakes, or the DynamoDB adapters on moto."""
    if request.param == "fake":
        return _fake_stores()
    moto: _Moto = request.getfixturevalue("_moto")
    return _dynamo_stores(moto)
