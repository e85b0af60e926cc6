"""What the deployed stack caps traffic with, read from template.yaml with its parameters' defaults
(or overrides): route throttles, each function's memory (so its CPU share) and reserved
concurrency, each table's and index's warm throughput, and the stream functions' batch sizes.
``make capacity`` (bench/capacity/) holds every mix against these (docs/scale.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import (
    FUNCTION_TYPE,
    TABLE_TYPE,
    Resolver,
    Template,
    function_specs,
    resolver,
    resources_of_type,
)

# Lambda gives a function CPU in proportion to its memory: one full vCPU at 1,769 MB (Lambda
# developer guide, "memory and computing power"). A handler is one thread: more than one vCPU
# does not shorten it.
FULL_VCPU_MB = 1_769
# A new on-demand table, and each new index, serves this many read and write units/s at once
# (DynamoDB developer guide, "warm throughput"); more only as its traffic grows.
DEFAULT_WARM_READS, DEFAULT_WARM_WRITES = 12_000, 4_000


@dataclass(frozen=True)
class Limit:
    """A limit the template sets, and the parameter that sets it ("" when nothing in the template
    does: AWS's own default)."""

    value: float
    parameter: str


@dataclass(frozen=True)
class Deployment:
    """The stack as deployed with these parameters."""

    memory_mb: dict[str, int]  # function -> MemorySize
    reserved: dict[str, Limit]  # function -> its reserved concurrency (functions with one)
    routes: dict[str, str]  # route key ("POST /login") -> function
    default_route: Limit  # each route's limit when it has none of its own (requests/s)
    route_limits: dict[str, Limit]  # route key -> its own limit (requests/s)
    warm: dict[str, tuple[Limit, Limit]]  # table or "table/index" -> warm (reads/s, writes/s)
    batch_size: dict[str, int]  # stream function -> records per invocation at most
    traced: bool  # X-Ray active tracing on the functions

    def cpu_share(self, function: str) -> float:
        """The part of one vCPU that ``function`` gets (1 at 1,769 MB and above)."""
        return min(1.0, self.memory_mb.get(function, 128) / FULL_VCPU_MB)

    def route_limit(self, route: str) -> Limit:
        """The throttle of ``route``: its own, else the stage's default route settings."""
        return self.route_limits.get(route, self.default_route)

    def route_of(self, scenario: str) -> str | None:
        """The route key a scenario's request takes ("GET /users/me/sessions/:sid (4 live)" ->
        "GET /users/me/sessions/{sid}"), None for a stream function's scenario."""
        method, _, rest = scenario.partition(" ")
        path = re.split(r"[ ,?]", rest, maxsplit=1)[0]
        if not path.startswith("/"):
            return None
        exact = f"{method} {path}"
        if exact in self.routes:
            return exact
        for route in self.routes:
            route_method, _, pattern = route.partition(" ")
            regex = re.sub(r"\\\{[^/]+\\\}", "[^/]+", re.escape(pattern))
            if route_method in (method, "ANY") and re.fullmatch(regex, path):
                return route
        return "$default" if "$default" in self.routes else None


def _refs(value: Any) -> Iterator[str]:
    """Every parameter a (raw) template value refers to."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                yield inner
            else:
                yield from _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _refs(inner)


def _limit(raw: Any, resolved: Any) -> Limit:
    return Limit(float(resolved), next(_refs(raw), ""))


def deployment(template: Template, params: Mapping[str, str] | None = None) -> Deployment:
    """The deployed stack's limits under ``params`` (the template's defaults where not given)."""
    names = resolver(template, params)
    specs = function_specs(template, params)
    reserved: dict[str, Limit] = {}
    for logical_id, resource in resources_of_type(template, FUNCTION_TYPE).items():
        raw = (resource.get("Properties") or {}).get("ReservedConcurrentExecutions")
        if raw is not None and (value := names.resolve({"v": raw}).get("v")) is not None:
            reserved[logical_id] = _limit(raw, value)
    [api] = resources_of_type(template, "AWS::Serverless::HttpApi").values()
    properties = api.get("Properties") or {}
    default_raw = (properties.get("DefaultRouteSettings") or {}).get("ThrottlingRateLimit")
    # No stage throttle: the account's, which bench/capacity/ceilings.py counts on its own.
    default = _limit(default_raw, names.resolve(default_raw)) if default_raw is not None else Limit(1e12, "")
    route_limits = {
        route: _limit(raw["ThrottlingRateLimit"], names.resolve(raw["ThrottlingRateLimit"]))
        for route, raw in (properties.get("RouteSettings") or {}).items()
        if "ThrottlingRateLimit" in raw
    }
    warm: dict[str, tuple[Limit, Limit]] = {}
    for logical_id, resource in resources_of_type(template, TABLE_TYPE).items():
        raw_properties = resource.get("Properties") or {}
        table = names.resolve({"Ref": logical_id})
        warm[table] = _warm(names, raw_properties.get("WarmThroughput"))
        for entry in raw_properties.get("GlobalSecondaryIndexes") or []:
            index = _deployed(names, entry)
            if index is not None:
                warm[f"{table}/{index['IndexName']}"] = _warm(names, index.get("WarmThroughput"))
    globals_ = (template.get("Globals") or {}).get("Function") or {}
    return Deployment(
        memory_mb={s.logical_id: s.memory_size for s in specs},
        reserved=reserved,
        routes={r.route_key: s.logical_id for s in specs for r in s.routes},
        default_route=default,
        route_limits=route_limits,
        warm=warm,
        batch_size={s.function: s.batch_size for s in stream_subscriptions(template)},
        traced=globals_.get("Tracing") == "Active",
    )


def _deployed(names: Resolver, entry: Any) -> Any:
    """A list entry as deployed, unresolved inside: an Fn::If's branch under the parameters (None
    for AWS::NoValue: the login lookups' upgrade keeps an index only for some of its steps)."""
    while isinstance(entry, dict) and set(entry) == {"Fn::If"}:
        condition, chosen, otherwise = entry["Fn::If"]
        entry = chosen if names.condition(condition) else otherwise
    return None if entry == {"Ref": "AWS::NoValue"} else entry


def _warm(names: Any, raw: Any) -> tuple[Limit, Limit]:
    """A table's or index's warm throughput (reads/s, writes/s): what its WarmThroughput sets, else
    AWS's start; each with the parameter that sets it, named even where the default leaves it unset
    (the branch of its Fn::If not taken)."""
    resolved = (names.resolve({"v": raw}).get("v") or {}) if raw is not None else {}
    read, write = (
        Limit(float(resolved.get(key, default)), next(_refs(_find(raw, key)), ""))
        for key, default in (
            ("ReadUnitsPerSecond", DEFAULT_WARM_READS),
            ("WriteUnitsPerSecond", DEFAULT_WARM_WRITES),
        )
    )
    return read, write


def _find(value: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in ``value`` (through Fn::If branches)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        for inner in value.values():
            if (found := _find(inner, key)) is not None:
                return found
    elif isinstance(value, list):
        for inner in value:
            if (found := _find(inner, key)) is not None:
                return found
    return None
