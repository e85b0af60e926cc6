"""Every AWS call of every endpoint scenario, failed in turn.

The scenarios are the ones ``make bench`` counts round trips with (bench/scenarios.py: one or more per
registered endpoint, derived from its registration, each a setup and the one request measured;
tests/tools/unit/test_bench_scenarios.py keeps them covering every endpoint), one test each. For
each scenario, the setup is made once and the tables and the runtime configuration as it left them
are kept; a clean run records the request's AWS calls in order; then, for each call and each way it
can fail, the tables and configuration are put back as the setup left them (the same state a new
setup would make, for a fraction of its AWS calls and argon2 work), that one call fails, and:

- the answer is the scenario's own (the failure was absorbed) or a clean, documented error: a 500
  ``INTERNAL_SERVER_ERROR`` for a dependency failure, or, where a write's condition failed as if a
  concurrent request had changed the item, a documented 4xx of the endpoint (the integration API
  checks every error body against the endpoint's OpenAPI errors), or the write made again on a
  fresh read (the retry then succeeds). Another request can fail a claim of a name the client chose,
  a check that the user item is as read (its version: generation, names, hash, pending links), a
  token, challenge or counter window spent, a counter at its limit. One kind of condition no other
  request can fail: a new item's ``attribute_not_exists`` of a key the request made up at random
  (``FRESH_KEYS``, each with why: a new id, the hash of a new 256-bit secret). Only a collision of
  random values, or a bug, fails it, and the honest answer to that is a clean 500, never a user's
  error;
- a 500 is for the failed call alone: any other exception the functions answered it for (a bug in
  verifying a second factor, say) is named as one;
- the tables are whole (tests/invariants.py): no half-written change. The setup's state is checked
  once; after a run that left the tables item for item as the setup did (a write failed, or nothing
  was written), there is nothing new to check;
- the account's activity loses an event only with the request's own change (the request failed:
  the event rode its transaction, or the notice it queued), or when the event's own write failed
  (the one PutItem of a failure that writes nothing else): that write failing never changes the
  answer, the request answers as its clean run did (CONTRACT section 17);
- a retry of the same request, with AWS well again, converges to the scenario's own answer. A
  request that carried a second-factor answer may instead hear that the answer is spent (401
  INVALID_SECOND_FACTOR_RESPONSE_ERROR): an answer is recorded before a write no transaction can
  carry it into (SSM, the later batches of a multi-user deletion) and is never accepted twice
  (CONTRACT 13). There, converging means what the person does next: asking again with the
  password and answering the new challenge with the next code, which must then succeed.

The ways to fail: throttling after the SDK's retries or a 500 from the service (both where the
functions tell them apart, else one of the two, call by call in turn: ``failures_of``), a timeout
(the SDK raising, as a read timeout does once its retries are spent), and for a conditional write,
its condition failing (ConditionalCheckFailed; for TransactWriteItems, each conditioned item's in turn).
A failed condition comes with the item as stored (what ReturnValuesOnConditionCheckFailure=ALL_OLD
returns): the concurrent writer changed nothing the request can see, so a request that decides on
that item, or reads again, must go on to its own answer.

Every failed run starts from the state its setup left: the tables and SSM parameters put back, and
the instance's memory of what it learnt from them (the rate limiter's refusals) forgotten.

The functions' clock stands still at the moment the setup ended for all of a scenario's runs, so
each run meets the state the setup left at the time it left it: a TOTP code or a challenge the
setup made for the request is as fresh in the last run as in the first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import boto3
import pyotp
import pytest
from aws_lambda_powertools import Logger
from botocore.awsrequest import HeadersDict
from botocore.exceptions import ReadTimeoutError
from botocore.model import OperationModel
from botocore.parsers import create_parser

from bench.harness import Harness
from bench.scenarios import Scenario, scenarios
from nimbus_core.adapters import clients, container
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.limiter import memo_for
from nimbus_core.domain.ports import CounterState
from nimbus_core.platform import clock
from nimbus_tools.local.faults import SdkAnswer
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.moto_internals import TablesSnapshot, restore_tables, snapshot_tables, tables_hold
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import load_template
from tests.integration.conftest import PARAMS, REGION, Api, Clock, Stack
from tests.invariants import stack_violations
from tests.samples import PASSWORD

pytestmark = pytest.mark.long  # seconds per scenario

# The scenarios' names, for one test each (pytest-xdist spreads them over its workers). Only the
# names: scenarios() binds the harness into each scenario's setup, which runs in the test.
SCENARIOS = [scenario.name for scenario in scenarios(cast(Harness, None))]

# (service, code, HTTP status) of the service-side failures, per botocore service name.
THROTTLED = {
    "dynamodb": ("ProvisionedThroughputExceededException", 400),
    "ssm": ("ThrottlingException", 400),
    "sesv2": ("TooManyRequestsException", 429),
    "kms": ("ThrottlingException", 400),
}
BROKEN = {"dynamodb": ("InternalServerError", 500), "ssm": ("InternalServerError", 500)}
BROKEN["sesv2"] = ("InternalServerErrorException", 500)
BROKEN["kms"] = ("KMSInternalException", 500)


@dataclass(frozen=True)
class Failure:
    """How the ``index``-th AWS call of the request fails."""

    index: int
    kind: str  # "throttled", "broken", "timeout" or "condition"
    item: int | None = None  # for a TransactWriteItems condition: the item whose condition fails

    def describe(self, calls: list[tuple[str, str, dict[str, Any]]]) -> str:
        service, operation, _ = calls[self.index]
        where = f" (item {self.item})" if self.item is not None else ""
        if self.kind == "condition":
            kind, action = conditioned_write(self, calls)
            where += f" [{kind} {action.get('TableName')} if {action.get('ConditionExpression')}]"
        return f"call {self.index + 1} {service}.{operation}{where}: {self.kind}"


def conditioned_write(
    failure: Failure, calls: list[tuple[str, str, dict[str, Any]]]
) -> tuple[str, dict[str, Any]]:
    """The write whose condition ``failure`` fails: its kind (Put, Update, Delete, ConditionCheck;
    for a single write, its operation) and its parameters."""
    _service, operation, params = calls[failure.index]
    if failure.item is None:
        return operation.removesuffix("Item"), params
    ((kind, action),) = params["TransactItems"][failure.item].items()
    return kind, action


@dataclass(frozen=True)
class FreshKey:
    """New items stored under a key attribute whose value the request made up at random, each
    guarded by ``attribute_not_exists`` of that attribute: no other request can name the key."""

    table: str  # the table's logical id
    attribute: str  # the key attribute the request made up
    prefix: str  # how its value starts ("" for any)
    why: str


FRESH_KEYS = (
    FreshKey("UsersTable", "pk", "USER#", "a new account's id (ids.new_id: 80 random bits a millisecond)"),
    FreshKey("SessionsTable", "sessionId", "", "a new session's id (ids.new_id)"),
    FreshKey("OutboxTable", "id", "", "a new message's id (ids.new_id)"),
    FreshKey("TokensTable", "pk", "VERIFY#", "the hash of a new verification link's 256-bit secret"),
    FreshKey("TokensTable", "pk", "RECOVER#", "the hash of a new recovery link's 256-bit secret"),
    FreshKey("TokensTable", "pk", "CHALLENGE#", "the hash of a new challenge token's 256-bit secret"),
    FreshKey("TokensTable", "pk", "ENROL#", "the hash of a new enrolment token's 256-bit secret"),
)


def fresh_key(
    failure: Failure, calls: list[tuple[str, str, dict[str, Any]]], tables: dict[str, str]
) -> FreshKey | None:
    """The fresh key whose condition ``failure`` fails (``tables``: logical id -> table name), or
    None: a condition another request can fail, which must be answered as the endpoint documents."""
    kind, action = conditioned_write(failure, calls)
    if kind != "Put":
        return None
    item = action.get("Item", {})
    for key in FRESH_KEYS:
        value = next(iter(item.get(key.attribute, {}).values()), None)
        if (
            action.get("TableName") == tables.get(key.table)
            and action.get("ConditionExpression") == f"attribute_not_exists({key.attribute})"
            and isinstance(value, str)
            and value.startswith(key.prefix)
        ):
            return key
    return None


def _alike(call: tuple[str, str, dict[str, Any]]) -> str:
    """What a call asks, leaving out the values it asks it for: the calls of one loop (a query
    per list shard, the pages of one query) are alike."""
    service, operation, params = call
    shape = {k: v for k, v in params.items() if k not in ("ExpressionAttributeValues", "ExclusiveStartKey")}
    return json.dumps([service, operation, shape], sort_keys=True, default=str)


def representatives(calls: list[tuple[str, str, dict[str, Any]]]) -> list[int]:
    """The indexes of the calls to fail: of each run of alike calls in a row, the first and the
    last. The calls between them go through the same code with other values (a listing's
    thirty-odd shard queries), so failing each of them would prove nothing more, at the cost of a
    whole request and a check of every table per call; the first and the last prove the loop
    stops cleanly before any result and after all the others."""
    kept: list[int] = []
    for index, call in enumerate(calls):
        starts_run = index == 0 or _alike(calls[index - 1]) != _alike(call)
        ends_run = index == len(calls) - 1 or _alike(calls[index + 1]) != _alike(call)
        if starts_run or ends_run:
            kept.append(index)
    return kept


def tells_throttling_apart(call: tuple[str, str, dict[str, Any]], counters_table: str | None) -> bool:
    """Whether the functions answer a throttled ``call`` otherwise than one the service failed: a
    rate counter's write (a throttled partition is its caller going too fast: a 429) and SES's send
    (a throttled message waits in its stream). Every other error of a call is a dependency failure,
    whatever its code (``nimbus_core.adapters.errors``): a bare 500, and SSM's cache keeps its value
    through either."""
    service, operation, params = call
    if service == "sesv2":
        return True
    return service == "dynamodb" and operation == "UpdateItem" and params.get("TableName") == counters_table


def failures_of(
    calls: list[tuple[str, str, dict[str, Any]]], counters_table: str | None = None
) -> list[Failure]:
    """Every way each call to fail (``representatives``) can fail. A throttle and a service error
    take one path through the functions except where a call ``tells_throttling_apart``, which meets
    both; elsewhere the calls meet one of the two in turn, so each scenario meets both."""
    planned: list[Failure] = []
    for turn, index in enumerate(representatives(calls)):
        _service, operation, params = calls[index]
        if tells_throttling_apart(calls[index], counters_table):
            planned += [Failure(index, "throttled"), Failure(index, "broken")]
        else:
            planned.append(Failure(index, ("throttled", "broken")[turn % 2]))
        planned.append(Failure(index, "timeout"))
        if operation == "TransactWriteItems":
            for item, entry in enumerate(params.get("TransactItems", [])):
                (action,) = entry.values()
                if "ConditionExpression" in action:
                    planned.append(Failure(index, "condition", item))
        elif "ConditionExpression" in params:
            planned.append(Failure(index, "condition"))
    return planned


def _sent(request: dict[str, Any]) -> dict[str, Any]:
    """A call's parameters as the service reads them: its JSON body (DynamoDB, SSM and KMS send all
    of them there; SESv2 the message), so a write's conditions and transaction items can be planned
    from it."""
    body = request.get("body")
    if not body:
        return {}
    try:
        decoded = json.loads(body)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


@dataclass
class CallWatch:
    """Records the functions' AWS calls, and fails one of them when armed."""

    api: Api
    reader: Any  # a DynamoDB client of the test's own: what a failed condition found stored
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    clean_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # the failed ones' plan
    failure: Failure | None = None
    failed: bool = False
    unhandled: list[BaseException] = field(default_factory=list)  # what a 500 was answered for
    _hooked: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self) -> None:
        """Watch the clients the functions use now (a container reset builds new ones)."""
        for client in (clients.dynamodb(), clients.ssm(), clients.sesv2(), clients.kms()):
            if not any(client is hooked for hooked in self._hooked):
                client.meta.events.register_first("before-call", self._before_call)
                self._hooked.append(client)

    def unhook(self) -> None:
        """Take the watch off every client."""
        while self._hooked:
            self._hooked.pop().meta.events.unregister("before-call", self._before_call)

    def start(self, failure: Failure | None) -> None:
        """Forget the calls seen; fail as ``failure`` says (None: let every call through)."""
        self.hook()
        self.calls, self.failure, self.failed = [], failure, False
        self.unhandled.clear()

    def _before_call(self, model: OperationModel, params: dict[str, Any], **_: Any) -> Any:
        request = params  # botocore's "before-call" hands over the serialized request
        service = model.service_model.service_name
        sent = _sent(request)
        with self._lock:
            index = len(self.calls)
            self.calls.append((service, model.name, sent))
        if self.failure is None or self.failure.index != index:
            return None
        self.failed = True
        if self.failure.kind == "timeout":
            raise ReadTimeoutError(endpoint_url=f"https://{service}.{REGION}.amazonaws.com/")
        return _error_answer(model, service, self.failure, sent, self._stored)

    def _stored(self, action: dict[str, Any]) -> dict[str, Any] | None:
        """The item a write names, as stored now (what DynamoDB returns with ALL_OLD)."""
        table = action["TableName"]
        schema = self.reader.describe_table(TableName=table)["Table"]["KeySchema"]
        source = action.get("Key") or action["Item"]
        key = {k["AttributeName"]: source[k["AttributeName"]] for k in schema}
        found: dict[str, Any] | None = self.reader.get_item(
            TableName=table, Key=key, ConsistentRead=True
        ).get("Item")
        return found


class UnhandledErrors(logging.Handler):
    """Collects the exceptions the functions answer 500 for (logged as "unhandled error")."""

    def __init__(self, into: list[BaseException]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "unhandled error" and record.exc_info and record.exc_info[1]:
            self.into.append(record.exc_info[1])


def _error_answer(
    model: OperationModel,
    service: str,
    failure: Failure,
    params: dict[str, Any],
    stored: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> Any:
    """The HTTP error AWS would send, parsed by botocore's own parser (as the emulator's faults).
    A failed condition is one a concurrent writer caused: with ALL_OLD asked for, the error carries
    the item as stored (here: as it is, so the write built on it is simply stale)."""
    body: dict[str, Any] = {"message": "injected fault"}
    if failure.kind == "condition" and failure.item is not None:
        code, status = "TransactionCanceledException", 400
        reasons: list[dict[str, Any]] = [{"Code": "None"} for _ in params["TransactItems"]]
        (action,) = params["TransactItems"][failure.item].values()
        reason: dict[str, Any] = {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
        }
        if action.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and (old := stored(action)):
            reason["Item"] = old
        reasons[failure.item] = reason
        body["CancellationReasons"] = reasons
    elif failure.kind == "condition":
        code, status = "ConditionalCheckFailedException", 400
        if params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and (old := stored(params)):
            body["Item"] = old
    else:
        code, status = (THROTTLED if failure.kind == "throttled" else BROKEN)[service]
    protocol = model.service_model.protocol
    if protocol == "json":
        body["__type"] = code
        version = "1.0" if service == "dynamodb" else "1.1"
        headers = HeadersDict({"Content-Type": f"application/x-amz-json-{version}"})
    else:
        headers = HeadersDict({"Content-Type": "application/json", "x-amzn-ErrorType": code})
    raw = json.dumps(body).encode()
    response = {"status_code": status, "headers": headers, "body": raw}
    parser = create_parser(protocol)
    parsed: dict[str, Any] = parser.parse(response, cast(Any, model.output_shape))
    # The error's own fields (a cancelled transaction's reasons, the item a failed condition found),
    # as botocore's endpoint adds them in a second pass after parsing the error.
    # botocore-stubs types the code as an int; botocore keys its error shapes by the code's name.
    if (error_shape := model.service_model.shape_for_error_code(cast(Any, code))) is not None:
        parsed.update(parser.parse(response, error_shape))
    return SdkAnswer(status, headers, raw), parsed


# ---------------------------------------------------------------------------------------------- the run


# Stream-fed functions answer a failed dependency by reporting the record, which the stream delivers
# again: their "clean 500" (the retry below then checks that it converges).
STREAM_FUNCTIONS = frozenset(s.function for s in stream_subscriptions(load_template()))


def _is_clean_500(reply: Reply) -> bool:
    if not (reply.status == 500 and isinstance(reply.body, dict)):
        return False
    if reply.function in STREAM_FUNCTIONS:
        return bool(reply.body.get("batchItemFailures"))
    return reply.body.get("code") == "INTERNAL_SERVER_ERROR"


def _acceptable_first(scenario: Scenario, failure: Failure, reply: Reply, fresh: FreshKey | None) -> bool:
    if reply.status == scenario.expected_status:
        return True
    if failure.kind == "throttled" and reply.status == 429:
        # A throttled rate counter is its caller going faster than its partition takes: slow down.
        return reply.body.get("code") == "RATELIMITED_ERROR" and "Retry-After" in reply.headers
    if failure.kind != "condition":
        return _is_clean_500(reply)  # AWS failed: nothing but a clean 500 (or the success) is right
    if fresh is not None:
        # No request names a key another made up at random: a collision or a bug, never the user's.
        return _is_clean_500(reply)
    # A failed condition is a concurrent writer, never a dependency failure: the endpoint's own
    # documented refusal (the integration API checks the code is one of its documented errors).
    return 400 <= reply.status < 500


class WatchedApi(Api):
    """The integration API, remembering the last request (to ask again as a person would)."""

    last: tuple[str, str, Any, dict[str, Any]] | None = None

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        self.last = (method, path, body, kwargs)
        return super().call(method, path, body, **kwargs)


def _spent_answer(reply: Reply, sent: Any) -> bool:
    return (
        reply.status == 401
        and isinstance(sent, dict)
        and "2fa" in sent
        and reply.body.get("code") == "INVALID_SECOND_FACTOR_RESPONSE_ERROR"
    )


def _ask_again(api: WatchedApi, stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Reply:
    """The last request sent again with the password, its challenge answered with the next TOTP
    code of the caller's factor (the clock moved one step on: each code is accepted once)."""
    assert api.last is not None
    method, path, body, kwargs = api.last
    asked = {k: v for k, v in body.items() if k != "2fa"} | {"password": PASSWORD}
    first = api.call(method, path, asked, **kwargs)
    if first.body.get("code") != "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR":
        return first
    user_id = str(kwargs["token"]).partition(".")[0]
    key = {"pk": {"S": f"USER#{user_id}"}}
    stored = from_item(stack.dynamodb.get_item(TableName=stack.table("UsersTable"), Key=key)["Item"])
    [factor] = [fid for fid, f in stored["secondFactors"].items() if f.get("type") == "totp"]
    # The seed, opened as the functions open it (sealed beside the factor: docs/security.md).
    seed = stack.sealer.unseal(stored[f"totpSecret#{factor}"], user_id=user_id, factor_id=factor)
    later = clock.now() + 30
    answer = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(seed).at(later)}
    with monkeypatch.context() as moved:
        moved.setattr(clock, "now", lambda: later)
        return api.call(method, path, {**body, "2fa": answer}, **kwargs)


@dataclass(frozen=True)
class Prepared:
    """What a scenario's setup left: the tables, and the runtime configuration in SSM."""

    tables: TablesSnapshot
    parameters: dict[str, tuple[str, str]]  # name -> (type, value)

    @classmethod
    def take(cls, stack: Stack) -> Prepared:
        """The state of ``stack`` now."""
        return cls(snapshot_tables(REGION, stack.provisioned.tables.values()), _parameters(stack))

    def restore(self, stack: Stack) -> None:
        """Put ``stack`` back in this state (a parameter is written only where a run changed it),
        and make the functions forget the refusals their rate limiter remembers from the counters
        as a run left them (else a refusal one run met would answer the next run's requests)."""
        restore_tables(self.tables)
        memo_for(container.production_deps().counters).clear()
        now = _parameters(stack)
        for name, (kind, value) in self.parameters.items():
            if now.get(name) != (kind, value):
                stack.ssm.put_parameter(Name=name, Value=value, Type=kind, Overwrite=True)

    def holds_tables(self) -> bool:
        """Whether the tables are as in this state, item for item (a run that wrote nothing that
        stayed: a write failed, or a transaction that was cancelled)."""
        return tables_hold(self.tables)


def _parameters(stack: Stack) -> dict[str, tuple[str, str]]:
    """Every SSM parameter of the stack (the kill switches, the log level): name -> (type, value)."""
    names = sorted({*stack.switch_parameters.values(), *stack.provisioned.parameters.values()})
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(names), 10):  # GetParameters takes ten names at most
        for p in stack.ssm.get_parameters(Names=names[start : start + 10])["Parameters"]:
            found[p["Name"]] = (p["Type"], p["Value"])
    return found


def _events(stack: Stack) -> Counter[str]:
    """The activity events the outbox carries (``type:outcome``), on their way to ActivityFunction."""
    found = (from_item(i).get("event") for i in stack.items("OutboxTable"))
    return Counter(f"{e['type']}:{e['outcome']}" for e in found if isinstance(e, dict))


def _records_an_event(failure: Failure, calls: list[tuple[str, str, dict[str, Any]]], outbox: str) -> bool:
    """Whether the failed call is the one write of an activity event that no transaction carries."""
    _service, operation, params = calls[failure.index]
    item = params.get("Item") or {}
    return operation == "PutItem" and params.get("TableName") == outbox and "event" in item


def _lost_events(
    recorded: Counter[str],
    base: Counter[str],
    stack: Stack,
    answered_own: bool,
    own_write: bool,
    described: str,
) -> list[str]:
    """What a failed run did to the activity events its clean run recorded: an event is lost only
    with the request's own change (the request failed), or when its own write failed, and that
    write failing never changes the request's answer."""
    lost = recorded - (_events(stack) - base)
    if own_write and not answered_own:
        return [f"{described}: its activity event's write failed, and so did the request"]
    if lost and answered_own and not own_write:
        return [f"{described}: answered as its own, but lost the activity events {dict(lost)}"]
    return []


def _run_one(
    scenario: Scenario,
    send: Callable[[], Reply],
    failure: Failure,
    fresh: FreshKey | None,
    watch: CallWatch,
    stack: Stack,
    prepared: Prepared,
    described: str,
    monkeypatch: pytest.MonkeyPatch,
    events: tuple[Counter[str], Counter[str]] = (Counter(), Counter()),
) -> list[str]:
    container.production_deps().config.current()  # the runtime configuration read, as when warm
    _cold_sealer()
    watch.start(failure)
    try:
        first = send()
    finally:
        failed, unhandled = watch.failed, list(watch.unhandled)
        watch.start(None)
    problems: list[str] = []
    if not failed:
        problems.append(f"{described}: the request made fewer calls than its clean run")
    if not _acceptable_first(scenario, failure, first, fresh):
        problems.append(f"{described}: answered {first.status} {first.body}")
    problems += [
        f"{described}: answered 500 for {type(exc).__name__}: {exc}, not for the failed call"
        for exc in unhandled
        if not isinstance(exc, DependencyError)
    ]
    # The setup's state is whole (checked once): unchanged tables need no scan.
    unchanged = prepared.holds_tables()
    broken = [] if unchanged else stack_violations(stack.dynamodb, stack.provisioned.tables)
    problems += [f"{described}: after the failure, {v}" for v in broken]
    recorded, base = events
    if recorded:
        answered_own = first.status == scenario.expected_status
        own_write = _records_an_event(failure, watch.clean_calls, stack.table("OutboxTable"))
        problems += _lost_events(recorded, base, stack, answered_own, own_write, described)
    if first.status != scenario.expected_status and not problems:
        api = cast(WatchedApi, watch.api)
        sent = api.last[2] if api.last else None
        again = send()
        if _spent_answer(again, sent):
            again = _ask_again(api, stack, monkeypatch)
        if again.status != scenario.expected_status:
            problems.append(
                f"{described}: answered {first.status}, and a retry {again.status} {again.body}, "
                f"not {scenario.expected_status}"
            )
    return problems


@dataclass(frozen=True)
class Matrix:
    """The harness the scenarios are set up with, the watch on the functions' calls, and the
    scenarios by name: made once per worker (planning the scenarios builds the OpenAPI document)."""

    harness: Harness
    watch: CallWatch
    scenarios: dict[str, Scenario]


@pytest.fixture(scope="module")
def _matrix(_provisioned: Stack) -> Matrix:
    api = WatchedApi(_provisioned.template, PARAMS)
    harness = Harness(api, boto3.Session(region_name=REGION))
    planned = {scenario.name: scenario for scenario in scenarios(harness)}
    return Matrix(harness, CallWatch(api, _provisioned.dynamodb), planned)


@pytest.fixture
def matrix(stack: Stack, _matrix: Matrix, monkeypatch: pytest.MonkeyPatch) -> Iterator[Matrix]:
    unhandled = UnhandledErrors(_matrix.watch.unhandled)
    # Powertools configures the functions' logger with the first Logger() a handler module makes and
    # takes its first handler for its own: make sure that is done before ours is added.
    Logger(service="nimbus")
    # The functions' records (loggers "nimbus" and "nimbus.*") reach ours alone: no check here
    # reads their log lines, and formatting the traceback of each 500 the matrix provokes, in
    # Powertools' handler and in each of pytest's capturing ones, is a good part of its work.
    everyone = logging.Logger.callHandlers

    def call_handlers(logger: logging.Logger, record: logging.LogRecord) -> None:
        if record.name.partition(".")[0] == "nimbus":
            unhandled.handle(record)
        else:
            everyone(logger, record)

    monkeypatch.setattr(logging.Logger, "callHandlers", call_handlers)
    yield _matrix
    _matrix.watch.unhook()


def test_the_scenarios_have_one_name_each() -> None:
    """A scenario's name is its test's id: two of one name would hide one of them."""
    assert len(set(SCENARIOS)) == len(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_aws_call_of_the_scenario_failed_in_turn_leaves_a_clean_answer_and_whole_tables(
    stack: Stack, matrix: Matrix, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, watch = matrix.scenarios[name], matrix.watch
    # The setup, whose state every run starts from; then a run that warms what the functions make
    # on first use (clients, caches). The calls to fail come from a second, clean run, which starts
    # as every failed run does: from the state the setup left, put back.
    send = scenario.prepare()
    if stack_violations(stack.dynamodb, stack.provisioned.tables):
        # A listing's first setup stores a page of bare user items (no claims, not counted: the
        # harness stores them once, for the bench's repetitions), which no request could leave;
        # start from what a repeated setup leaves instead.
        stack.truncate()
        send = scenario.prepare()
        assert stack_violations(stack.dynamodb, stack.provisioned.tables) == [], "the setup's state"
    prepared = Prepared.take(stack)  # whole: a run that leaves its tables needs no scan
    container.production_deps().config.current()
    assert send().status == scenario.expected_status, scenario.name
    problems: list[str] = []
    with monkeypatch.context() as still:
        still.setattr(clock, "now", Clock(clock.now()))
        prepared.restore(stack)
        container.production_deps().config.current()
        _cold_sealer()
        base = _events(stack)
        watch.start(None)
        clean = send()
        calls = list(watch.calls)
        watch.clean_calls = calls
        recorded = _events(stack) - base
        assert clean.status == scenario.expected_status, (scenario.name, clean.body)
        tables = stack.provisioned.tables
        for failure in failures_of(calls, tables["CountersTable"]):
            prepared.restore(stack)
            described = f"{scenario.name}, {failure.describe(calls)}"
            fresh = fresh_key(failure, calls, tables) if failure.kind == "condition" else None
            problems += _run_one(
                scenario,
                send,
                failure,
                fresh,
                watch,
                stack,
                prepared,
                described,
                monkeypatch,
                events=(recorded, base),
            )
    assert problems == [], "\n".join(problems)


def _cold_sealer() -> None:
    """The request starts with no TOTP data key held, as on a new instance: its KMS calls (the
    Decrypt that opens a seed, the GenerateDataKey that seals one) are among those failed."""
    sealer = container.production_deps().sealer
    assert isinstance(sealer, Sealer)
    sealer.forget()


def test_the_matrix_hears_what_a_500_was_answered_for(stack: Stack, matrix: Matrix) -> None:
    """The exceptions behind a 500 reach the matrix (else a bug behind one would pass unnamed)."""
    scenario, watch = matrix.scenarios["GET /users/me (usedAt recent)"], matrix.watch
    send = scenario.prepare()
    container.production_deps().config.current()
    watch.start(Failure(0, "broken"))
    reply = send()
    heard = list(watch.unhandled)
    watch.start(None)

    assert (reply.status, [type(exc) for exc in heard]) == (500, [DependencyError])


def test_the_matrix_plans_the_kms_calls_of_a_cold_instance(stack: Stack, matrix: Matrix) -> None:
    """A TOTP answer on an instance that holds no data key opens its seed with KMS: that Decrypt is
    among the calls the matrix fails (else a KMS outage's answer would go untested)."""
    scenario, watch = matrix.scenarios["POST /login, TOTP answer"], matrix.watch
    send = scenario.prepare()
    container.production_deps().config.current()
    _cold_sealer()
    watch.start(None)
    assert send().status == scenario.expected_status
    calls = [(service, operation) for service, operation, _ in watch.calls]
    assert calls.count(("kms", "Decrypt")) == 1, calls
    failed = {f.kind for f in failures_of(watch.calls) if calls[f.index][0] == "kms"}
    assert {"timeout"} < failed, failed


def test_the_matrix_plans_the_conditions_of_the_writes_a_request_sends(stack: Stack, matrix: Matrix) -> None:
    """The plan is made from what the functions' clients send: a registration's transaction is
    failed item by conditioned item (else no concurrent writer would ever be tried)."""
    scenario, watch = matrix.scenarios["POST /register"], matrix.watch
    send = scenario.prepare()
    container.production_deps().config.current()
    watch.start(None)
    assert send().status == scenario.expected_status
    calls = list(watch.calls)
    watch.start(None)
    conditions = [f for f in failures_of(calls) if f.kind == "condition"]
    assert any(calls[f.index][1] == "TransactWriteItems" and f.item is not None for f in conditions)


def test_the_matrix_fails_the_first_and_last_of_a_run_of_alike_calls() -> None:
    """A listing's query per shard differs only in its values: the first and the last are failed,
    and so is every call unlike its neighbours."""
    shard: list[tuple[str, str, dict[str, Any]]] = [
        ("dynamodb", "Query", {"IndexName": "Created", "ExpressionAttributeValues": {":p": {"S": f"{n}"}}})
        for n in range(5)
    ]
    read: tuple[str, str, dict[str, Any]] = ("dynamodb", "BatchGetItem", {"RequestItems": {}})
    calls = [read, *shard, read, read]
    assert representatives(calls) == [0, 1, 5, 6, 7]


def test_the_matrix_fails_every_call_kind_it_claims() -> None:
    """The failure plan fails each call as a throttle or a service error (in turn, both for a call
    that tells them apart: a rate counter's write, SES's send) and a timeout, and each conditioned
    write's condition."""
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("dynamodb", "BatchGetItem", {}),
        ("dynamodb", "UpdateItem", {"TableName": "users", "ConditionExpression": "attribute_exists(pk)"}),
        (
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"ConditionExpression": "x"}},
                    {"Put": {}},
                    {"Update": {"ConditionExpression": "y"}},
                ]
            },
        ),
        ("dynamodb", "UpdateItem", {"TableName": "counters", "ConditionExpression": "z"}),
        ("sesv2", "SendEmail", {}),
        ("ssm", "GetParameters", {}),
    ]
    kinds = [(f.index, f.kind, f.item) for f in failures_of(calls, "counters")]
    assert kinds == [
        (0, "throttled", None), (0, "timeout", None),
        (1, "broken", None), (1, "timeout", None), (1, "condition", None),
        (2, "throttled", None), (2, "timeout", None),
        (2, "condition", 0), (2, "condition", 2),
        (3, "throttled", None), (3, "broken", None), (3, "timeout", None), (3, "condition", None),
        (4, "throttled", None), (4, "broken", None), (4, "timeout", None),
        (5, "broken", None), (5, "timeout", None),
    ]  # fmt: skip


def test_the_matrix_answers_a_clean_500_only_for_conditions_on_keys_the_request_made_up() -> None:
    """A new item's key made up at random (an id, a token's hash) is named by no other request; a
    claim of a name the client chose, a consumed token or a counter is, and needs the endpoint's
    own answer."""
    tables = {"UsersTable": "users", "TokensTable": "tokens", "SessionsTable": "sessions"}
    new = "attribute_not_exists(pk)"
    writes: list[dict[str, Any]] = [
        {"Put": {"TableName": "users", "Item": {"pk": {"S": "USER#01M8GN49WC"}}, "ConditionExpression": new}},
        {"Put": {"TableName": "users", "Item": {"pk": {"S": "USERNAME#alice"}}, "ConditionExpression": new}},
        {"Put": {"TableName": "tokens", "Item": {"pk": {"S": "VERIFY#9f86d0"}}, "ConditionExpression": new}},
        {
            "Delete": {
                "TableName": "tokens",
                "Key": {"pk": {"S": "VERIFY#9f86d0"}},
                "ConditionExpression": new,
            }
        },
        {
            "Put": {
                "TableName": "sessions",
                "Item": {"userId": {"S": "01M8GN49WC"}, "sessionId": {"S": "01M8GN5NEZ"}},
                "ConditionExpression": "attribute_not_exists(sessionId)",
            }
        },
    ]
    calls = [("dynamodb", "TransactWriteItems", {"TransactItems": writes})]
    single = [("dynamodb", "PutItem", writes[0]["Put"])]

    fresh = [fresh_key(Failure(0, "condition", item), calls, tables) for item in range(len(writes))]

    assert [key.why if key else None for key in fresh] == [
        FRESH_KEYS[0].why, None, FRESH_KEYS[3].why, None, FRESH_KEYS[1].why
    ]  # fmt: skip
    assert fresh_key(Failure(0, "condition"), single, tables) == FRESH_KEYS[0]


def test_a_restore_forgets_the_refusals_the_rate_limiter_remembers(stack: Stack) -> None:
    """A refusal one run met is not the next run's: the restored counters decide again."""
    prepared = Prepared.take(stack)
    memo = memo_for(container.production_deps().counters)
    memo.remember("login#ip#192.0.2.1", CounterState(False, 4, 4, int(clock.now()) + 300))

    prepared.restore(stack)

    assert memo.refusal("login#ip#192.0.2.1", clock.now()) is None
