"""AWS SDK clients, created lazily once per container (no I/O at import time).

The clients are botocore's, the core that boto3 wraps, used through their public surface only: a
boto3 client is this same botocore client, and boto3's package ``__init__`` would import s3transfer
and its resource layer on every cold start for features no function uses. The SDK is the one pinned
by ``uv.lock`` and shipped in the DepsLayer: on Lambda a layer's ``/opt/python`` comes before the
runtime's own copy on ``sys.path``, so production runs the botocore the tests ran.

Each client is built from botocore's data cut to what the functions use (``aws_models/``, written
by ``make aws-models`` from that same pinned botocore; a test fails when they differ): each
service's model with only the operations the functions call, its endpoint rules, and
``endpoints.json`` with only these services. The session's loader searches that directory alone,
so a cold start neither lists botocore's hundreds of service directories nor parses its full
endpoint data. The session knows no other service: credentials come from the environment (the
function's role on Lambda, test keys locally); a profile that assumes a role through STS or SSO is
for the operator's tools (``nimbus_tools``, their own botocore sessions), not for these clients.

Timeouts are short and retries bounded so a slow dependency becomes a clean 500, never a hang.
``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every client at the local emulator.
The User-Agent is a fixed string: botocore otherwise rebuilds its structured one (SDK metadata
and feature ids) on every call. Parameter validation is off: every request is built by our typed
adapters, and DynamoDB and SSM validate it again on their side.
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

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_kms import KMSClient
    from types_boto3_sesv2 import SESV2Client
    from types_boto3_sqs import SQSClient
    from types_boto3_ssm import SSMClient

# Fixed: botocore otherwise rebuilds its structured User-Agent on every call.
USER_AGENT = f"nimbus/{__version__} botocore/{botocore.__version__} Python/{platform.python_version()}"
CONFIG = Config(
    connect_timeout=2,
    read_timeout=5,
    retries={"mode": "standard", "total_max_attempts": 3},
    tcp_keepalive=True,
    parameter_validation=False,
    user_agent=USER_AGENT,
)
# SES is called only by the mail function, which retries with its own backoff and then dead-letters:
# one SDK attempt per call keeps the total bounded and every attempt visible to that policy.
SINGLE_ATTEMPT = CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 1}))
# SSM is read by the runtime configuration, which retries within its own budget: botocore's
# throttling backoff can outlast the request. One attempt ends within these timeouts, so the budget
# can tell whether another still fits.
SSM_CONNECT_SECONDS, SSM_READ_SECONDS = 0.5, 1.0
SSM_ATTEMPT_SECONDS = SSM_CONNECT_SECONDS + SSM_READ_SECONDS
SSM_CONFIG = SINGLE_ATTEMPT.merge(Config(connect_timeout=SSM_CONNECT_SECONDS, read_timeout=SSM_READ_SECONDS))


MODELS_DIR = Path(__file__).parent / "aws_models"


@cache
def data_loader() -> Loader:
    """botocore's loader of our data directory alone (botocore's default paths would have every
    lookup list every service it knows). It caches what it parsed, which is the same for every
    session and instance, so :func:`reset` keeps it."""
    return Loader(extra_search_paths=[str(MODELS_DIR)], include_default_search_paths=False)


@cache
def session() -> botocore.session.Session:
    """The botocore session every client of this container is made from (events registered on
    it reach every client created afterwards)."""
    made = botocore.session.get_session()
    made.register_component("data_loader", data_loader())
    return made


@cache
def dynamodb() -> DynamoDBClient:
    """The DynamoDB client."""
    return cast("DynamoDBClient", session().create_client("dynamodb", config=CONFIG))


@cache
def ssm() -> SSMClient:
    """The SSM client."""
    return cast("SSMClient", session().create_client("ssm", config=SSM_CONFIG))


@cache
def sesv2() -> SESV2Client:
    """The SES v2 client."""
    return cast("SESV2Client", session().create_client("sesv2", config=SINGLE_ATTEMPT))


@cache
def sqs() -> SQSClient:
    """The SQS client (the mail function's dead-letter queue)."""
    return cast("SQSClient", session().create_client("sqs", config=CONFIG))


@cache
def kms() -> KMSClient:
    """The KMS client (TOTP secrets' data keys: built by the first seal or unseal only)."""
    return cast("KMSClient", session().create_client("kms", config=CONFIG))


def reset() -> None:
    """Forget every client, the session and its credentials (tests switch endpoints and
    credentials between cases; a SnapStart restore must not reuse them)."""
    for factory in (session, dynamodb, ssm, sesv2, sqs, kms):
        factory.cache_clear()
