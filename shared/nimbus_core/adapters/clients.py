"""boto3 clients, created lazily once per container (no I/O at import time).

Timeouts are short and retries bounded so a slow dependency becomes a clean 500, never a hang.
``AWS_ENDPOINT_URL`` (honoured by boto3 itself) points every client at the local emulator.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_sesv2 import SESV2Client
    from types_boto3_sqs import SQSClient
    from types_boto3_ssm import SSMClient

_CONFIG = Config(
    connect_timeout=2,
    read_timeout=5,
    retries={"mode": "standard", "total_max_attempts": 3},
    tcp_keepalive=True,
)
# SES is called only by the mail function, which retries with its own backoff and then dead-letters:
# one SDK attempt per call keeps the total bounded and every attempt visible to that policy.
_SINGLE_ATTEMPT = _CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 1}))


@cache
def _session() -> boto3.session.Session:
    return boto3.session.Session()


@cache
def dynamodb() -> DynamoDBClient:
    """The DynamoDB client."""
    return _session().client("dynamodb", config=_CONFIG)


@cache
def ssm() -> SSMClient:
    """The SSM client."""
    return _session().client("ssm", config=_CONFIG)


@cache
def sesv2() -> SESV2Client:
    """The SES v2 client."""
    return _session().client("sesv2", config=_SINGLE_ATTEMPT)


@cache
def sqs() -> SQSClient:
    """The SQS client (the mail function's dead-letter queue)."""
    return _session().client("sqs", config=_CONFIG)


def reset() -> None:
    """Forget every client (tests switch endpoints and credentials between cases)."""
    for factory in (_session, dynamodb, ssm, sesv2, sqs):
        factory.cache_clear()
