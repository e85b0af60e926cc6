"""The `stores` fixture: every port, from the fakes or from the DynamoDB adapters on moto.

moto is the integration layer's stack, provisioned once per session and emptied per test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from nimbus_core.adapters.counters import DynamoCounters
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.ports import (
    CounterStore,
    DomainStore,
    Outbox,
    SessionStore,
    TokenStore,
    Transactor,
    UserStore,
)
from tests.fakes import fake_world
from tests.integration.conftest import Stack, _provisioned, stack

__all__ = ["_provisioned", "stack"]


@dataclass
class Stores:
    """The ports under test, and a way to count what the outbox holds."""

    kind: str
    users: UserStore
    sessions: SessionStore
    counters: CounterStore
    tokens: TokenStore
    domains: DomainStore
    outbox: Outbox
    tx: Transactor
    outbox_size: Callable[[], int]


def _dynamo(stack: Stack) -> Stores:
    client: Any = stack.dynamodb
    users_table = stack.table("UsersTable")
    return Stores(
        kind="dynamo",
        users=DynamoUsers(client, users_table),
        sessions=DynamoSessions(client, stack.table("SessionsTable"), users_table),
        counters=DynamoCounters(client, stack.table("CountersTable")),
        tokens=DynamoTokens(client, stack.table("TokensTable"), users_table),
        domains=DynamoDomains(client, stack.table("DomainsTable")),
        outbox=DynamoOutbox(client, stack.table("OutboxTable")),
        tx=DynamoTransactor(client),
        outbox_size=lambda: len(stack.items("OutboxTable")),
    )


def _fake() -> Stores:
    world = fake_world()
    deps = world.deps
    return Stores(
        kind="fake",
        users=deps.users,
        sessions=deps.sessions,
        counters=deps.counters,
        tokens=deps.tokens,
        domains=deps.domains,
        outbox=deps.outbox,
        tx=deps.tx,
        outbox_size=lambda: len(world.db.outbox),
    )


@pytest.fixture(params=["fake", "dynamo"])
def stores(request: pytest.FixtureRequest) -> Stores:
    """Every port, from one implementation."""
    if request.param == "fake":
        return _fake()
    return _dynamo(request.getfixturevalue("stack"))
