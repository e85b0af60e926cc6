"""``make capacity``: the stack as deployed, held to the traffic mixes of ``bench/capacity.toml``:
where each AWS resource and each limit the template sets meets its first ceiling, what a month
costs, and what it costs per monthly active user beside Amazon Cognito (docs/scale.md).

Each scenario a mix names is run once on moto through the calls part of ``make bench``, and so are
the stream functions' own invocations (a mail sent, a user item swept, a recovery request). Every
DynamoDB call is turned into the items it reads and writes, with their sizes (the items are looked
up in moto before and after the call; a Query is counted by the items it reads, not the ones its
filter returns), so read and write units come out per key class and per index, as DynamoDB bills
and throttles them. The template gives what caps traffic as deployed (bench/capacity_deploy.py):
route throttles, memory (so CPU share), reserved concurrency, warm throughput. The mixes then scale
every figure linearly, and each limit gives the traffic at which it is reached.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import threading
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.handlers import BUILTIN_HANDLERS, REGISTER_FIRST

from bench import calls
from bench.capacity_deploy import FULL_VCPU_MB, Deployment, deployment
from bench.runs import REGION, Report
from bench.stack import Harness, expect, logged_characters, moto_stack, set_config
from bench.table import render
from nimbus_core.adapters import runtime_config, user_items
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.domain.limiter import RefusalMemo
from nimbus_core.domain.ratelimits import LOGIN
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import LambdaContextStub, Reply
from nimbus_tools.local.streams import lambda_event, lambda_record
from nimbus_tools.template import Template, resources_of_type

MIXES_PATH = Path(__file__).with_name("capacity.toml")
RTT_MS = 4.0  # an assumed in-region round trip to DynamoDB, SSM or SES from Lambda
# Limits, as AWS documents them for us-east-1 (docs/scale.md names each source).
KEY_WCU, KEY_RCU = 1_000, 3_000  # one partition key value (base table or index), per second
# Transactions writing one item at once cancel each other (TransactionConflict). AWS gives no rate;
# ours is an assumption: a transaction holds its items for milliseconds, so past about a hundred a
# second on one item most would meet another.
KEY_TRANSACTIONS = 100
TABLE_UNITS = 40_000  # an on-demand table's (and each index's) default read and write quota
# GetParameters: standard throughput is fixed at 40 TPS; higher throughput is a setting of the
# account (`nimbus ssm-throughput enable`), with its own quota (3,000 TPS by default).
SSM_TPS, SSM_HIGH_TPS = 40, 3_000
# SES out of the sandbox: the quotas AWS grants "vary with the use case"; 14 messages/s and 50,000
# a day are what new production accounts have been given. The sandbox: 1/s and 200 a day.
SES_RATE, SES_DAILY, SES_SANDBOX_DAILY = 14, 50_000, 200
LAMBDA_CONCURRENCY = 1_000  # the account's default concurrent executions in a region
LAMBDA_UNRESERVED_MIN = 100  # what Lambda keeps unreserved in every account
API_RPS = 10_000  # API Gateway's default account throttle per region (all APIs)
# A warm instance serves requests one at a time, and Lambda keeps the instances a busy moment
# needed for minutes: under Poisson arrivals the busy ones reach mean + 3 standard deviations.
WARM_SPREAD = 3.0
# What a request costs CloudWatch Logs beside the function's own lines: Lambda's platform records
# (start and report, JSON) per invocation, and the API's access-log line per request (its Format).
PLATFORM_LOG_BYTES, ACCESS_LOG_BYTES = 600, 300
RESPONSE_HEADER_BYTES = 400  # status line and headers of an answer, beside its body
# X-Ray's default sampling rule: the first request each second, then 5 % (per function).
XRAY_RESERVOIR, XRAY_RATE = 1.0, 0.05
# List prices, us-east-1, per unit (Lambda arm64; HTTP API over 300M requests a month; DynamoDB
# on-demand; SES outbound mail; SSM higher throughput per API call; X-Ray traces recorded;
# CloudWatch Logs ingestion per byte; data transfer out to the internet per byte, first 10 TB).
PRICE = {
    "lambda_gb_s": 0.0000133334,
    "lambda_request": 0.20e-6,
    "api_request": 0.90e-6,
    "api_request_first_300m": 1.00e-6,
    "wru": 0.625e-6,
    "rru": 0.125e-6,
    "storage_gb_month": 0.25,
    "pitr_gb_month": 0.20,
    "ses_message": 0.10e-3,
    "ssm_high_call": 0.05e-4,
    "xray_trace": 5.0e-6,
    "logs_byte": 0.50 / 1024**3,
    "transfer_byte": 0.09 / 1024**3,
    "alarm_month": 0.10,
    "dashboard_month": 3.0,
}
MONTH_S = 30 * 86_400
FAR = 1_000  # ceilings more than this many times the goal are not listed
HEADROOM = 2.0  # what the operator's quota requests aim for
# Amazon Cognito user pools, per monthly active user (aws.amazon.com/cognito/pricing; docs/scale.md
# says where each figure was read): (MAUs up to, price each) bands after the free ones.
COGNITO = {
    "Lite": (
        (10_000, 0.0),
        (100_000, 0.0055),
        (1_000_000, 0.0046),
        (10_000_000, 0.00325),
        (math.inf, 0.0025),
    ),
    "Essentials": ((10_000, 0.0), (math.inf, 0.015)),
}
# The stream functions' own scenarios (run by this model, not the calls part): the work each
# request's stream records give them.
MAIL, SWEEP = "MailFunction: a message sent", "SweepFunction: a user item changed (3 live sessions)"
RECOVERY = "RecoveryFunction: a request (an account)"
MEMO_SIZE = int(inspect.signature(RefusalMemo).parameters["size"].default)


@dataclass
class Access:
    """What one request does to one key class (per request, summed over its calls)."""

    reads: float = 0.0  # read units
    writes: float = 0.0  # write units
    transactions: int = 0  # transactions that write a key of the class


@dataclass
class RequestCost:
    """One scenario's measured cost: DynamoDB units by key class, other calls, its own time."""

    scenario: str
    function: str
    classes: dict[str, Access] = field(default_factory=lambda: defaultdict(Access))
    tables: dict[str, Access] = field(default_factory=lambda: defaultdict(Access))  # and indexes
    round_trips: int = 0
    ssm: int = 0
    ses: int = 0  # SES sends this invocation makes itself
    own_ms: float = 0.0  # the handler's time, moto's answers excluded, on a whole core
    other_calls: int = 0  # calls to services the model prices no further (KMS, SQS)
    # What its stream records give the stream functions: mail queued (MailFunction), recovery
    # requests (RecoveryFunction), user items changed or removed (SweepFunction).
    mails: int = 0
    recovery_requests: int = 0
    user_changes: int = 0
    stored_bytes: int = 0  # what the items it writes add to the tables (negative: removes)
    log_bytes: int = 0  # what the function logs
    reply_bytes: int = 0  # the answer's body

    def derived(self) -> dict[str, float]:
        """The stream functions' invocations (per record) this request leads to."""
        return {MAIL: self.mails, RECOVERY: self.recovery_requests, SWEEP: self.user_changes}


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it: names plus values (numbers about a byte per 2 digits)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


_SCALAR_SIZES: dict[str, Callable[[Any], int]] = {
    "S": lambda raw: len(raw.encode()),
    "N": lambda raw: len(raw.strip("-").replace(".", "")) // 2 + 1,
    "B": len,
    "BOOL": lambda raw: 1,
    "NULL": lambda raw: 1,
}


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: v}) for v in raw)
    if kind == "M":
        return 3 + item_size(raw)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in raw)
    return _SCALAR_SIZES[kind](raw)


# Key classes: the first rule matching "<table> <partition key value>" or "<table>/<index> <value>"
# names the class and the population its keys spread over (a number: a fixed set of keys).
CLASSES: tuple[tuple[str, str, str | int], ...] = (
    (r"UsersTable USER#", "user item", "accounts"),
    (r"UsersTable (USERNAME|EMAIL)#", "username/email claim", "accounts"),
    (r"UsersTable IMPORTED#", "import mark", "accounts"),
    (r"UsersTable USERCOUNT#", "user count shard", user_items.COUNT_SHARDS),
    (r"UsersTable/CreatedIndex ", "user list partition", getattr(user_items, "LIST_SHARDS", 1)),
    # The lookup indexes (by username, by email), whatever they are named.
    (r"UsersTable/\w+ ", "username/email index entry", "accounts"),
    (r"SessionsTable ", "a user's sessions", "accounts"),
    (r"TokensTable ", "token or challenge", "accounts"),
    (r"OutboxTable(/UserIndex)? ", "outbox message", "accounts"),
    (r"DomainsTable ", "domains partition", 1),
    (r"CountersTable [^#]+#ip#", "per-address counter", "addresses"),
    (r"CountersTable ", "per-user counter", "accounts"),
)


UNNAMED = " (no rule)"  # the suffix of a class no rule of CLASSES names


def key_class(where: str) -> tuple[str, str | int]:
    """The class of a key and what its keys spread over. A key no rule names (a new item or index)
    is classed by its table and key prefix, taken to spread over the accounts, and named in the
    report as a class to give a rule: the model runs on, but says what it assumed."""
    for pattern, name, spread in CLASSES:
        if re.match(pattern, where):
            return name, spread
    table, _, value = where.partition(" ")
    prefix = value.split("#", 1)[0] + "#" if "#" in value else ""
    return f"{table} {prefix}".strip() + UNNAMED, "accounts"


class Recorder:
    """Turns every DynamoDB call made while recording into units by key class (botocore events,
    the same public extension point the calls part counts with)."""

    def __init__(self, peek: Any, *, users_table: str | None = None, outbox_table: str | None = None) -> None:
        self._peek = peek  # an unrecorded client on the same moto
        # The tables whose streams feed functions (the functions' own settings by default).
        self._users_table, self._outbox_table = users_table, outbox_table
        # table -> its key attributes, and each index's key attributes and whether it projects all
        self._schemas: dict[str, tuple[list[str], dict[str, tuple[list[str], bool]]]] = {}
        self.cost: RequestCost | None = None
        # CPU time of the measuring thread spent in moto's answers and in the recorder's own
        # lookups, which a deployed function does not spend (thread CPU time: what the machine's
        # other load does not stretch).
        self.thread = 0
        self.sent_at = 0.0
        self.aws_cpu_s = 0.0

    def schema(self, table: str) -> tuple[list[str], dict[str, tuple[list[str], bool]]]:
        """The table's key attributes and each index's (read once from DescribeTable)."""
        if table not in self._schemas:
            desc = self._peek.describe_table(TableName=table)["Table"]
            keys = [k["AttributeName"] for k in desc["KeySchema"]]
            indexes = {
                i["IndexName"]: (
                    [k["AttributeName"] for k in i["KeySchema"]],
                    i["Projection"]["ProjectionType"] == "ALL",
                )
                for i in desc.get("GlobalSecondaryIndexes", [])
            }
            self._schemas[table] = (keys, indexes)
        return self._schemas[table]

    def _get(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._peek.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return found

    def _writes(self, params: Mapping[str, Any], operation: str) -> list[tuple[str, dict[str, Any], float]]:
        """(table, key, unit factor) of every item a write call touches."""
        if operation == "TransactWriteItems":
            return [
                (op["TableName"], self._key_of(op), 2.0)
                for entry in params["TransactItems"]
                for op in entry.values()
            ]
        if operation == "BatchWriteItem":
            return [
                (table, self._key_of(next(iter(request.values()))), 1.0)
                for table, requests in params["RequestItems"].items()
                for request in requests
            ]
        return [(params["TableName"], self._key_of(params), 1.0)]

    def _key_of(self, op: Mapping[str, Any]) -> dict[str, Any]:
        if "Key" in op:
            return dict(op["Key"])
        keys, _ = self.schema(op["TableName"])
        return {name: op["Item"][name] for name in keys}

    def before(self, params: dict[str, Any], operation: str, context: dict[str, Any]) -> None:
        """Before a write: the items it touches as they are."""
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"):
            writes = self._writes(params, operation)
            context["capacity"] = [
                (table, key, factor, self._get(table, key)) for table, key, factor in writes
            ]
        context["capacity_params"] = params

    def after(self, parsed: Mapping[str, Any], operation: str, context: dict[str, Any]) -> None:
        """After a call: its units, by key class."""
        assert self.cost is not None
        for table, key, factor, old in context.get("capacity", []):
            new = self._get(table, key)
            self._write(table, key, factor, old, new)
            self._streamed(table, key, old, new)
        params = context["capacity_params"]
        if operation == "GetItem":
            self._read(params["TableName"], params["Key"], [parsed.get("Item")], params.get("ConsistentRead"))
        elif operation == "BatchGetItem":
            for table, request in params["RequestItems"].items():
                found = {self._key_text(table, i): i for i in parsed.get("Responses", {}).get(table, [])}
                for key in request["Keys"]:
                    item = found.get(self._key_text(table, key))
                    self._read(table, key, [item], request.get("ConsistentRead"))
        elif operation == "Query":
            partition = next(iter(params["ExpressionAttributeValues"].values()))
            where = f"{params['TableName']}{'/' + params['IndexName'] if 'IndexName' in params else ''}"
            units = max(1, math.ceil(sum(item_size(i) for i in self._items_read(params)) / 4096))
            self._add(f"{where} {partition['S']}", reads=units * (1 if params.get("ConsistentRead") else 0.5))

    def _items_read(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The items a Query reads, whole: DynamoDB bills the items it reads before a filter drops
        some and a projection trims them (the same Query, without either)."""
        kept = {
            k: v for k, v in params.items() if k not in ("FilterExpression", "ProjectionExpression", "Select")
        }
        used = params["KeyConditionExpression"]
        if names := params.get("ExpressionAttributeNames"):
            kept["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in used}
            if not kept["ExpressionAttributeNames"]:
                del kept["ExpressionAttributeNames"]
        kept["ExpressionAttributeValues"] = {
            k: v for k, v in params["ExpressionAttributeValues"].items() if k in used
        }
        items: list[dict[str, Any]] = self._peek.query(**kept).get("Items", [])
        return items

    def _streamed(self, table: str, key: Mapping[str, Any], old: Any, new: Any) -> None:
        """What the stream functions get from one item written: a new outbox message is mail (or a
        recovery request), a user item changed or removed is a sweep; an unchanged item makes no
        stream record. Also what the item adds to the table."""
        assert self.cost is not None
        self.cost.stored_bytes += item_size(new or {}) - item_size(old or {})
        outbox = self._outbox_table or get_settings().outbox_table
        users = self._users_table or get_settings().users_table
        if table == outbox and new and not old:
            if new.get("kind", {}).get("S") == RECOVERY_REQUEST:
                self.cost.recovery_requests += 1
            else:
                self.cost.mails += 1
        pk = str(next(iter(key.get("pk", {"S": ""}).values())))
        if table == users and pk.startswith("USER#") and old and old != new:
            self.cost.user_changes += 1

    def _key_text(self, table: str, key: Mapping[str, Any]) -> str:
        keys, _ = self.schema(table)
        return "|".join(str(key[name]) for name in keys)

    def _read(self, table: str, key: Mapping[str, Any], items: list[Any], consistent: bool | None) -> None:
        size = sum(item_size(i) for i in items if i)
        units = max(1, math.ceil(size / 4096)) * (1 if consistent else 0.5)
        self._add(f"{table} {self._partition(table, key)}", reads=units)

    def _partition(self, table: str, key: Mapping[str, Any]) -> str:
        keys, _ = self.schema(table)
        return str(next(iter(key[keys[0]].values())))

    def _write(self, table: str, key: dict[str, Any], factor: float, old: Any, new: Any) -> None:
        size = max(item_size(old or {}), item_size(new or {}))
        where = f"{table} {self._partition(table, key)}"
        self._add(where, writes=factor * max(1, math.ceil(size / 1024)))
        if factor > 1 and self.cost is not None:  # inside a transaction
            self.cost.classes[key_class(where)[0]].transactions += 1
        _, indexes = self.schema(table)
        for index, (attributes, projects_all) in indexes.items():
            before, after = _entry(old, attributes), _entry(new, attributes)
            # An index entry is written when it appears, goes or moves, and when an item it
            # projects in full changes.
            changed = before != after or (projects_all and old != new)
            for entry, item in ((before, old), (after, new)) if before != after else ((after, new),):
                if changed and entry is not None:
                    size = item_size(item) if projects_all else 100
                    self._add(f"{table}/{index} {entry}", writes=max(1, math.ceil(size / 1024)))

    def _add(self, where: str, *, reads: float = 0.0, writes: float = 0.0) -> None:
        assert self.cost is not None
        name, _ = key_class(where)
        for access in (self.cost.classes[name], self.cost.tables[where.split(" ", maxsplit=1)[0]]):
            access.reads += reads
            access.writes += writes

    @contextmanager
    def recording(self, cost: RequestCost) -> Iterator[RequestCost]:
        """Record the calls of the block into ``cost``."""
        self.cost, self.aws_cpu_s, self.thread = cost, 0.0, threading.get_ident()
        try:
            yield cost
        finally:
            self.cost = None


def _entry(item: Mapping[str, Any] | None, attributes: list[str]) -> str | None:
    """The partition key value of ``item``'s entry in an index keyed by ``attributes`` (None: the
    item is not in it: DynamoDB indexes only items holding every key attribute)."""
    if not item or any(a not in item for a in attributes):
        return None
    return str(next(iter(item[attributes[0]].values())))


_RECORDER: list[Recorder] = []
# The recorder's own lookups (in moto, around a call) are not recorded: suspended in the thread
# that makes them, while the functions' other threads (parallel Queries) go on being recorded.
_OWN = threading.local()


@contextmanager
def _own_calls(recorder: Recorder) -> Iterator[None]:
    _OWN.active = True
    started = time.thread_time()
    try:
        yield
    finally:
        _OWN.active = False
        if threading.get_ident() == recorder.thread:
            recorder.aws_cpu_s += time.thread_time() - started


def _recording() -> Recorder | None:
    if _RECORDER and _RECORDER[0].cost is not None and not getattr(_OWN, "active", False):
        return _RECORDER[0]
    return None


def _before_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if (recorder := _recording()) is not None and model.service_model.service_name == "dynamodb":
        with _own_calls(recorder):
            recorder.before(params, model.name, context)


def _after_call(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if (recorder := _recording()) is not None and (cost := recorder.cost) is not None:
        service = model.service_model.service_name
        cost.round_trips += 1
        cost.ssm += service == "ssm"
        cost.ses += service in ("sesv2", "ses")
        cost.other_calls += service not in ("dynamodb", "ssm", "sesv2", "ses")
        if service == "dynamodb" and "capacity_params" in context:
            with _own_calls(recorder):
                recorder.after(parsed, model.name, context)


def _before_send(**_: Any) -> None:
    if (recorder := _recording()) is not None and threading.get_ident() == recorder.thread:
        recorder.sent_at = time.thread_time()


def _received(**_: Any) -> None:
    if (recorder := _recording()) is not None and threading.get_ident() == recorder.thread:
        recorder.aws_cpu_s += time.thread_time() - recorder.sent_at


BUILTIN_HANDLERS.extend(
    [
        ("before-parameter-build", _before_build, REGISTER_FIRST),
        ("after-call", _after_call),
        ("before-send", _before_send, REGISTER_FIRST),
        ("response-received", _received),
    ]
)


@contextmanager
def installed(recorder: Recorder) -> Iterator[Recorder]:
    """Let ``recorder`` see every AWS call of every client while the block runs."""
    _RECORDER.append(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.clear()


def load_mixes(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The traffic mixes, by name; each one's shares must add up to 1."""
    mixes: dict[str, dict[str, Any]] = tomllib.loads((path or MIXES_PATH).read_text())["mixes"]
    for name, mix in mixes.items():
        total = sum(r["share"] for r in mix["requests"])
        if abs(total - 1) > 0.001:
            raise ValueError(f"mix {name}: the shares add up to {total}, not 1")
    return mixes


def _stream_invocation(
    h: Harness, function: str, records: list[dict[str, Any]], table: str
) -> Callable[[], Reply]:
    """``function`` invoked on ``records`` as its event source mapping would deliver them (this
    bench keeps no stream records); it answers 200 when no record failed."""
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}/stream/capacity"
    event = lambda_event([lambda_record(r, arn) for r in records])
    handler = h.api.handler(function)

    def invoke() -> Reply:
        answer = handler(event, LambdaContextStub(function))
        return Reply(500 if answer.get("batchItemFailures") else 200, answer, {}, function)

    return invoke


def _mail_message(h: Harness) -> Callable[[], Reply]:
    """MailFunction sending one message: a new account's verification mail, as queued."""
    address = f"{h.account().name}@example.com"
    table = get_settings().outbox_table
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=table)["Items"]
    [message] = [i for i in items if i["kind"]["S"] != RECOVERY_REQUEST and i["to"]["S"] == address]
    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"id": message["id"]}, "NewImage": message}}
    return _stream_invocation(h, "MailFunction", [{**record, "SequenceNumber": "1"}], table)


def _swept_user(h: Harness) -> Callable[[], Reply]:
    """SweepFunction on one user item changed (a wrong password counted, a name changed): the
    user's three live sessions read, none stale."""
    user = h.account(logins=2)
    record = {
        "eventName": "MODIFY",
        "dynamodb": {"Keys": {"pk": {"S": f"USER#{user.id}"}}, "SequenceNumber": "1"},
    }
    return _stream_invocation(h, "SweepFunction", [record], get_settings().users_table)


def _scenarios(h: Harness) -> dict[str, calls.Scenario]:
    """The calls part's scenarios, and the model's own: the stream functions' work, and a refused
    login that its instance has not seen refused before (what the refusal memo spares)."""
    found = {s.name: s for s in calls.scenarios(h)}
    memo_miss = calls.Variant(
        " (a refused request, the first its instance sees)", status=429, setup=calls.exhausted_login_limit
    )
    refused = calls.scenario_of(h, "POST /login", memo_miss)
    found[refused.name] = refused
    found[MAIL] = calls.Scenario(MAIL, 200, lambda: _mail_message(h))
    found[SWEEP] = calls.Scenario(SWEEP, 200, lambda: _swept_user(h))
    return found


def measure_costs(template: Template, names: set[str]) -> tuple[dict[str, RequestCost], int]:
    """Each named scenario (and the stream functions' ones) run once, after a discarded warm-up,
    and recorded; and how long the functions cache the runtime configuration."""
    costs: dict[str, RequestCost] = {}
    with moto_stack(template, streams=()) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        with installed(Recorder(boto3.client("dynamodb", region_name=REGION))) as recorder:
            by_name = _scenarios(harness)
            wanted = names | {MAIL, SWEEP, RECOVERY}
            if unknown := wanted - by_name.keys():
                raise ValueError(f"no scenario of bench/calls.py is named {sorted(unknown)}")
            for name in sorted(wanted):
                scenario = by_name[name]
                for warm_up in (True, False):
                    send = scenario.prepare()
                    set_config(scenario.variant.config)
                    cost = RequestCost(name, "")
                    logged = logged_characters()
                    with recorder.recording(cost):
                        started = time.thread_time()
                        reply = send()
                        cost.own_ms = (time.thread_time() - started - recorder.aws_cpu_s) * 1000
                    cost.log_bytes = logged_characters() - logged
                    cost.reply_bytes = len(json.dumps(reply.body)) if reply.body is not None else 0
                    expect(name, scenario.expected_status, reply)
                    if not warm_up:
                        cost.function = reply.function
                        costs[name] = cost
                harness.reset()
            cache_seconds = get_settings().config_cache_seconds
    return costs, cache_seconds


@dataclass(frozen=True)
class Ceiling:
    """A resource's limit and the traffic of one mix (requests/s) at which it is reached."""

    resource: str
    load: str  # the load at the mix's goal, as shown
    limit: str
    at_rps: float
    lifted_by: str  # "design" (a fix in our code), a template parameter, or the AWS quota or setting
    kind: str = "account"  # "design", "template" (a parameter lifts it) or "account" (AWS quota)
    fixed: float = 0.0  # what the quota to ask for holds beside the limit (reserved concurrency)


@dataclass
class MixFigures:
    """One mix at its goal: the loads, the monthly cost, and every ceiling, lowest first."""

    name: str
    title: str
    goal_rps: float
    endpoints: dict[str, float]  # scenario -> invocations/s, the stream functions' included
    classes: dict[str, tuple[float, float, float | None, float | None]]  # reads/s, writes/s; hottest key's
    concurrency: dict[str, float]  # function -> mean concurrent executions
    warm_instances: dict[str, float]
    ssm_tps: float
    ses_rate: float
    monthly_usd: dict[str, float]
    ceilings: list[Ceiling]
    sudden: bool = False
    memo_hits: float | None = None  # the share of refused requests the refusal memo answers
    offered: dict[str, float] = field(default_factory=dict)  # route -> requests/s sent to it
    carried_rps: float = 0.0  # what the route throttles let through (an attack's), else the goal

    @property
    def first_deployed(self) -> Ceiling | None:
        """The lowest ceiling the template sets (a parameter lifts it), if any."""
        return next((c for c in self.ceilings if c.kind == "template"), None)


def _duration_s(cost: RequestCost, deploy: Deployment) -> float:
    """One invocation's time on Lambda: the handler's own CPU time, slowed by the memory's vCPU
    share, and the round trips."""
    return (cost.own_ms / deploy.cpu_share(cost.function) + RTT_MS * cost.round_trips) / 1000


def _expand(endpoints: Mapping[str, float], costs: Mapping[str, RequestCost]) -> dict[str, float]:
    """``endpoints`` with the stream functions' invocations their records lead to (and theirs)."""
    total: dict[str, float] = defaultdict(float)
    pending = list(endpoints.items())
    for _ in range(4):  # a request, its recovery request, its mail: chains are short
        following: list[tuple[str, float]] = []
        for scenario, rps in pending:
            total[scenario] += rps
            following += [(s, rps * n) for s, n in costs[scenario].derived().items() if n]
        pending = following
    return dict(total)


def warm_instances(concurrency: float) -> float:
    """The instances a function keeps warm for a mean concurrency (none without traffic)."""
    return 0.0 if concurrency <= 0 else math.ceil(concurrency + WARM_SPREAD * math.sqrt(concurrency))


def _memo_hits(refused_rps: float, addresses: float, instances: float) -> float:
    """The share of refused requests an instance's refusal memo answers. Requests are spread over
    the function's instances, so an instance knows an address only if it refused it itself this
    window, and has not forgotten it since: the memo holds the last MEMO_SIZE addresses it refused.
    With many more flooding addresses than that, a key is forgotten after MEMO_SIZE others, which
    comes back MEMO_SIZE / addresses of the time; fewer instances or addresses, the window bounds it."""
    if refused_rps <= 0 or addresses <= 0:
        return 0.0
    per_address_per_instance = refused_rps / addresses / max(instances, 1)
    return 1 - math.exp(-min(MEMO_SIZE / addresses, per_address_per_instance * LOGIN.window))


def _admitted(mix: Mapping[str, Any], deploy: Deployment) -> tuple[dict[str, float], dict[str, float]]:
    """The mix's requests/s by scenario past the gateway, and what each route is sent. An attack's
    route throttles are the defence: API Gateway refuses what is over them before any function
    runs, so everything past the gateway follows what they admit."""
    goal = float(mix["goal_rps"])
    requests = {r["scenario"]: goal * r["share"] for r in mix["requests"]}
    offered: dict[str, float] = defaultdict(float)
    for scenario, rps in requests.items():
        if (route := deploy.route_of(scenario)) is not None:
            offered[route] += rps
    if mix.get("attack"):
        admitted = {r: min(1.0, deploy.route_limit(r).value / load) for r, load in offered.items()}
        requests = {s: rps * admitted.get(deploy.route_of(s) or "", 1.0) for s, rps in requests.items()}
    return requests, dict(offered)


def _with_memo(
    requests: Mapping[str, float],
    mix: Mapping[str, Any],
    costs: Mapping[str, RequestCost],
    deploy: Deployment,
) -> tuple[dict[str, float], float | None]:
    """Every invocation/s the requests lead to, refused requests split between those the refusal
    memo answers and those it does not (and the share it answers, for a mix that names one)."""
    memo = [r for r in mix["requests"] if "memo_miss" in r]
    endpoints = _expand(requests, costs)
    if not memo:
        return endpoints, None
    hits = 0.0
    for _ in range(3):  # the memo's hits depend on the instances, which depend on the hits
        function = costs[memo[0]["scenario"]].function
        instances = warm_instances(_concurrency(endpoints, costs, deploy).get(function, 0))
        refused = sum(requests[r["scenario"]] for r in memo)
        hits = _memo_hits(refused, float(mix["addresses"]), instances)
        split = dict(requests)
        for r in memo:
            split[r["scenario"]] = requests[r["scenario"]] * hits
            split[r["memo_miss"]] = split.get(r["memo_miss"], 0) + requests[r["scenario"]] * (1 - hits)
        endpoints = _expand(split, costs)
    return endpoints, hits


def model(
    name: str,
    mix: Mapping[str, Any],
    costs: Mapping[str, RequestCost],
    deploy: Deployment,
    cache_seconds: float,
) -> MixFigures:
    """The mix at its goal rate as deployed, every figure linear in the traffic."""
    goal = float(mix["goal_rps"])
    requests, offered = _admitted(mix, deploy)
    carried = sum(requests.values())
    endpoints, hits = _with_memo(requests, mix, costs, deploy)
    classes: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    tables: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    transactions: dict[str, float] = defaultdict(float)
    spreads: dict[str, float] = {}
    routes: dict[str, float] = defaultdict(float)
    invocations: dict[str, float] = defaultdict(float)
    gb_s = ssm_calls = ses = log_bytes = out_bytes = 0.0
    for scenario, rps in endpoints.items():
        cost = costs[scenario]
        for cls, access in cost.classes.items():
            classes[cls][0] += rps * access.reads
            classes[cls][1] += rps * access.writes
            transactions[cls] += rps * access.transactions
            spread = {n: s for _, n, s in CLASSES}.get(cls, "accounts")
            spreads[cls] = float(mix[spread] if isinstance(spread, str) else spread)
        for table, access in cost.tables.items():
            tables[table][0] += rps * access.reads
            tables[table][1] += rps * access.writes
        route = deploy.route_of(scenario)
        if route is not None:
            routes[route] += rps
            out_bytes += rps * (cost.reply_bytes + RESPONSE_HEADER_BYTES)
            log_bytes += rps * ACCESS_LOG_BYTES
        batch = deploy.batch_size.get(cost.function, 1)
        invocations[cost.function] += rps / batch
        gb_s += rps * _duration_s(cost, deploy) * deploy.memory_mb.get(cost.function, 128) / 1024
        ssm_calls += rps * cost.ssm
        ses += rps * cost.ses
        log_bytes += rps * (cost.log_bytes + PLATFORM_LOG_BYTES / batch)
    concurrency = _concurrency(endpoints, costs, deploy)
    warm = {f: warm_instances(c) for f, c in concurrency.items()}
    # Each warm instance rereads the configuration at its first request past a random 75-100 % of
    # the cache period: busy or not, a warm instance is asked often enough to reread every time.
    ssm_tps = ssm_calls + sum(warm.values()) / (cache_seconds * (1 + runtime_config.FRESH_FLOOR) / 2)
    shown = {
        cls: (r, w, *((r / spreads[cls], w / spreads[cls]) if spreads[cls] < FAR else (None, None)))
        for cls, (r, w) in classes.items()
    }
    api_rps = sum(routes.values())
    ceilings = _ceilings(
        carried,
        deploy,
        transactions=transactions,
        classes=classes,
        spreads=spreads,
        tables=tables,
        concurrency=concurrency,
        ssm_tps=ssm_tps,
        ses=ses,
        routes=routes,
        sudden=bool(mix.get("sudden")),
        defended=bool(mix.get("attack")),
        offered=offered if mix.get("attack") else None,
    )
    total_rru = sum(r for r, _ in classes.values())
    total_wru = sum(w for _, w in classes.values())
    traces = sum(
        min(n, XRAY_RESERVOIR) + XRAY_RATE * max(0.0, n - XRAY_RESERVOIR) for n in invocations.values()
    )
    monthly = {
        "API Gateway": api_price(api_rps * MONTH_S),
        "Lambda": MONTH_S
        * (gb_s * PRICE["lambda_gb_s"] + sum(invocations.values()) * PRICE["lambda_request"]),
        "DynamoDB": MONTH_S * (total_rru * PRICE["rru"] + total_wru * PRICE["wru"]),
        "SES": MONTH_S * ses * PRICE["ses_message"],
        "SSM (higher throughput)": MONTH_S * ssm_tps * PRICE["ssm_high_call"] if ssm_tps > SSM_TPS else 0.0,
        "X-Ray": MONTH_S * traces * PRICE["xray_trace"] if deploy.traced else 0.0,
        "CloudWatch Logs": MONTH_S * log_bytes * PRICE["logs_byte"],
        "Data transfer out": MONTH_S * out_bytes * PRICE["transfer_byte"],
    }
    return MixFigures(
        name,
        mix["title"],
        goal,
        endpoints,
        shown,
        concurrency,
        warm,
        ssm_tps,
        ses,
        monthly,
        ceilings,
        sudden=bool(mix.get("sudden")),
        memo_hits=hits,
        offered=dict(offered),
        carried_rps=carried,
    )


def _concurrency(
    endpoints: Mapping[str, float], costs: Mapping[str, RequestCost], deploy: Deployment
) -> dict[str, float]:
    """Each function's mean concurrent executions (Little's law: arrivals times duration)."""
    found: dict[str, float] = defaultdict(float)
    for scenario, rps in endpoints.items():
        found[costs[scenario].function] += rps * _duration_s(costs[scenario], deploy)
    return dict(found)


def api_price(requests: float) -> float:
    """HTTP API requests a month at list price (the first 300 million cost more)."""
    first = min(requests, 300e6)
    return first * PRICE["api_request_first_300m"] + (requests - first) * PRICE["api_request"]


def _ceilings(
    goal: float,
    deploy: Deployment,
    *,
    classes: Mapping[str, list[float]],
    spreads: Mapping[str, float],
    tables: Mapping[str, list[float]],
    transactions: Mapping[str, float],
    concurrency: Mapping[str, float],
    ssm_tps: float,
    ses: float,
    routes: Mapping[str, float],
    sudden: bool,
    defended: bool = False,
    offered: Mapping[str, float] | None = None,
) -> list[Ceiling]:
    found: list[Ceiling] = []

    def add(
        resource: str,
        load: float,
        limit: float,
        unit: str,
        lifted_by: str,
        *,
        kind: str = "account",
        fixed: float = 0,
    ) -> None:
        if load > 0:
            shown_load, shown_limit = f"{load:,.1f} {unit}".strip(), f"{limit:,.0f} {unit}".strip()
            found.append(
                Ceiling(resource, shown_load, shown_limit, goal * limit / load, lifted_by, kind, fixed)
            )

    for cls, (reads, writes) in classes.items():
        # One key of a class takes its share when the class spreads over few keys; traffic spread
        # over millions of keys meets the table's quota long before any one key's limit.
        add(f"{cls}: hottest key, reads", reads / spreads[cls], KEY_RCU, "RCU/s", "design", kind="design")
        add(f"{cls}: hottest key, writes", writes / spreads[cls], KEY_WCU, "WCU/s", "design", kind="design")
    for cls, count in transactions.items():
        add(
            f"{cls}: hottest key, transactions",
            count / spreads[cls],
            KEY_TRANSACTIONS,
            "tx/s",
            "design",
            kind="design",
        )
    quota = "Service Quotas: DynamoDB on-demand table throughput"
    for table, (reads, writes) in tables.items():
        add(f"{table}: reads", reads, TABLE_UNITS, "RRU/s", quota)
        add(f"{table}: writes", writes, TABLE_UNITS, "WRU/s", quota)
        # A sudden mix meets what a new table serves at once; a day's traffic grows into it.
        if sudden and (warm := deploy.warm.get(table)):
            read, write = warm
            add(
                f"{table}: reads, warm throughput",
                reads,
                read.value,
                "RRU/s",
                read.parameter or "pre-warm",
                kind="template",
            )
            add(
                f"{table}: writes, warm throughput",
                writes,
                write.value,
                "WRU/s",
                write.parameter or "pre-warm",
                kind="template",
            )
    for route, rps in routes.items():
        if defended:  # an attack's routes are held to their throttles already: the defence
            continue
        limit = deploy.route_limit(route)
        add(
            f"API route throttle {route}",
            rps,
            limit.value,
            "req/s",
            limit.parameter or "RouteSettings",
            kind="template",
        )
    # The account's throttle counts every request sent, those a route's throttle refuses included
    # (AWS does not say it skips them): an attack counts whole.
    sent = sum(offered.values()) if offered else sum(routes.values())
    add("API Gateway account throttle", sent, API_RPS, "req/s", "Service Quotas: API Gateway throttle")
    for function, limit in deploy.reserved.items():
        add(
            f"{function} reserved concurrency",
            concurrency.get(function, 0),
            limit.value,
            "",
            limit.parameter,
            kind="template",
        )
    unreserved = [f for f in concurrency if f not in deploy.reserved]
    pool = LAMBDA_CONCURRENCY - sum(limit.value for limit in deploy.reserved.values())
    add(
        "Lambda concurrent executions, unreserved" if deploy.reserved else "Lambda concurrent executions",
        sum(concurrency[f] for f in unreserved),
        max(pool, LAMBDA_UNRESERVED_MIN),
        "",
        "Service Quotas: Lambda concurrent executions",
        fixed=sum(limit.value for limit in deploy.reserved.values()),
    )
    add(
        "SSM GetParameters, standard throughput",
        ssm_tps,
        SSM_TPS,
        "TPS",
        "setting: nimbus ssm-throughput enable",
    )
    add(
        "SSM GetParameters, higher throughput",
        ssm_tps,
        SSM_HIGH_TPS,
        "TPS",
        "Service Quotas: Parameter Store",
    )
    add("SES sending rate (mail waits, none is lost)", ses, SES_RATE, "msg/s", "SES sending quota increase")
    add(
        "SES daily quota (past it, mail waits a day)",
        ses * 86_400,
        SES_DAILY,
        "msg/day",
        "SES sending quota increase",
    )
    # Keys spread over millions (a user's, an address's) are far from their limits under an even
    # spread; only a single caller's flood makes one of them hot (docs/scale.md).
    return sorted((c for c in found if c.at_rps < FAR * goal), key=lambda c: c.at_rps)


def run(template: Template, runs: int, params: Mapping[str, str] | None = None) -> Report:
    """Measure the mixes' scenarios and model every mix as deployed (``--runs`` does not apply:
    calls and sizes are the same every run)."""
    mixes = load_mixes()
    names = {
        r[key]
        for mix in mixes.values()
        for r in mix["requests"]
        for key in ("scenario", "memo_miss")
        if key in r
    }
    names |= set(load_profile()["scenarios"])
    costs, cache_seconds = measure_costs(template, names)
    deploy = deployment(template, params)
    figures = [model(name, mix, costs, deploy, cache_seconds) for name, mix in mixes.items()]
    below = [
        f"{f.name}: {c.resource}"
        for f in figures
        for c in f.ceilings
        if c.kind == "design" and c.at_rps < f.goal_rps
    ]
    users = monthly_per_users(load_profile(), costs, deploy, template)
    return Report(render_report(figures, costs, deploy, users), (figures, users), below)


def load_profile(path: Path | None = None) -> dict[str, Any]:
    """The monthly active user's profile (``[profile]`` of bench/capacity.toml), with the scenarios
    it is made of."""
    raw = tomllib.loads((path or MIXES_PATH).read_text())
    profile: dict[str, Any] = dict(raw["profile"])
    mix = raw["mixes"][profile["requests_like"]]
    signing = tuple(profile["sign_in_routes"])
    shares = {r["scenario"]: r["share"] for r in mix["requests"] if not r["scenario"].startswith(signing)}
    total = sum(shares.values())
    profile["request_shares"] = {s: v / total for s, v in shares.items()}
    profile["scenarios"] = [profile["sign_in"], *profile["request_shares"]]
    return profile


@dataclass
class UsersMonth:
    """What a month costs for ``users`` monthly active users of the profile."""

    users: int
    requests: float  # API requests a month
    nimbus: dict[str, float]  # $ by service
    sign_in_part: float  # $ of the sign-ins, mail, storage and fixed costs (what Cognito bills for)
    cognito: dict[str, float]  # $ by Cognito feature plan

    @property
    def total(self) -> float:
        """Nimbus's whole month."""
        return sum(self.nimbus.values())


def cognito_price(users: int, bands: tuple[tuple[float, float], ...]) -> float:
    """Cognito's monthly charge for ``users`` MAUs over a feature plan's price bands."""
    charged, below = 0.0, 0.0
    for upto, each in bands:
        charged += max(0.0, min(users, upto) - below) * each
        below = upto
    return charged


def monthly_per_users(
    profile: Mapping[str, Any], costs: Mapping[str, RequestCost], deploy: Deployment, template: Template
) -> list[UsersMonth]:
    """A month of the profile for each number of users the profile names, priced as deployed."""
    alarms = len(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    dashboards = len(resources_of_type(template, "AWS::CloudWatch::Dashboard"))
    fixed = alarms * PRICE["alarm_month"] + dashboards * PRICE["dashboard_month"]
    sign_in = costs[profile["sign_in"]]
    # What an account keeps stored: its items from registration, and a session per sign-in kept.
    stored = costs["POST /register"].stored_bytes + profile["sessions_kept"] * max(sign_in.stored_bytes, 0)
    found = []
    for users in profile["users"]:
        per_month = {profile["sign_in"]: users * profile["sign_ins"]}
        per_month |= {
            s: users * profile["requests"] * share for s, share in profile["request_shares"].items()
        }
        sign_in_month = _priced(
            _expand_no_mail({profile["sign_in"]: per_month[profile["sign_in"]]}, costs), costs, deploy
        )
        mail_month = _priced({MAIL: users * profile["mails"]}, costs, deploy)
        whole = _priced(_expand_no_mail(per_month, costs) | {MAIL: users * profile["mails"]}, costs, deploy)
        storage = users * stored / 1024**3 * (PRICE["storage_gb_month"] + PRICE["pitr_gb_month"])
        whole["DynamoDB"] += storage
        whole["Alarms, dashboard"] = fixed
        found.append(
            UsersMonth(
                users,
                sum(n for s, n in per_month.items()),
                whole,
                sum(sign_in_month.values()) + sum(mail_month.values()) + storage + fixed,
                {plan: cognito_price(users, bands) for plan, bands in COGNITO.items()},
            )
        )
    return found


def _expand_no_mail(per_month: Mapping[str, float], costs: Mapping[str, RequestCost]) -> dict[str, float]:
    """``per_month`` with the sweeps and recovery work it leads to, but its mail: the profile
    counts mail on its own."""
    expanded = _expand(per_month, costs)
    expanded.pop(MAIL, None)
    return expanded


def _priced(
    per_month: Mapping[str, float], costs: Mapping[str, RequestCost], deploy: Deployment
) -> dict[str, float]:
    """Invocations a month at list prices, by service."""
    api = gb_s = lambda_requests = rru = wru = ses = log_bytes = out_bytes = 0.0
    invocations: dict[str, float] = defaultdict(float)
    for scenario, count in per_month.items():
        cost = costs[scenario]
        batch = deploy.batch_size.get(cost.function, 1)
        if deploy.route_of(scenario) is not None:
            api += count
            out_bytes += count * (cost.reply_bytes + RESPONSE_HEADER_BYTES)
            log_bytes += count * ACCESS_LOG_BYTES
        invocations[cost.function] += count / batch
        lambda_requests += count / batch
        gb_s += count * _duration_s(cost, deploy) * deploy.memory_mb.get(cost.function, 128) / 1024
        rru += count * sum(a.reads for a in cost.classes.values())
        wru += count * sum(a.writes for a in cost.classes.values())
        ses += count * cost.ses
        log_bytes += count * (cost.log_bytes + PLATFORM_LOG_BYTES / batch)
    traces = 0.0
    for n in invocations.values():
        per_second = n / MONTH_S
        traces += MONTH_S * (
            min(per_second, XRAY_RESERVOIR) + XRAY_RATE * max(0.0, per_second - XRAY_RESERVOIR)
        )
    return {
        "API Gateway": api_price(api),
        "Lambda": gb_s * PRICE["lambda_gb_s"] + lambda_requests * PRICE["lambda_request"],
        "DynamoDB": rru * PRICE["rru"] + wru * PRICE["wru"],
        "SES": ses * PRICE["ses_message"],
        "X-Ray": traces * PRICE["xray_trace"] if deploy.traced else 0.0,
        "CloudWatch Logs": log_bytes * PRICE["logs_byte"],
        "Data transfer out": out_bytes * PRICE["transfer_byte"],
    }


def what_it_takes(f: MixFigures) -> tuple[list[str], list[str], list[str]]:
    """What running the mix at its goal with headroom takes: template parameters to set, settings
    to change, and AWS quotas to ask for (each with the value it needs)."""
    parameters: dict[str, float] = {}
    settings, quotas = [], []
    for c in f.ceilings:
        if c.kind == "design" or c.at_rps >= HEADROOM * f.carried_rps or "higher throughput" in c.resource:
            continue
        needed = _needed(c, f.carried_rps)
        if c.kind == "template":
            value = float(needed.split(" ")[0].replace(",", ""))
            parameters[c.lifted_by] = max(parameters.get(c.lifted_by, 0.0), value)
        elif c.lifted_by.startswith("setting: "):
            settings.append(f"{c.lifted_by.removeprefix('setting: ')} ({c.resource}: {c.load})")
        elif c.fixed:  # the account's quota holds the reserved executions too
            quotas.append(
                f"Lambda concurrent executions: {needed}, {c.fixed:,.0f} reserved among them ({c.lifted_by})"
            )
        else:
            quotas.append(f"{c.resource}: {needed} ({c.lifted_by})")
    return [f"{name}={value:.0f}" for name, value in parameters.items()], settings, quotas


def render_report(
    figures: list[MixFigures],
    costs: Mapping[str, RequestCost],
    deploy: Deployment,
    users: list[UsersMonth] | None = None,
) -> str:
    """The tables of docs/scale.md: each mix as deployed by default, the month per active users,
    the measured costs, then each mix's loads and ceilings."""
    parts = ["Each mix on a default deploy (template defaults, an account with AWS's default quotas):"]
    unnamed = sorted({k for c in costs.values() for k in c.classes if k.endswith(UNNAMED)})
    if unnamed:
        parts.insert(
            0,
            "Keys no rule of bench/capacity.CLASSES names, taken to spread over the accounts (give "
            "each a rule): " + ", ".join(unnamed) + "\n",
        )
    normal = next((f for f in figures if f.name == "normal"), None)
    for f in figures:
        parts += _summary(f, deploy, normal)
    parts += flood_bounds(costs, deploy)
    if users:
        parts += [
            "",
            "A month per monthly active users (the profile of bench/capacity.toml), $ at list prices:",
            render(
                [
                    "MAU",
                    "Requests",
                    "Nimbus",
                    "of it: sign-in, mail, storage, fixed",
                    "Cognito Lite",
                    "Cognito Essentials",
                ],
                [
                    [
                        f"{u.users:,}",
                        f"{u.requests:,.0f}",
                        f"{u.total:,.0f}",
                        f"{u.sign_in_part:,.0f}",
                        f"{u.cognito['Lite']:,.0f}",
                        f"{u.cognito['Essentials']:,.0f}",
                    ]
                    for u in users
                ],
            ),
            "",
            "Nimbus by service, $ a month:",
            render(
                ["Service", *(f"{u.users:,} MAU" for u in users)],
                [[service, *(f"{u.nimbus[service]:,.0f}" for u in users)] for service in users[0].nimbus],
            ),
        ]
    parts += [
        "",
        "Per request or record, measured (DynamoDB units by key class; time on Lambda = the handler's "
        f"own CPU time / its memory's vCPU share (1 at {FULL_VCPU_MB:,} MB) + {RTT_MS:g} ms per round trip):",
        render(
            [
                "Scenario",
                "Function",
                "Trips",
                "CPU ms",
                "On Lambda ms",
                "Log B",
                "Streams",
                "Units (read/write) by key class",
            ],
            [
                [
                    c.scenario,
                    c.function,
                    str(c.round_trips),
                    f"{c.own_ms:.1f}",
                    f"{_duration_s(c, deploy) * 1000:.1f}",
                    str(c.log_bytes),
                    ", ".join(f"{k.split(':')[0]} {v:g}" for k, v in c.derived().items() if v) or "-",
                    "; ".join(f"{k} {a.reads:g}/{a.writes:g}" for k, a in sorted(c.classes.items())),
                ]
                for c in sorted(costs.values(), key=lambda c: c.scenario)
            ],
        ),
    ]
    for f in figures:
        parts += [
            f"\n{f.title} ({f.name}), at {f.carried_rps:,.0f} requests/s"
            + (
                f" (of {f.goal_rps:,.0f} sent: the route throttles refuse the rest)"
                if f.carried_rps < f.goal_rps
                else ""
            )
            + (" (sudden: tables have only their warm throughput)" if f.sudden else "")
            + ":",
            render(
                ["Key class", "Reads/s", "Writes/s", "Hottest key reads/s", "Hottest key writes/s"],
                [
                    [k, f"{r:,.0f}", f"{w:,.0f}", _per_key(hr), _per_key(hw)]
                    for k, (r, w, hr, hw) in sorted(f.classes.items())
                ],
            ),
            "Lambda concurrency (warm instances): "
            + ", ".join(
                f"{fn.removesuffix('Function')} {c:,.0f} ({f.warm_instances[fn]:,.0f})"
                for fn, c in sorted(f.concurrency.items())
            )
            + "; stream records/s: "
            + ", ".join(f"{s.split(':')[0]} {f.endpoints.get(s, 0):,.0f}" for s in (MAIL, RECOVERY, SWEEP))
            + (
                f"; the refusal memo answers {f.memo_hits:.1%} of refused requests"
                if f.memo_hits is not None
                else ""
            )
            + f"; SSM GetParameters {f.ssm_tps:,.1f}/s; SES {f.ses_rate:,.0f} messages/s",
            "$ per month at list prices, at the goal around the clock: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in f.monthly_usd.items() if round(v))
            + f" (total {sum(f.monthly_usd.values()):,.0f})",
            render(
                ["Resource", "Load at goal", "Limit", "Reached at (req/s)", "Headroom", "Lifted by"],
                [
                    [
                        c.resource,
                        c.load,
                        c.limit,
                        f"{c.at_rps:,.0f}",
                        f"{c.at_rps / f.carried_rps:.1f}x",
                        c.lifted_by,
                    ]
                    for c in f.ceilings
                ],
            ),
        ]
    return "\n".join(parts)


def flood_bounds(costs: Mapping[str, RequestCost], deploy: Deployment) -> list[str]:
    """For each function with reserved concurrency: what it would need were every one of its routes
    flooded at its throttle at once with its slowest measured request (a wrong password's argon2,
    say), against its reservation, which caps it there so the other functions keep theirs."""
    lines = []
    for function, reserved in deploy.reserved.items():
        slowest: dict[str, float] = {}
        for cost in costs.values():
            if cost.function == function and (route := deploy.route_of(cost.scenario)) is not None:
                slowest[route] = max(slowest.get(route, 0.0), _duration_s(cost, deploy))
        if not slowest:
            continue
        needed = sum(deploy.route_limit(route).value * seconds for route, seconds in slowest.items())
        unmeasured = sorted(r for r, f in deploy.routes.items() if f == function and r not in slowest)
        lines.append(
            f"- Every route of {function} flooded at its throttle at once, each request its slowest "
            f"measured: {needed:,.0f} concurrent executions, "
            + ("within" if needed <= reserved.value else "capped by")
            + f" its reservation ({reserved.parameter}={reserved.value:,.0f}), so the other functions "
            "keep the account's rest"
            + (f" (not measured: {', '.join(unmeasured)})" if unmeasured else "")
            + "."
        )
    return lines


def _summary(f: MixFigures, deploy: Deployment, normal: MixFigures | None) -> list[str]:
    """A mix's lines at the head of the report: its first ceilings, and what its goal takes."""
    first = f.ceilings[0] if f.ceilings else None
    deployed = f.first_deployed
    parameters, settings, quotas = what_it_takes(f)
    lines = [
        f"- {f.title} ({f.name}, {f.goal_rps:,.0f} req/s):",
    ]
    if f.carried_rps < f.goal_rps:
        lines.append(
            f"  the route throttles refuse {f.goal_rps - f.carried_rps:,.0f} req/s at the gateway, "
            f"before any function runs, and let {f.carried_rps:,.0f} through (the figures below follow them)."
        )
        for route, load in f.offered.items():
            limit = deploy.route_limit(route)
            real = normal.offered.get(route, 0.0) if normal else 0.0
            if load > limit.value and real:
                lines.append(
                    f"  Real requests on {route} share its bucket ({limit.parameter}={limit.value:,.0f}) "
                    f"with the attack: of a normal day's {real:,.0f}/s, "
                    f"{min(1.0, limit.value / (load + real)):.0%} pass; the other routes keep their own."
                )
        if (sent := sum(f.offered.values())) > API_RPS:
            lines.append(
                f"  API Gateway's account throttle ({API_RPS:,} req/s, every route of every API in the "
                f"region) sees all {sent:,.0f} req/s: until it is raised above the attack and a day's "
                "traffic together, every route loses requests to it."
            )
    lines += [
        "  first ceiling: "
        + (f"{first.resource} at {first.at_rps:,.0f} req/s ({first.lifted_by})" if first else "none"),
        "  the template's first: "
        + (
            f"{deployed.resource} at {deployed.at_rps:,.0f} req/s ({deployed.lifted_by})"
            if deployed
            else "none"
        ),
    ]
    lines.append(f"  For {f.carried_rps:,.0f} req/s with 2x headroom:")
    for heading, items in (("set", parameters), ("change", settings), ("ask AWS for", quotas)):
        lines.append(f"    {heading}:" + ("" if len(items) > 1 else f" {items[0] if items else 'nothing'}"))
        if len(items) > 1:
            lines += [f"      - {item}" for item in items]
    return lines


def _needed(ceiling: Ceiling, goal: float) -> str:
    """The limit that gives ``goal`` its headroom, in the ceiling's unit."""
    limit, unit = ceiling.limit.split(" ", 1) if " " in ceiling.limit else (ceiling.limit, "")
    wanted = float(limit.replace(",", "")) * HEADROOM * goal / ceiling.at_rps + ceiling.fixed
    return f"{math.ceil(wanted / 100) * 100:,.0f} {unit}".strip()


def _per_key(load: float | None) -> str:
    return "-" if load is None else f"{load:,.1f}"


DOC = Path(__file__).parents[1] / "docs" / "scale.md"
CHART = DOC.with_suffix(".png")
BEGIN, END = "<!-- make capacity: begin -->", "<!-- make capacity: end -->"


def draw(figures: list[MixFigures], path: Path = CHART) -> None:
    """A bar per ceiling and mix: the traffic at which it is reached, against the mix's goal."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file only
    from matplotlib import pyplot

    colours = {"design": "#c0392b", "template": "#e67e22", "account": "#2e86c1"}
    fig, axes = pyplot.subplots(len(figures), 1, figsize=(11, 4.3 * len(figures)))
    for axis, f in zip(axes, figures, strict=True):
        shown = f.ceilings[:10]
        axis.barh(
            [c.resource for c in shown], [c.at_rps for c in shown], color=[colours[c.kind] for c in shown]
        )
        axis.axvline(f.goal_rps, color="black", linestyle="--", label=f"goal {f.goal_rps:,.0f} req/s")
        axis.set_xscale("log")
        axis.invert_yaxis()
        axis.set_title(f.title, fontsize=10)
        axis.set_xlabel(
            "requests/s of this mix at which each limit is reached\n"
            "(red: our design; orange: a template parameter; blue: an AWS quota or setting)"
        )
        axis.legend(loc="lower right")
        axis.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    pyplot.close(fig)


def write_doc(table: str, path: Path = DOC) -> None:
    """Put ``table`` between the markers of docs/scale.md."""
    text = path.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    path.write_text(f"{head}{BEGIN}\n```text\n{table}\n```\n{END}{tail}")


def main() -> None:
    """``make capacity``: print the model, and write its tables and chart into docs/."""
    from nimbus_tools.template import load_template

    started = time.perf_counter()
    report = run(load_template(), 1)
    print(report.table)
    write_doc(report.table)
    figures, _ = report.data
    draw(figures)
    print(f"\nwrote {DOC.name} and {CHART.name} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
