"""The production dependencies of a function: built once per container, on first use."""

from __future__ import annotations

from functools import cache

from nimbus_core.adapters import clients
from nimbus_core.adapters.activity import DynamoActivity
from nimbus_core.adapters.counters import DynamoCounters
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.kms import KmsKeys
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.runtime_config import SsmRuntimeConfig
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.deps import Deps
from nimbus_core.platform.clock import SystemClock
from nimbus_core.platform.settings import get_settings


@cache
def production_deps() -> Deps:
    """The DynamoDB/SSM adapters for this container's settings (no I/O until first used)."""
    settings = get_settings()
    dynamodb = clients.dynamodb()
    return Deps(
        settings=settings,
        clock=SystemClock(),
        config=SsmRuntimeConfig(
            clients.ssm(),
            killswitch_path=settings.killswitch_path,
            log_level_parameter=settings.log_level_parameter,
            max_age=settings.config_cache_seconds,
        ),
        tx=DynamoTransactor(dynamodb),
        users=DynamoUsers(dynamodb, settings.users_table),
        sessions=DynamoSessions(
            dynamodb, settings.sessions_table, settings.users_table, settings.tokens_table
        ),
        counters=DynamoCounters(dynamodb, settings.counters_table),
        tokens=DynamoTokens(dynamodb, settings.tokens_table, settings.users_table),
        domains=DynamoDomains(dynamodb, settings.domains_table),
        outbox=DynamoOutbox(dynamodb, settings.outbox_table),
        # The KMS client is built by the first TOTP secret sealed or opened: no other request pays.
        sealer=Sealer(lambda: KmsKeys(clients.kms()), key_id=settings.totp_key, stage=settings.stage),
        activity=DynamoActivity(dynamodb, settings.activity_table),
    )


def reset() -> None:
    """Forget the built dependencies and clients (tests change settings and endpoints)."""
    production_deps.cache_clear()
    clients.reset()
