"""A traffic mix at its goal rate as deployed: the invocations it leads to, the loads on every key
class, table and function, what a month of it costs, and every ceiling, all linear in the traffic."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.capacity.ceilings import Ceiling, Loads, ceilings
from bench.capacity.costs import CLASSES, RequestCost, duration_s, expand
from bench.capacity.deploy import Deployment
from bench.capacity.limits import FAR, MEMO_SIZE, MONTH_S, SSM_TPS, WARM_SPREAD
from bench.capacity.prices import priced
from nimbus_core.adapters import runtime_config
from nimbus_core.domain.ratelimits import LOGIN


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
    endpoints = expand(requests, costs)
    if not memo:
        return endpoints, None
    hits = 0.0
    for _ in range(3):  # the memo's hits depend on the instances, which depend on the hits
        function = costs[memo[0]["scenario"]].function
        instances = warm_instances(concurrency_of(endpoints, costs, deploy).get(function, 0))
        refused = sum(requests[r["scenario"]] for r in memo)
        hits = _memo_hits(refused, float(mix["addresses"]), instances)
        split = dict(requests)
        for r in memo:
            split[r["scenario"]] = requests[r["scenario"]] * hits
            split[r["memo_miss"]] = split.get(r["memo_miss"], 0) + requests[r["scenario"]] * (1 - hits)
        endpoints = expand(split, costs)
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
    loads = _loads(endpoints, mix, costs, deploy)
    concurrency = concurrency_of(endpoints, costs, deploy)
    warm = {f: warm_instances(c) for f, c in concurrency.items()}
    # Each warm instance rereads the configuration at its first request past a random 75-100 % of
    # the cache period: busy or not, a warm instance is asked often enough to reread every time.
    ssm_tps = loads.ssm_calls + sum(warm.values()) / (cache_seconds * (1 + runtime_config.FRESH_FLOOR) / 2)
    spreads = loads.spreads
    shown = {
        cls: (r, w, *((r / spreads[cls], w / spreads[cls]) if spreads[cls] < FAR else (None, None)))
        for cls, (r, w) in loads.classes.items()
    }
    sudden, attack = bool(mix.get("sudden")), bool(mix.get("attack"))
    found = ceilings(
        carried, deploy, loads, concurrency, ssm_tps, sudden=sudden, defended=attack, offered=offered
    )
    # Past the standard throughput, every GetParameters call is billed.
    ssm_billed = MONTH_S * ssm_tps if ssm_tps > SSM_TPS else 0.0
    monthly = priced({s: rps * MONTH_S for s, rps in endpoints.items()}, costs, deploy, ssm_billed)
    return MixFigures(
        name,
        mix["title"],
        goal,
        endpoints,
        shown,
        concurrency,
        warm,
        ssm_tps,
        loads.ses,
        monthly,
        found,
        sudden=sudden,
        memo_hits=hits,
        offered=dict(offered),
        carried_rps=carried,
    )


def _loads(
    endpoints: Mapping[str, float],
    mix: Mapping[str, Any],
    costs: Mapping[str, RequestCost],
    deploy: Deployment,
) -> Loads:
    """What ``endpoints`` (invocations/s by scenario) ask of each key class, table and route."""
    loads = Loads()
    for scenario, rps in endpoints.items():
        cost = costs[scenario]
        for cls, access in cost.classes.items():
            loads.classes[cls][0] += rps * access.reads
            loads.classes[cls][1] += rps * access.writes
            loads.transactions[cls] += rps * access.transactions
            spread = {n: s for _, n, s in CLASSES}.get(cls, "accounts")
            loads.spreads[cls] = float(mix[spread] if isinstance(spread, str) else spread)
        for table, access in cost.tables.items():
            loads.tables[table][0] += rps * access.reads
            loads.tables[table][1] += rps * access.writes
        if (route := deploy.route_of(scenario)) is not None:
            loads.routes[route] += rps
        loads.ssm_calls += rps * cost.ssm
        loads.ses += rps * cost.ses
    return loads


def concurrency_of(
    endpoints: Mapping[str, float], costs: Mapping[str, RequestCost], deploy: Deployment
) -> dict[str, float]:
    """Each function's mean concurrent executions (Little's law: arrivals times duration)."""
    found: dict[str, float] = defaultdict(float)
    for scenario, rps in endpoints.items():
        found[costs[scenario].function] += rps * duration_s(costs[scenario], deploy)
    return dict(found)
