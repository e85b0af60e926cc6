"""Lambda entry point of the activity function (the outbox table's stream, items that carry an
event): wiring only.

FilterCriteria hand it the INSERTs of kind ``activity`` and of the notices and ban mail, whose
``event`` each carries; :func:`activity_api.service.store` stores it. Batches go through
:func:`nimbus_core.platform.stream_batch.process_batch`: the records whose handling raised are
reported for the stream to retry.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from activity_api.service import store
from nimbus_core.adapters import snapstart
from nimbus_core.adapters.activity_items import event_from_image
from nimbus_core.adapters.container import production_deps
from nimbus_core.domain.loglevels import apply_log_level
from nimbus_core.platform.stream_batch import new_item_handler, process_batch

logger = Logger()
snapstart.register_hooks()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Store the event of every new outbox item of a DynamoDB stream batch; report the ones to retry."""
    apply_log_level(logger, production_deps)  # SSM unavailable: the level stays, events go on
    deps = production_deps()

    handler = new_item_handler(
        event_from_image, lambda carried: store(deps, carried), what="an item carrying an activity event"
    )
    return process_batch(event, context, handler)
