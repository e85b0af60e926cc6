"""``make capacity``: where each AWS resource meets its first ceiling under the traffic mixes of
``bench/capacity.toml``, from the AWS calls the real handlers make (docs/scale.md).

Each scenario a mix names is run once on moto through the calls part of ``make bench``. Every
DynamoDB call is turned into the items it reads and writes, with their sizes (the items are looked
up in moto before and after the call), so read and write units come out per key class and per
index, as DynamoDB bills and throttles them. The mixes then scale those figures linearly, and each
resource's limit gives the traffic at which it is reached.
"""

from __future__ import annotations

import math
import re
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
from bench.runs import REGION, Report
from bench.stack import Harness, expect, moto_stack, set_config
from bench.table import render
from nimbus_core.adapters import runtime_config, user_items
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.platform.settings import get_settings
from nimbus_tools.template import Template, function_specs

MIXES_PATH = Path(__file__).with_name("capacity.toml")
RTT_MS = 4.0  # an assumed in-region round trip to DynamoDB, SSM or SES from Lambda
# Limits, as AWS documents them for us-east-1 (docs/scale.md names each source).
KEY_WCU, KEY_RCU = 1_000, 3_000  # one partition key value (base table or index), per second
# Transactions writing one item at once cancel each other (TransactionConflict). AWS gives no rate;
# ours is an assumption: a transaction holds its items for milliseconds, so past about a hundred a
# second on one item most would meet another.
KEY_TRANSACTIONS = 100
TABLE_UNITS = 40_000  # an on-demand table's (and each index's) default read and write quota
SSM_TPS, SSM_HIGH_TPS = 40, 1_000  # GetParameters: standard throughput, higher (docs/operations.md)
SES_RATE = 14  # messages per second, a new production SES account's sending rate
LAMBDA_CONCURRENCY = 1_000  # the account's default concurrent executions in a region
API_RPS = 10_000  # API Gateway's default account throttle per region
# List prices, us-east-1, per unit (Lambda arm64; HTTP API over 300M requests a month; DynamoDB
# on-demand; SES outbound mail; SSM higher throughput per API call).
PRICE = {
    "lambda_gb_s": 0.0000133334,
    "lambda_request": 0.20e-6,
    "api_request": 0.90e-6,
    "wru": 0.625e-6,
    "rru": 0.125e-6,
    "ses_message": 0.10e-3,
    "ssm_high_call": 0.05e-4,
}
MONTH_S = 30 * 86_400
FAR = 1_000  # ceilings more than this many times the goal are not listed
HEADROOM = 2.0  # what the operator's quota requests aim for


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
    ses: int = 0
    own_ms: float = 0.0  # the handler's time, moto's answers excluded


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
    (r"UsersTable/(Username|Email)(Index|Lookup) ", "username/email index entry", "accounts"),
    (r"UsersTable/CreatedIndex ", "user list partition", getattr(user_items, "LIST_SHARDS", 1)),
    (r"SessionsTable ", "a user's sessions", "accounts"),
    (r"TokensTable ", "token or challenge", "accounts"),
    (r"OutboxTable(/UserIndex)? ", "outbox message", "accounts"),
    (r"DomainsTable ", "domains partition", 1),
    (r"CountersTable [^#]+#ip#", "per-address counter", "addresses"),
    (r"CountersTable ", "per-user counter", "accounts"),
)


def key_class(where: str) -> tuple[str, str | int]:
    """The class of a key and what its keys spread over; a key no rule names is an error."""
    for pattern, name, spread in CLASSES:
        if re.match(pattern, where):
            return name, spread
    raise ValueError(f"no key class for {where!r}: add a rule to bench/capacity.CLASSES")


class Recorder:
    """Turns every DynamoDB call made while recording into units by key class (botocore events,
    the same public extension point the calls part counts with)."""

    def __init__(self, peek: Any) -> None:
        self._peek = peek  # an unrecorded client on the same moto
        # table -> its key attributes, and each index's key attributes and whether it projects all
        self._schemas: dict[str, tuple[list[str], dict[str, tuple[list[str], bool]]]] = {}
        self.cost: RequestCost | None = None
        self.sent_at = 0.0
        self.aws_ms = 0.0

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
            # The mail function sends each new outbox message (recovery requests are another
            # function's): its SES call is made later, off the request, once per message.
            if table == get_settings().outbox_table and new and not old:
                self.cost.ses += new.get("kind", {}).get("S") != RECOVERY_REQUEST
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
            units = max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))
            self._add(f"{where} {partition['S']}", reads=units * (1 if params.get("ConsistentRead") else 0.5))

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
        self.cost, self.aws_ms = cost, 0.0
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


def _before_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if _RECORDER and _RECORDER[0].cost is not None and model.service_model.service_name == "dynamodb":
        recorder, _RECORDER[:] = _RECORDER[0], []  # the recorder's own lookups are not recorded
        try:
            recorder.before(params, model.name, context)
        finally:
            _RECORDER.append(recorder)


def _after_call(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    if _RECORDER and (cost := _RECORDER[0].cost) is not None:
        service = model.service_model.service_name
        cost.round_trips += 1
        cost.ssm += service == "ssm"
        if service == "dynamodb":
            recorder, _RECORDER[:] = _RECORDER[0], []
            try:
                recorder.after(parsed, model.name, context)
            finally:
                _RECORDER.append(recorder)


def _before_send(**_: Any) -> None:
    if _RECORDER and _RECORDER[0].cost is not None:
        _RECORDER[0].sent_at = time.perf_counter()


def _received(**_: Any) -> None:
    if _RECORDER and _RECORDER[0].cost is not None:
        _RECORDER[0].aws_ms += (time.perf_counter() - _RECORDER[0].sent_at) * 1000


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


def measure_costs(template: Template, names: set[str]) -> tuple[dict[str, RequestCost], int]:
    """Each named scenario of the calls part, run once (after a discarded warm-up) and recorded,
    and how long the functions cache the runtime configuration."""
    costs: dict[str, RequestCost] = {}
    with moto_stack(template, streams=()) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        with installed(Recorder(boto3.client("dynamodb", region_name=REGION))) as recorder:
            by_name = {s.name: s for s in calls.scenarios(harness)}
            if unknown := names - by_name.keys():
                raise ValueError(f"no scenario of bench/calls.py is named {sorted(unknown)}")
            for name in sorted(names):
                scenario = by_name[name]
                for warm_up in (True, False):
                    send = scenario.prepare()
                    set_config(scenario.variant.config)
                    cost = RequestCost(name, "")
                    with recorder.recording(cost):
                        started = time.perf_counter()
                        reply = send()
                        cost.own_ms = (time.perf_counter() - started) * 1000 - recorder.aws_ms
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
    lifted_by: str  # "design" (a fix in our code), or the AWS setting that lifts it


@dataclass
class MixFigures:
    """One mix at its goal: the loads, the monthly cost, and every ceiling, lowest first."""

    name: str
    title: str
    goal_rps: float
    endpoints: dict[str, float]
    classes: dict[str, tuple[float, float, float | None, float | None]]  # reads/s, writes/s; hottest key's
    concurrency: float
    ssm_tps: float
    ses_rate: float
    monthly_usd: dict[str, float]
    ceilings: list[Ceiling]


def model(
    name: str,
    mix: Mapping[str, Any],
    costs: Mapping[str, RequestCost],
    memory_mb: Mapping[str, int],
    cache_seconds: float,
) -> MixFigures:
    """The mix at its goal rate, every figure linear in the traffic."""
    goal = float(mix["goal_rps"])
    endpoints = {r["scenario"]: goal * r["share"] for r in mix["requests"]}
    classes: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    tables: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    transactions: dict[str, float] = defaultdict(float)
    spreads: dict[str, float] = {}
    duration_s = gb_s = ssm_calls = ses = 0.0
    for scenario, rps in endpoints.items():
        cost = costs[scenario]
        for cls, access in cost.classes.items():
            classes[cls][0] += rps * access.reads
            classes[cls][1] += rps * access.writes
            transactions[cls] += rps * access.transactions
            spread = {n: s for _, n, s in CLASSES}[cls]
            spreads[cls] = float(mix[spread] if isinstance(spread, str) else spread)
        for table, access in cost.tables.items():
            tables[table][0] += rps * access.reads
            tables[table][1] += rps * access.writes
        seconds = (cost.own_ms + RTT_MS * cost.round_trips) / 1000
        duration_s += rps * seconds
        gb_s += rps * seconds * memory_mb.get(cost.function, 128) / 1024
        ssm_calls += rps * cost.ssm
        ses += rps * cost.ses
    concurrency = duration_s  # Little's law: arrivals per second times seconds each
    # A warm instance reads the configuration once per refresh, a random 75-100 % of the cache
    # period (its mean here); a request-time read (a cold or stale cache) is in the measured calls.
    ssm_tps = ssm_calls + concurrency / (cache_seconds * (1 + runtime_config.FRESH_FLOOR) / 2)
    # The hottest key's load, where a class spreads over few keys (shards, one partition).
    shown = {
        cls: (r, w, *((r / spreads[cls], w / spreads[cls]) if spreads[cls] < FAR else (None, None)))
        for cls, (r, w) in classes.items()
    }
    ceilings = _ceilings(
        goal,
        transactions=transactions,
        classes=classes,
        spreads=spreads,
        tables=tables,
        concurrency=concurrency,
        ssm_tps=ssm_tps,
        ses=ses,
    )
    total_rru = sum(r for r, _ in classes.values())
    total_wru = sum(w for _, w in classes.values())
    monthly = {
        "API Gateway": goal * MONTH_S * PRICE["api_request"],
        "Lambda": MONTH_S * (gb_s * PRICE["lambda_gb_s"] + goal * PRICE["lambda_request"]),
        "DynamoDB": MONTH_S * (total_rru * PRICE["rru"] + total_wru * PRICE["wru"]),
        "SES": MONTH_S * ses * PRICE["ses_message"],
        "SSM (higher throughput)": MONTH_S * ssm_tps * PRICE["ssm_high_call"] if ssm_tps > SSM_TPS else 0.0,
    }
    return MixFigures(
        name, mix["title"], goal, endpoints, shown, concurrency, ssm_tps, ses, monthly, ceilings
    )


def _ceilings(
    goal: float,
    *,
    classes: Mapping[str, list[float]],
    spreads: Mapping[str, float],
    tables: Mapping[str, list[float]],
    transactions: Mapping[str, float],
    concurrency: float,
    ssm_tps: float,
    ses: float,
) -> list[Ceiling]:
    found: list[Ceiling] = []

    def add(resource: str, load: float, limit: float, unit: str, lifted_by: str) -> None:
        if load > 0:
            found.append(
                Ceiling(
                    resource, f"{load:,.1f} {unit}", f"{limit:,.0f} {unit}", goal * limit / load, lifted_by
                )
            )

    for cls, (reads, writes) in classes.items():
        # One key of a class takes its share when the class spreads over few keys; traffic spread
        # over millions of keys meets the table's quota long before any one key's limit.
        add(f"{cls}: hottest key, reads", reads / spreads[cls], KEY_RCU, "RCU/s", "design")
        add(f"{cls}: hottest key, writes", writes / spreads[cls], KEY_WCU, "WCU/s", "design")
    for cls, count in transactions.items():
        add(f"{cls}: hottest key, transactions", count / spreads[cls], KEY_TRANSACTIONS, "tx/s", "design")
    quota = "Service Quotas: DynamoDB on-demand table throughput"
    for table, (reads, writes) in tables.items():
        add(f"{table}: reads", reads, TABLE_UNITS, "RRU/s", quota)
        add(f"{table}: writes", writes, TABLE_UNITS, "WRU/s", quota)
    add("SSM GetParameters, standard throughput", ssm_tps, SSM_TPS, "TPS", "nimbus ssm-throughput enable")
    add(
        "SSM GetParameters, higher throughput",
        ssm_tps,
        SSM_HIGH_TPS,
        "TPS",
        "Service Quotas: Parameter Store",
    )
    add("SES sending rate (mail waits, none is lost)", ses, SES_RATE, "msg/s", "SES sending quota increase")
    add(
        "Lambda concurrent executions",
        concurrency,
        LAMBDA_CONCURRENCY,
        "",
        "Service Quotas: Lambda concurrency",
    )
    add("API Gateway account throttle", goal, API_RPS, "req/s", "Service Quotas: API Gateway throttle")
    # Keys spread over millions (a user's, an address's) are far from their limits under an even
    # spread; only a single caller's flood makes one of them hot (docs/scale.md).
    return sorted((c for c in found if c.at_rps < FAR * goal), key=lambda c: c.at_rps)


def run(template: Template, runs: int) -> Report:
    """Measure the mixes' scenarios and model every mix (``--runs`` does not apply: calls and
    sizes are the same every run)."""
    mixes = load_mixes()
    names = {r["scenario"] for mix in mixes.values() for r in mix["requests"]}
    costs, cache_seconds = measure_costs(template, names)
    memory = {spec.logical_id: spec.memory_size for spec in function_specs(template)}
    figures = [model(name, mix, costs, memory, cache_seconds) for name, mix in mixes.items()]
    below = [
        f"{f.name}: {c.resource}"
        for f in figures
        for c in f.ceilings
        if c.lifted_by == "design" and c.at_rps < f.goal_rps
    ]
    return Report(render_report(figures, costs), figures, below)


def render_report(figures: list[MixFigures], costs: Mapping[str, RequestCost]) -> str:
    """The tables of docs/scale.md: the measured costs, then each mix's loads and ceilings."""
    parts = [
        "Per request, measured (DynamoDB units by key class; time = the handler's own + "
        f"{RTT_MS:g} ms per round trip):",
        render(
            ["Scenario", "Function", "Round trips", "Own ms", "Units (read/write) by key class"],
            [
                [
                    c.scenario,
                    c.function,
                    str(c.round_trips),
                    f"{c.own_ms:.1f}",
                    "; ".join(f"{k} {a.reads:g}/{a.writes:g}" for k, a in sorted(c.classes.items())),
                ]
                for c in costs.values()
            ],
        ),
    ]
    for f in figures:
        parts += [
            f"\n{f.title} ({f.name}), at {f.goal_rps:,.0f} requests/s:",
            render(
                ["Key class", "Reads/s", "Writes/s", "Hottest key reads/s", "Hottest key writes/s"],
                [
                    [k, f"{r:,.0f}", f"{w:,.0f}", _per_key(hr), _per_key(hw)]
                    for k, (r, w, hr, hw) in sorted(f.classes.items())
                ],
            ),
            f"Lambda concurrency {f.concurrency:,.0f}; SSM GetParameters {f.ssm_tps:,.1f}/s; "
            f"SES {f.ses_rate:,.0f} messages/s; $ per month at list prices: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in f.monthly_usd.items() if v)
            + f" (total {sum(f.monthly_usd.values()):,.0f})",
            render(
                ["Resource", "Load at goal", "Limit", "Reached at (req/s)", "Headroom", "Lifted by"],
                [
                    [
                        c.resource,
                        c.load,
                        c.limit,
                        f"{c.at_rps:,.0f}",
                        f"{c.at_rps / f.goal_rps:.1f}x",
                        c.lifted_by,
                    ]
                    for c in f.ceilings
                ],
            ),
            "To run it at its goal with 2x headroom, ask AWS for: "
            + (
                "; ".join(
                    f"{c.resource}: {_needed(c, f.goal_rps)} ({c.lifted_by})"
                    for c in f.ceilings
                    if c.lifted_by != "design"
                    and c.at_rps < HEADROOM * f.goal_rps
                    and "higher throughput" not in c.resource
                )
                or "nothing"
            ),
        ]
    return "\n".join(parts)


def _needed(ceiling: Ceiling, goal: float) -> str:
    """The quota that gives ``goal`` its headroom, in the ceiling's unit."""
    limit, unit = ceiling.limit.split(" ", 1) if " " in ceiling.limit else (ceiling.limit, "")
    wanted = float(limit.replace(",", "")) * HEADROOM * goal / ceiling.at_rps
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

    fig, axes = pyplot.subplots(len(figures), 1, figsize=(11, 4 * len(figures)))
    for axis, f in zip(axes, figures, strict=True):
        shown = f.ceilings[:10]
        axis.barh(
            [c.resource for c in shown],
            [c.at_rps for c in shown],
            color=["#c0392b" if c.lifted_by == "design" else "#2e86c1" for c in shown],
        )
        axis.axvline(f.goal_rps, color="black", linestyle="--", label=f"goal {f.goal_rps:,.0f} req/s")
        axis.set_xscale("log")
        axis.invert_yaxis()
        axis.set_title(f.title, fontsize=10)
        axis.set_xlabel(
            "requests/s of this mix at which each resource is reached (red: a limit of our design)"
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
    draw(report.data)
    print(f"\nwrote {DOC.name} and {CHART.name} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
