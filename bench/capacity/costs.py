"""What one request costs: DynamoDB units by key class (an item's size as DynamoDB counts it, and
the rules naming each key's class), its other calls, and its time on Lambda."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.capacity.deploy import Deployment
from bench.capacity.limits import RTT_MS
from nimbus_core.adapters import user_items

# The stream functions' own scenarios (run by this model, not the calls part): the work each
# request's stream records give them.
MAIL, SWEEP = "MailFunction: a message sent", "SweepFunction: a user item changed (3 live sessions)"
RECOVERY = "RecoveryFunction: a request (an account)"
ACTIVITY = "ActivityFunction: an event stored"


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
    activity_events: int = 0  # outbox items that carry an account's activity event
    stored_bytes: int = 0  # what the items it writes add to the tables (negative: removes)
    log_bytes: int = 0  # what the function logs
    reply_bytes: int = 0  # the answer's body

    def derived(self) -> dict[str, float]:
        """The stream functions' invocations (per record) this request leads to."""
        return {
            MAIL: self.mails,
            RECOVERY: self.recovery_requests,
            SWEEP: self.user_changes,
            ACTIVITY: self.activity_events,
        }


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
    (r"ActivityTable ", "an account's activity", "accounts"),
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


def duration_s(cost: RequestCost, deploy: Deployment) -> float:
    """One invocation's time on Lambda: the handler's own CPU time, slowed by the memory's vCPU
    share, and the round trips."""
    return (cost.own_ms / deploy.cpu_share(cost.function) + RTT_MS * cost.round_trips) / 1000


def expand(endpoints: Mapping[str, float], costs: Mapping[str, RequestCost]) -> dict[str, float]:
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
