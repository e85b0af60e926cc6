"""AWS calls per request on a warm function, counted at the SDK boundary under moto (docs/performance.md).

The scenarios are bench/scenarios.py's; what an endpoint's registration cannot say is a row of
``VARIANTS`` (bench/variants.py). A round trip is an HTTP attempt: that is what a budget counts.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any

import boto3

from bench.harness import Account, Harness
from bench.runs import REGION, Report
from bench.scenarios import Scenario, scenarios
from bench.stack import ScenarioError, Tally, expect, measure, moto_stack, set_config
from bench.table import render
from bench.variants import Budget
from nimbus_core.adapters import container
from nimbus_core.adapters.sealing import Sealer
from nimbus_tools.template import Template

SERVICES = ("dynamodb", "ssm", "sesv2", "kms")
# KMS per instance (docs/security.md, "Sealed secrets"): a warm one holds its data keys and calls
# nothing; a cold one opens each data key it meets once (Decrypt) and makes one to seal with.
KMS_COLD_LIMIT = {"Decrypt": 1, "GenerateDataKey": 1}
REPETITIONS = 5
Setup = Callable[[Harness, Account, dict[str, Any]], None]


@dataclass(frozen=True)
class ServiceFigures:
    """Median calls and HTTP attempts of one service, and the operations called in order."""

    calls: int
    attempts: int
    operations: tuple[str, ...]

    def cell(self) -> str:
        """As the table shows it: round trips, the calls when retries differ, the operations."""
        calls = f" ({self.calls} call{'' if self.calls == 1 else 's'})" if self.attempts != self.calls else ""
        # A run of one operation (a Query per list partition) is written once with its number.
        runs = [(op, len(list(same))) for op, same in groupby(self.operations)]
        named = ", ".join(op if n == 1 else f"{n} x {op}" for op, n in runs)
        return f"{self.attempts}{calls}" + (f" {named}" if named else "")


@dataclass(frozen=True)
class CallRow:
    """The result of one scenario."""

    scenario: str
    function: str
    status: int
    services: dict[str, ServiceFigures]
    constant: bool  # every repetition made the same calls (in any order: some run side by side)
    budget: Budget | None
    verdict: str  # OK or OVER against the budget (round trips: HTTP attempts), "-" without one
    kms_cold: tuple[str, ...] = ()  # the KMS calls of the same request on an instance holding no data key


def _figures(service: str, tallies: Sequence[Tally]) -> ServiceFigures:
    # median_low keeps whole numbers; with constant figures every statistic is the same anyway.
    calls = statistics.median_low([len(t.operations(service)) for t in tallies])
    attempts = statistics.median_low([t.attempts[service] for t in tallies])
    sequences = Counter(tuple(t.operations(service)) for t in tallies)
    return ServiceFigures(calls=calls, attempts=attempts, operations=sequences.most_common(1)[0][0])


def run_scenario(scenario: Scenario, repetitions: int) -> CallRow:
    """Measure ``scenario`` ``repetitions`` times after one discarded warm-up request."""
    tallies: list[Tally] = []
    variant = scenario.variant
    for repetition in range(repetitions + 1):
        send = scenario.prepare()
        set_config(variant.config)
        with measure() as tally:
            reply = send()
        expect(scenario.name, scenario.expected_status, reply)
        if wrong := {k: reply.body.get(k) for k, v in variant.expect_body.items() if reply.body.get(k) != v}:
            raise ScenarioError(f"{scenario.name}: expected {dict(variant.expect_body)}, got {wrong}")
        if repetition:  # repetition 0 warms lazy imports and first-use caches on this path
            tallies.append(tally)
    services = {service: _figures(service, tallies) for service in SERVICES}
    trips = {name: figures.attempts for name, figures in services.items()}
    verdict = "-" if variant.budget is None else variant.budget.verdict(trips)
    made = {(frozenset(Counter(t.calls).items()), frozenset(t.attempts.items())) for t in tallies}
    constant = len(made) == 1
    cold = _kms_on_a_cold_instance(scenario)
    if trips["kms"] or any(n > KMS_COLD_LIMIT.get(op, 0) for op, n in Counter(cold).items()):
        verdict = "OVER"
    row = CallRow(scenario.name, reply.function, reply.status, services, constant, variant.budget, verdict)
    return replace(row, kms_cold=tuple(cold))


def _kms_on_a_cold_instance(scenario: Scenario) -> list[str]:
    """The KMS calls of the request on an instance that holds no TOTP data key yet."""
    send = scenario.prepare()
    set_config(scenario.variant.config)
    sealer = container.production_deps().sealer
    assert isinstance(sealer, Sealer)
    sealer.forget()
    with measure() as tally:
        reply = send()
    expect(scenario.name, scenario.expected_status, reply)
    return tally.operations("kms")


def run(template: Template, runs: int) -> Report:
    """Every scenario on moto, warm, and the calls table (``--runs`` does not apply: the counts are
    the same every time)."""
    with moto_stack(template, streams=()) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        rows = []
        for scenario in scenarios(harness):
            rows.append(run_scenario(scenario, REPETITIONS))
            harness.reset()
    headers = [
        "Scenario",
        "HTTP",
        "DynamoDB round trips",
        "SSM",
        "SES",
        "KMS",
        "KMS cold",
        "Budget",
        "Verdict",
    ]
    body = [
        [
            row.scenario + ("" if row.constant else " (varies!)"),
            str(row.status),
            *(row.services[service].cell() for service in SERVICES),
            ", ".join(row.kms_cold) or "0",
            row.budget.text if row.budget else "-",
            row.verdict,
        ]
        for row in rows
    ]
    how = (
        f"Measured: median of {REPETITIONS} requests per scenario after 1 discarded warm-up, handlers in "
        "process on moto, SSM config cached just before each warm request; counts are HTTP attempts "
        "(botocore before-send) of every client (the functions' 3 cached ones), '(n calls)' = before-call "
        "count when retries differ. KMS cold: the same request once more on an instance that holds no "
        "TOTP data key (a cold start); OVER when a warm request calls KMS or a cold one calls Decrypt or "
        "GenerateDataKey more than once."
    )
    return Report(
        "\n".join([render(headers, body), how]), rows, [r.scenario for r in rows if r.verdict == "OVER"]
    )
