"""Lambda entry point of the sweep function (the users table's stream, keys only): wiring only.

Each record names a user item that changed or was removed (FilterCriteria keep claim items and
inserts out); the user's stale sessions are deleted by :mod:`sweep_api.service`. Batches go
through :func:`nimbus_core.platform.stream_batch.process_batch`: the records whose sweep raised are reported
for the stream to retry; sweeping again is harmless.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core.adapters import snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.adapters.users import user_id_from_key
from nimbus_core.domain.loglevels import apply_log_level
from nimbus_core.platform.stream_batch import process_batch
from sweep_api.service import Sweeper

logger = Logger()
snapstart.register_hooks()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Sweep the stale sessions of every user named by a stream batch; report the ones to retry."""
    _apply_log_level()
    sweeper = Sweeper(production_deps())

    def record_handler(record: DynamoDBRecord) -> None:
        raw: dict[str, Any] = record.raw_event
        user_id = user_id_from_key((raw.get("dynamodb") or {}).get("Keys") or {})
        if raw.get("eventName") not in ("MODIFY", "REMOVE") or user_id is None:
            logger.warning("ignoring a stream record that is not a changed or removed user item")
            return
        sweeper.sweep(user_id)

    return process_batch(event, context, record_handler)


def _apply_log_level() -> None:
    apply_log_level(logger, production_deps)  # SSM unavailable: the level stays, sweeping goes on
