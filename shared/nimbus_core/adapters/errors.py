"""Turning botocore's exceptions into the domain's, inside the adapters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from nimbus_core.domain.errors import DependencyError


def error_code(exc: ClientError) -> str:
    """The AWS error code of a ClientError (e.g. ``ConditionalCheckFailedException``)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextmanager
def aws_errors(operation: str) -> Iterator[None]:
    """Re-raise any botocore failure inside the block as :class:`DependencyError`."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise DependencyError(f"{operation} failed: {exc}") from exc
