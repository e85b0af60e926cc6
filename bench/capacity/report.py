"""The tables of docs/scale.md: each mix as deployed by default and what its goal takes, the month
per active users, the measured costs, then each mix's loads and ceilings."""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.capacity.ceilings import Ceiling
from bench.capacity.costs import ACTIVITY, MAIL, RECOVERY, SWEEP, UNNAMED, RequestCost, duration_s
from bench.capacity.deploy import FULL_VCPU_MB, Deployment
from bench.capacity.limits import API_RPS, HEADROOM, RTT_MS
from bench.capacity.model import MixFigures
from bench.capacity.prices import UsersMonth
from bench.table import render


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
            "Keys no rule of bench/capacity/costs.CLASSES names, taken to spread over the accounts (give "
            "each a rule): " + ", ".join(unnamed) + "\n",
        )
    normal = next((f for f in figures if f.name == "normal"), None)
    for f in figures:
        parts += _summary(f, deploy, normal)
    parts += flood_bounds(costs, deploy)
    if users:
        parts += _months(users)
    parts += _measured(costs, deploy)
    for f in figures:
        parts += _mix(f)
    return "\n".join(parts)


def _months(users: list[UsersMonth]) -> list[str]:
    """The month per monthly active users, and by service."""
    return [
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


def _measured(costs: Mapping[str, RequestCost], deploy: Deployment) -> list[str]:
    """What each scenario measured: its calls, time, logs, stream records and units by key class."""
    return [
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
                    f"{duration_s(c, deploy) * 1000:.1f}",
                    str(c.log_bytes),
                    ", ".join(f"{k.split(':')[0]} {v:g}" for k, v in c.derived().items() if v) or "-",
                    "; ".join(f"{k} {a.reads:g}/{a.writes:g}" for k, a in sorted(c.classes.items())),
                ]
                for c in sorted(costs.values(), key=lambda c: c.scenario)
            ],
        ),
    ]


def _mix(f: MixFigures) -> list[str]:
    """One mix's loads by key class, its functions and stream records, its month and its ceilings."""
    return [
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
        + ", ".join(
            f"{s.split(':')[0]} {f.endpoints.get(s, 0):,.0f}" for s in (MAIL, RECOVERY, SWEEP, ACTIVITY)
        )
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


def flood_bounds(costs: Mapping[str, RequestCost], deploy: Deployment) -> list[str]:
    """For each function with reserved concurrency: what it would need were every one of its routes
    flooded at its throttle at once with its slowest measured request (a wrong password's argon2,
    say), against its reservation, which caps it there so the other functions keep theirs."""
    lines = []
    for function, reserved in deploy.reserved.items():
        slowest: dict[str, float] = {}
        for cost in costs.values():
            if cost.function == function and (route := deploy.route_of(cost.scenario)) is not None:
                slowest[route] = max(slowest.get(route, 0.0), duration_s(cost, deploy))
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
