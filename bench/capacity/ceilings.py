"""Every limit a mix's loads meet, and the traffic of the mix at which each is reached: DynamoDB's
per key and per table, the template's (route throttles, reserved concurrency, warm throughput),
the account's (API Gateway, Lambda, SSM, SES)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from bench.capacity.deploy import Deployment
from bench.capacity.limits import (
    API_RPS,
    FAR,
    KEY_RCU,
    KEY_TRANSACTIONS,
    KEY_WCU,
    LAMBDA_CONCURRENCY,
    LAMBDA_UNRESERVED_MIN,
    SES_DAILY,
    SES_RATE,
    SSM_HIGH_TPS,
    SSM_TPS,
    TABLE_UNITS,
)

DYNAMODB_QUOTA = "Service Quotas: DynamoDB on-demand table throughput"
SES_QUOTA = "SES sending quota increase"


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
class Loads:
    """What a mix asks, per second, of each key class and table (reads, writes), of each class in
    transactions, of each route, of SSM and SES; and how many keys each class spreads over."""

    classes: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    tables: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    transactions: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    spreads: dict[str, float] = field(default_factory=dict)
    routes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    ssm_calls: float = 0.0
    ses: float = 0.0


class _Found:
    """The ceilings found for a mix carrying ``goal`` requests/s."""

    def __init__(self, goal: float) -> None:
        self.goal = goal
        self.ceilings: list[Ceiling] = []

    def add(
        self,
        resource: str,
        load: float,
        limit: float,
        unit: str,
        lifted_by: str,
        *,
        kind: str = "account",
        fixed: float = 0,
    ) -> None:
        """A limit met by ``load`` (none without load), reached when the traffic is limit/load times
        the goal."""
        if load > 0:
            shown_load, shown_limit = f"{load:,.1f} {unit}".strip(), f"{limit:,.0f} {unit}".strip()
            at = self.goal * limit / load
            self.ceilings.append(Ceiling(resource, shown_load, shown_limit, at, lifted_by, kind, fixed))


def ceilings(
    goal: float,
    deploy: Deployment,
    loads: Loads,
    concurrency: Mapping[str, float],
    ssm_tps: float,
    *,
    sudden: bool,
    defended: bool = False,
    offered: Mapping[str, float] | None = None,
) -> list[Ceiling]:
    """Every ceiling under ``FAR`` times the goal, lowest first. ``sudden``: the tables have only
    their warm throughput; ``defended``: an attack, its routes held to their throttles already, and
    the account's throttle counting all ``offered``."""
    found = _Found(goal)
    _dynamodb(found, deploy, loads, sudden)
    _api(found, deploy, loads.routes, offered if defended else None)
    _lambda(found, deploy, concurrency)
    found.add(
        "SSM GetParameters, standard throughput",
        ssm_tps,
        SSM_TPS,
        "TPS",
        "setting: nimbus ssm-throughput enable",
    )
    found.add(
        "SSM GetParameters, higher throughput",
        ssm_tps,
        SSM_HIGH_TPS,
        "TPS",
        "Service Quotas: Parameter Store",
    )
    found.add("SES sending rate (mail waits, none is lost)", loads.ses, SES_RATE, "msg/s", SES_QUOTA)
    found.add(
        "SES daily quota (past it, mail waits a day)", loads.ses * 86_400, SES_DAILY, "msg/day", SES_QUOTA
    )
    # Keys spread over millions (a user's, an address's) are far from their limits under an even
    # spread; only a single caller's flood makes one of them hot (docs/scale.md).
    return sorted((c for c in found.ceilings if c.at_rps < FAR * goal), key=lambda c: c.at_rps)


def _dynamodb(found: _Found, deploy: Deployment, loads: Loads, sudden: bool) -> None:
    spreads = loads.spreads
    for cls, (reads, writes) in loads.classes.items():
        # One key of a class takes its share when the class spreads over few keys; traffic spread
        # over millions of keys meets the table's quota long before any one key's limit.
        found.add(
            f"{cls}: hottest key, reads", reads / spreads[cls], KEY_RCU, "RCU/s", "design", kind="design"
        )
        found.add(
            f"{cls}: hottest key, writes", writes / spreads[cls], KEY_WCU, "WCU/s", "design", kind="design"
        )
    for cls, count in loads.transactions.items():
        resource = f"{cls}: hottest key, transactions"
        found.add(resource, count / spreads[cls], KEY_TRANSACTIONS, "tx/s", "design", kind="design")
    for table, (reads, writes) in loads.tables.items():
        found.add(f"{table}: reads", reads, TABLE_UNITS, "RRU/s", DYNAMODB_QUOTA)
        found.add(f"{table}: writes", writes, TABLE_UNITS, "WRU/s", DYNAMODB_QUOTA)
        # A sudden mix meets what a new table serves at once; a day's traffic grows into it.
        if sudden and (warm := deploy.warm.get(table)):
            for what, load, limit, unit in (
                ("reads", reads, warm[0], "RRU/s"),
                ("writes", writes, warm[1], "WRU/s"),
            ):
                lifted_by = limit.parameter or "pre-warm"
                found.add(
                    f"{table}: {what}, warm throughput", load, limit.value, unit, lifted_by, kind="template"
                )


def _api(
    found: _Found, deploy: Deployment, routes: Mapping[str, float], offered: Mapping[str, float] | None
) -> None:
    """The route throttles (not an attack's: they are its defence, holding it already) and the
    account's throttle, which counts every request sent, those a route's throttle refuses included
    (AWS does not say it skips them): an attack counts whole."""
    for route, rps in routes.items():
        if offered is not None:
            continue
        limit = deploy.route_limit(route)
        lifted_by = limit.parameter or "RouteSettings"
        found.add(f"API route throttle {route}", rps, limit.value, "req/s", lifted_by, kind="template")
    sent = sum(offered.values()) if offered else sum(routes.values())
    found.add("API Gateway account throttle", sent, API_RPS, "req/s", "Service Quotas: API Gateway throttle")


def _lambda(found: _Found, deploy: Deployment, concurrency: Mapping[str, float]) -> None:
    for function, limit in deploy.reserved.items():
        resource = f"{function} reserved concurrency"
        found.add(resource, concurrency.get(function, 0), limit.value, "", limit.parameter, kind="template")
    unreserved = [f for f in concurrency if f not in deploy.reserved]
    reserved = sum(limit.value for limit in deploy.reserved.values())
    found.add(
        "Lambda concurrent executions, unreserved" if deploy.reserved else "Lambda concurrent executions",
        sum(concurrency[f] for f in unreserved),
        max(LAMBDA_CONCURRENCY - reserved, LAMBDA_UNRESERVED_MIN),
        "",
        "Service Quotas: Lambda concurrent executions",
        fixed=reserved,
    )
