"""Lambda entry point of the recovery function (the outbox table's stream, recovery requests
only): wiring only.

FilterCriteria hand it the INSERTs of kind ``recover-request`` (the mail function's exclude them);
each becomes a recovery mail, or nothing, by :func:`recovery_api.service.handle_request`. Batches
go through :func:`nimbus_core.platform.stream_batch.process_batch`: the records whose handling raised are
reported for the stream to retry; handling a request again does nothing.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from nimbus_core.adapters import snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.adapters.outbox import recovery_request_from_image
from nimbus_core.domain.loglevels import apply_log_level
from nimbus_core.platform import clock
from nimbus_core.platform.stream_batch import new_item_handler, process_batch
from recovery_api.service import handle_request

logger = Logger()
snapstart.register_hooks()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Handle every recovery request of a DynamoDB stream batch; report the ones to retry."""
    _apply_log_level()
    deps = production_deps()

    handler = new_item_handler(
        recovery_request_from_image,
        lambda request: handle_request(deps, request, clock.now()),
        what="a recovery request",
    )
    return process_batch(event, context, handler)


def _apply_log_level() -> None:
    apply_log_level(logger, production_deps)  # SSM unavailable: the level stays, requests go on
