"""AWS SDK clients, created lazily once per container (no I/O at import time).

The clients are botocore's, the core that boto3 wraps: boto3's package ``__init__`` imports
s3transfer and its resource layer, about 100 ms of every cold start for features no function uses
(clients are all we need, and a boto3 client is this same botocore client).

Each client is built from botocore's data cut to what the functions use (``aws_models/``, written
by ``make aws-models`` from botocore's own files): each service's model with only the operations
the functions call, its endpoint rules, and ``endpoints.json`` with only these services. The
session's loader searches that directory alone. With botocore's own data, the first client of a
cold start parsed 1.2 MB of endpoints and listed 440 service directories (about 100 ms), and
SSM's whole model cost about 45 ms more. The session knows no other service: credentials come from
the environment (the function's role on Lambda, test keys locally); a profile that assumes a role
through STS or SSO is for the operator's tools (``nimbus_tools``, plain boto3), not for these clients.

DynamoDB, on every request's path, is called through ``DynamoDBWire``: the botocore client's
model, endpoint, HTTP session, retry policy, events and exceptions, without botocore's generic
per-call serialise/sign/parse walk (about three quarters of a warm request's CPU besides argon2).

Timeouts are short and retries bounded so a slow dependency becomes a clean 500, never a hang.
``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every client at the local emulator.
The User-Agent is a fixed string: botocore otherwise rebuilds its structured one (SDK metadata
and feature ids) twice on every call, about a sixth of the SDK's CPU per call on the warm path.
Parameter validation is off: every request is built by our typed adapters, DynamoDB and SSM
validate it again on their side, and on the warm path it is about a tenth of the SDK's CPU per call.
"""

from __future__ import annotations

import platform
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

import botocore
import botocore.session
from botocore.config import Config
from botocore.loaders import Loader

from nimbus_core import __version__
from nimbus_core.adapters.dynamodb_wire import DynamoDBWire

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
    parameter_validation=False,
    user_agent=f"nimbus/{__version__} botocore/{botocore.__version__} Python/{platform.python_version()}",
)
# SES is called only by the mail function, which retries with its own backoff and then dead-letters:
# one SDK attempt per call keeps the total bounded and every attempt visible to that policy.
_SINGLE_ATTEMPT = _CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 1}))


MODELS_DIR = Path(__file__).parent / "aws_models"


@cache
def _session() -> botocore.session.Session:
    session = botocore.session.get_session()
    # Only ours: botocore's default paths would have every lookup list all 440 of its services.
    session.register_component(
        "data_loader", Loader(extra_search_paths=[str(MODELS_DIR)], include_default_search_paths=False)
    )
    return session


@cache
def dynamodb() -> DynamoDBClient:
    """The DynamoDB client: botocore's, called through :class:`DynamoDBWire` (its operations, events
    and errors, without botocore's generic serialise/parse walk on every call)."""
    session = _session()
    client = session.create_client("dynamodb", config=_CONFIG)
    return cast("DynamoDBClient", DynamoDBWire(client, session.get_credentials()))


@cache
def ssm() -> SSMClient:
    """The SSM client."""
    return cast("SSMClient", _session().create_client("ssm", config=_CONFIG))


@cache
def sesv2() -> SESV2Client:
    """The SES v2 client."""
    return cast("SESV2Client", _session().create_client("sesv2", config=_SINGLE_ATTEMPT))


@cache
def sqs() -> SQSClient:
    """The SQS client (the mail function's dead-letter queue)."""
    return cast("SQSClient", _session().create_client("sqs", config=_CONFIG))


def reset() -> None:
    """Forget every client (tests switch endpoints and credentials between cases)."""
    for factory in (_session, dynamodb, ssm, sesv2, sqs):
        factory.cache_clear()
