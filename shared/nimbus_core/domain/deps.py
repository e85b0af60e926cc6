"""The ports a request's rules work with, bundled once per container.

Handlers get :func:`nimbus_core.adapters.container.production_deps` (DynamoDB, SSM, the wall
clock); tests build a :class:`Deps` from the in-memory fakes and run the same app in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from nimbus_core.domain.ports import (
    ChallengeStore,
    Clock,
    CounterStore,
    DomainStore,
    Outbox,
    RuntimeConfigSource,
    SessionStore,
    TokenStore,
    Transactor,
    UserStore,
)
from nimbus_core.platform.settings import Settings


@dataclass(frozen=True, slots=True)
class Deps:
    """Everything outside the rules: stores, runtime configuration, time, deployment settings."""

    settings: Settings
    clock: Clock
    config: RuntimeConfigSource
    tx: Transactor
    users: UserStore
    sessions: SessionStore
    counters: CounterStore
    tokens: TokenStore
    domains: DomainStore
    outbox: Outbox
    challenges: ChallengeStore
