"""What each of the functions' SDK choices buys (``python -m bench --only sdk``; docs/performance.md)."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any, cast

from bench.runs import Report, aws_environment, child_env, result_line, round_robin, run_child
from bench.table import render

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

    from nimbus_tools.template import Template

USER_ID = "01JD0000000000000000000000"
TABLE = "UsersTable"
# The answer of the authentication read, the shape DynamoDB gives (one user, one session).
CANNED = {
    "dynamodb.BatchGetItem": {
        "Responses": {TABLE: [{"pk": {"S": f"USER#{USER_ID}"}, "username": {"S": "alice"}}]},
        "UnprocessedKeys": {},
    }
}
REQUEST: dict[str, Any] = {
    "RequestItems": {TABLE: {"Keys": [{"pk": {"S": f"USER#{USER_ID}"}}], "ConsistentRead": True}}
}

# Cold variants: the code a fresh interpreter runs, timed from before its first SDK import.
COLD = {
    "boto3.client": (
        "import boto3\n"
        "session = boto3.session.Session()\n"
        "aws.install(session)\n"
        "client = session.client('dynamodb')\n"
    ),
    "botocore, default data": (
        "import botocore.session\n"
        "session = botocore.session.get_session()\n"
        "aws.install(session)\n"
        "client = session.create_client('dynamodb')\n"
    ),
    "botocore, trimmed data": (
        "from nimbus_core.adapters import clients\n"
        "session = clients.session()\n"
        "aws.install(session)\n"
        "client = session.create_client('dynamodb')\n"
    ),
    "ours (trimmed data + options)": (
        "from nimbus_core.adapters import clients\n"
        "aws.install(clients.session())\n"
        "client = clients.dynamodb()\n"
    ),
}
# What a library costs where Nimbus writes its own (docs/decisions/), beside ours: the import alone,
# or, after "(after X)", only what it adds to X (X imported first, then the clock restarted).
_LOGGER = "from aws_lambda_powertools import Logger\nLogger()\n"
_AFTER_LOGGER = _LOGGER + "started = time.process_time()\n"
_AFTER_BOTOCORE = "import botocore.session\nstarted = time.process_time()\n"
_RESOLVER = _AFTER_LOGGER + "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver\n"
LIBRARIES = {
    "bare boto3 handler: boto3 + DynamoDB client": "import boto3\nclient = boto3.client('dynamodb')\n",
    "ours: accounts_api.handler": "import accounts_api.handler\n",
    "ours: accounts_api.handler + DynamoDB client": (
        "import accounts_api.handler\nfrom nimbus_core.adapters import clients\nclient = clients.dynamodb()\n"
    ),
    "Powertools Logger": _LOGGER,
    "APIGatewayHttpResolver() (after Logger)": _RESOLVER + "APIGatewayHttpResolver()\n",
    "APIGatewayHttpResolver(enable_validation=True) (after Logger)": (
        _RESOLVER + "APIGatewayHttpResolver(enable_validation=True)\n"
    ),
    "ours: http.routing, http.event, http.responses (after Logger)": (
        _AFTER_LOGGER
        + "import nimbus_core.http.routing, nimbus_core.http.event, nimbus_core.http.responses\n"
    ),
    "ours: http.app, with the guard and its rules (after Logger)": (
        _AFTER_LOGGER + "import nimbus_core.http.app\n"
    ),
    "Powertools get_parameters_by_name (after botocore.session)": (
        _AFTER_BOTOCORE + "from aws_lambda_powertools.utilities.parameters import get_parameters_by_name\n"
    ),
    "boto3 TypeSerializer + TypeDeserializer (after botocore.session)": (
        _AFTER_BOTOCORE + "from boto3.dynamodb.types import TypeDeserializer, TypeSerializer\n"
    ),
    "ours: adapters.items (after domain.models)": (
        "import nimbus_core.domain.models\nstarted = time.process_time()\nimport nimbus_core.adapters.items\n"
    ),
}
_IMPORT_CHILD = """
import time
started = time.process_time()
{setup}
print("SDK_RESULT", (time.process_time() - started) * 1000)
"""
_CHILD = """
import json, time
from bench.aws_hook import CannedAws
aws = CannedAws({canned})
started = time.process_time()
{setup}
client.batch_get_item(**{request})
print("SDK_RESULT", (time.process_time() - started) * 1000)
"""


def _cold_once(setup: str, child: str = _CHILD) -> float:
    code = child.format(canned=CANNED, setup=setup, request=REQUEST)
    return float(result_line(run_child(["-c", code], child_env({}), timeout=120).stdout, "SDK_RESULT "))


def measure_cold(runs: int, variants: dict[str, str] = COLD, child: str = _CHILD) -> dict[str, float]:
    """Median CPU ms of each variant in fresh interpreters (round-robin, one warm-up): by default the
    cold variants' import + client + first call."""
    # The warm-up warms the page cache and writes bytecode, equal for all.
    samples = round_robin(list(variants), runs, lambda name: _cold_once(variants[name], child))
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_warm(rounds: int = 31, batch: int = 200) -> dict[str, float]:
    """Median CPU us per BatchGetItem for each set of client options, on one process's clients."""
    from botocore.config import Config

    from bench.aws_hook import CannedAws
    from nimbus_core.adapters import clients

    clients.reset()
    with aws_environment():  # read as the clients are made
        session = clients.session()
        CannedAws(CANNED).install(session)
        # The retry policy of clients.CONFIG for all: only the options measured differ.
        defaults = Config(retries={"mode": "standard", "total_max_attempts": 3})
        options = {
            "botocore defaults": defaults,
            "fixed User-Agent": defaults.merge(Config(user_agent=clients.USER_AGENT)),
            "parameter validation off": defaults.merge(Config(parameter_validation=False)),
            "both (clients.CONFIG)": clients.CONFIG,
        }
        made = {
            name: cast("DynamoDBClient", session.create_client("dynamodb", config=config))
            for name, config in options.items()
        }
    for client in made.values():
        for _ in range(50):
            client.batch_get_item(**REQUEST)
    samples: dict[str, list[float]] = {name: [] for name in made}
    for index in range(rounds):
        order = list(made.items())
        for name, client in order if index % 2 == 0 else reversed(order):
            started = time.process_time()
            for _ in range(batch):
                client.batch_get_item(**REQUEST)
            samples[name].append((time.process_time() - started) * 1e6 / batch)
    clients.reset()
    return {name: statistics.median(values) for name, values in samples.items()}


def run(template: Template, runs: int) -> Report:
    """The three tables, ``runs`` fresh interpreters per cold variant."""
    libraries, cold, warm = measure_cold(runs, LIBRARIES, _IMPORT_CHILD), measure_cold(runs), measure_warm()
    first_cold, first_warm = next(iter(cold.values())), next(iter(warm.values()))
    cold_rows = [[name, f"{ms:.1f}", f"{ms / first_cold:.2f}x"] for name, ms in cold.items()]
    warm_rows = [[name, f"{us:.0f}", f"{us / first_warm:.2f}x"] for name, us in warm.items()]
    lib_rows = [[name, f"{ms:.1f}"] for name, ms in libraries.items()]
    table = "\n".join(
        [
            render(
                ["Cold: import + client + first BatchGetItem", "CPU ms", "vs boto3"],
                cold_rows,
                frozenset({1, 2}),
            ),
            f"Medians of {runs} fresh interpreters per variant (round-robin, after one warm-up each).",
            "",
            render(["Warm: one BatchGetItem", "CPU us", "vs defaults"], warm_rows, frozenset({1, 2})),
            "Medians of 31 batches of 200 calls per client, alternating their order.",
            "",
            render(["Import only (docs/decisions/)", "CPU ms"], lib_rows, frozenset({1})),
            f"Medians of {runs} fresh interpreters per variant (round-robin, after one warm-up each).",
        ]
    )
    return Report(table, {"cold_ms": cold, "warm_us": warm, "libraries_ms": libraries}, [])
