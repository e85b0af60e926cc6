"""The session sweeper on moto: how long it takes to delete one user's 5,000 stale sessions, and
the DynamoDB calls it makes to do so.

The user's generation is bumped (as revoke-all does) after 5,000 sessions were stored; the users
table's stream record of that change is read from moto and filtered by the template's
FilterCriteria, and the sweep function's handler runs on it in this process, warm (imported, its
runtime configuration cached), with every call of its cached clients counted (``before-call`` per
API call, ``before-send`` per HTTP attempt). The time is moto's, in process: a real table answers
each call in milliseconds over the network, so only the call counts carry over to AWS.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from moto import mock_aws

from bench.calls import FAKE_AWS, REGION, CallCounter, _environment, _function_logs_captured, _reset_caches
from bench.table import render
from nimbus_core.adapters import clients, container
from nimbus_core.adapters.sessions import session_item
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.models import Session, User
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.session_issuer import revoke_all
from nimbus_core.sessions.tokens import hash_secret
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub
from nimbus_tools.local.provision import provision
from nimbus_tools.local.streams import StreamReader, lambda_event, latest_stream_arn, matches
from nimbus_tools.template import Template, stream_subscriptions
from tests.samples import sample_user

STALE = 5_000
CURRENT = 3  # sessions of the new generation, which must stay
FUNCTION = "SweepFunction"


class SweepBenchError(RuntimeError):
    """The sweep did not do what it must, so its figures would describe something else."""


@dataclass(frozen=True)
class SweepRun:
    """One sweep of one user's stale sessions."""

    seconds: float
    operations: dict[str, int]  # DynamoDB operation -> API calls
    attempts: int  # DynamoDB HTTP attempts (more than the calls if the SDK retried)
    ssm_calls: int


@dataclass(frozen=True)
class SweepResult:
    """Every run; figures are their medians."""

    runs: list[SweepRun]

    @property
    def seconds(self) -> float:
        """Median wall time of one sweep."""
        return statistics.median(r.seconds for r in self.runs)

    def calls(self, operation: str) -> int:
        """Median API calls of one DynamoDB operation."""
        return statistics.median_low(r.operations.get(operation, 0) for r in self.runs)

    @property
    def dynamodb_calls(self) -> int:
        """Median DynamoDB API calls of one sweep."""
        return statistics.median_low(sum(r.operations.values()) for r in self.runs)


def _user() -> User:
    stamp = iso(time.time())
    name = f"sweep{new_id().lower()}"
    user: User = sample_user(new_id(), name).changed(created_at=stamp, updated_at=stamp)
    return user


def _sessions(user: User, count: int) -> list[Session]:
    stamp = iso(time.time())
    return [
        Session(
            user_id=user.id,
            id=new_id(),
            secret_hash=hash_secret(new_id()),
            name="Firefox 132 on Ubuntu",
            exp=int(time.time()) + 3650 * 86400,
            created_at=stamp,
            updated_at=stamp,
            used_at=stamp,
            permission_flags=None,
            generation=user.session_generation,
        )
        for _ in range(count)
    ]


def _store(dynamodb: Any, table: str, sessions: list[Session]) -> None:
    """Batch puts (setup, uncounted)."""
    for start in range(0, len(sessions), 25):
        request: dict[str, Any] = {
            table: [{"PutRequest": {"Item": session_item(s)}} for s in sessions[start : start + 25]]
        }
        while request:
            request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}


def _stored(dynamodb: Any, table: str, user_id: str) -> set[str]:
    found: set[str] = set()
    start: dict[str, Any] | None = None
    while True:
        page = dynamodb.query(
            TableName=table,
            KeyConditionExpression="userId = :u",
            ExpressionAttributeValues={":u": {"S": user_id}},
            ProjectionExpression="sessionId",
            **({"ExclusiveStartKey": start} if start else {}),
        )
        found |= {i["sessionId"]["S"] for i in page["Items"]}
        start = page.get("LastEvaluatedKey")
        if not start:
            return found


def _run_once(template: Template, api: InProcessApi, reader: StreamReader, counter: CallCounter) -> SweepRun:
    settings = get_settings()
    setup = boto3.client("dynamodb", region_name=REGION)  # the bench's own client, never counted
    [subscription] = [s for s in stream_subscriptions(template) if s.function == FUNCTION]
    while reader.read(1000):
        pass  # earlier runs' records
    user = _user()
    DynamoTransactor(setup).commit(DynamoUsers(setup, settings.users_table).create_ops(user))
    _store(setup, settings.sessions_table, _sessions(user, STALE))
    revoked = revoke_all(user)
    DynamoTransactor(setup).commit(DynamoUsers(setup, settings.users_table).change_ops(user, revoked))
    current = _sessions(revoked, CURRENT)
    _store(setup, settings.sessions_table, current)
    records = [r for r in reader.read(1000) if matches(r, subscription.filter_patterns)]
    if len(records) != 1 or records[0]["eventName"] != "MODIFY":
        raise SweepBenchError(f"expected one MODIFY record of the user, got {records}")
    handler = api.handler(FUNCTION)
    container.production_deps().config.current()  # warm: runtime configuration cached
    with counter.measure() as tally:
        started = time.perf_counter()
        answer = handler(lambda_event(records), LambdaContextStub(FUNCTION))
        seconds = time.perf_counter() - started
    if answer != {"batchItemFailures": []}:
        raise SweepBenchError(f"the sweep reported failures: {answer}")
    if tally.other_clients:
        raise SweepBenchError(f"calls by unwatched clients: {tally.other_clients}")
    left = _stored(setup, settings.sessions_table, user.id)
    if left != {s.id for s in current}:
        raise SweepBenchError(f"{len(left)} sessions left, expected the {CURRENT} current ones")
    operations = Counter(op for service, op in tally.calls if service == "dynamodb")
    return SweepRun(
        seconds=seconds,
        operations=dict(operations),
        attempts=tally.attempts["dynamodb"],
        ssm_calls=sum(1 for service, _ in tally.calls if service == "ssm"),
    )


def measure_sweep(template: Template, repetitions: int = 3) -> SweepResult:
    """Provision moto from ``template`` and sweep a fresh user's stale sessions ``repetitions`` times."""
    with _environment(FAKE_AWS), mock_aws():
        provision(boto3.Session(region_name=REGION), template)
        api = InProcessApi(template)
        os.environ.update(api.environment())
        _reset_caches()
        try:
            api.handler(FUNCTION)  # imported, as in a warm container
            streams = boto3.client(
                "dynamodbstreams", region_name=REGION, config=Config(account_id_endpoint_mode="disabled")
            )
            reader = StreamReader(
                streams,
                latest_stream_arn(boto3.client("dynamodb", region_name=REGION), get_settings().users_table),
                "LATEST",
            )
            counter = CallCounter([clients.dynamodb(), clients.ssm()])
            with _function_logs_captured():
                return SweepResult([_run_once(template, api, reader, counter) for _ in range(repetitions)])
        finally:
            _reset_caches()


def format_sweep(result: SweepResult) -> str:
    """The one-row table and how it was measured."""
    per_op = ", ".join(
        f"{result.calls(op)} {op}" for op in ("GetItem", "Query", "BatchWriteItem") if result.calls(op)
    )
    table = render(
        ["Stale sessions", "Kept", "Sweep s (moto)", "DynamoDB calls", "Of which", "SSM"],
        [
            [
                f"{STALE:,}",
                str(CURRENT),
                f"{result.seconds:.2f}",
                str(result.dynamodb_calls),
                per_op,
                str(statistics.median_low(r.ssm_calls for r in result.runs)),
            ]
        ],
        right=frozenset({0, 1, 2, 3, 5}),
    )
    return (
        f"{table}\nMeasured: median of {len(result.runs)} sweeps of a fresh user whose generation was bumped "
        f"after {STALE:,} sessions were stored; the sweep function's handler in process on moto, warm, fed "
        "the users stream's record; calls counted on its cached clients. Query pages = Query calls; "
        "BatchWriteItem = ceil(stale / 25) plus any retries of unprocessed items."
    )


def sweep_json(result: SweepResult) -> dict[str, Any]:
    """The result as plain data for ``--json``."""
    return {
        "stale_sessions": STALE,
        "kept_sessions": CURRENT,
        "seconds": round(result.seconds, 3),
        "dynamodb_calls": result.dynamodb_calls,
        "operations": {op: result.calls(op) for op in ("GetItem", "Query", "BatchWriteItem")},
        "runs": [{"seconds": round(r.seconds, 3), "operations": r.operations} for r in result.runs],
    }
