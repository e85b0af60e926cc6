"""The ports a request's rules work with, bundled once per container.

Handlers get :func:`nimbus_core.adapters.container.production_deps` (DynamoDB, SSM, the wall
clock); tests build a :class:`Deps` from the in-memory fakes and run the same app in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nimbus_core.platform.settings import Settings

if TYPE_CHECKING:
    from nimbus_core.domain.deployment_ports import CounterStore, DomainStore, Outbox, RuntimeConfigSource
    from nimbus_core.domain.ports import Clock, SecretSealer, Transactor
    from nimbus_core.domain.token_ports import TokenStore
    from nimbus_core.domain.user_ports import ActivityStore, SessionStore, UserStore


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
    sealer: SecretSealer
    activity: ActivityStore
