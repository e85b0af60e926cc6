"""The traffic mixes of bench/capacity.toml, and a whole run of the model: the mixes' scenarios
measured, every mix modelled as deployed, the month per active users, the report."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.capacity.deploy import deployment
from bench.capacity.limits import MIXES_PATH
from bench.capacity.measure import measure_costs
from bench.capacity.model import model
from bench.capacity.prices import load_profile, monthly_per_users
from bench.capacity.report import render_report
from bench.runs import Report
from nimbus_tools.template import Template


def load_mixes(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The traffic mixes, by name; each one's shares must add up to 1."""
    mixes: dict[str, dict[str, Any]] = tomllib.loads((path or MIXES_PATH).read_text())["mixes"]
    for name, mix in mixes.items():
        total = sum(r["share"] for r in mix["requests"])
        if abs(total - 1) > 0.001:
            raise ValueError(f"mix {name}: the shares add up to {total}, not 1")
    return mixes


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
