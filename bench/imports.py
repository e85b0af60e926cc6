"""Import time of each function's handler module, against a handler that only imports boto3: what a
cold start pays before the first request, so each figure comes from a fresh interpreter, the child
timing ``importlib.import_module`` alone (``bench.runs``: one child at a time, round-robin).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from bench.runs import Report, child_env, result_line, round_robin, run_child
from bench.table import render
from nimbus_tools.template import Template, function_specs

BARE_MODULE = "bench.bare_handler"
WEBAUTHN_MODULE = "bench.factors_with_webauthn"
BUDGET_RATIO = 2.0
TOP = 8
MARKER = "--- bench: the measured import starts here ---"
# Runs in the child: everything before the marker (interpreter and site start-up) is not measured.
CHILD = (
    "import importlib, sys, time\n"
    "print(sys.argv[2], file=sys.stderr, flush=True)\n"
    "start = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print('IMPORT_SECONDS', time.perf_counter() - start)\n"
)
_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


@dataclass(frozen=True)
class Target:
    """A module to import and the environment its function gets from the template."""

    label: str
    module: str
    environment: dict[str, str]
    budgeted: bool = True  # False: a figure to compare with, not a handler the budget applies to


@dataclass(frozen=True)
class Contributor:
    """One module of an ``-X importtime`` run: its own import time (children excluded), the module
    that imported it, and the nearest first-party module on that import chain (what to change)."""

    module: str
    self_ms: float
    imported_by: str
    first_party: str


@dataclass(frozen=True)
class ImportRow:
    """The import figures of one target."""

    label: str
    module: str
    runs_ms: tuple[float, ...]
    median_ms: float
    ratio: float | None  # to the bare boto3 handler; None for the baseline itself
    verdict: str  # OK, OVER, or "-" for the baseline and rows without a budget
    top: tuple[Contributor, ...]  # largest self times, whether the bare handler has them or not
    added: tuple[Contributor, ...]  # modules the bare boto3 handler does not import


def targets(template: Template) -> list[Target]:
    """The bare boto3 handler first (the baseline), then every function's handler module."""
    specs = function_specs(template)
    [factors] = [spec for spec in specs if spec.handler_module == "factors_api.handler"]
    return [
        # The baseline gets the same environment as a real function, so only the code differs.
        Target("bare boto3 handler", BARE_MODULE, specs[0].environment),
        *(Target(spec.logical_id, spec.handler_module, spec.environment) for spec in specs),
        # What the lazy import of py_webauthn saves every request that runs no ceremony.
        Target("SecondFactorsFunction + py_webauthn", WEBAUTHN_MODULE, factors.environment, budgeted=False),
    ]


def _run_child(target: Target, *, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    # At the repository's root: sys.path[0] is the working directory with -c, so bench.* resolves.
    flags = ["-X", "importtime"] if importtime else []
    args = [*flags, "-c", CHILD, target.module, MARKER]
    return run_child(args, child_env(target.environment), timeout=120)


def time_import(target: Target) -> float:
    """Milliseconds to import ``target.module`` in a fresh interpreter."""
    return float(result_line(_run_child(target).stdout, "IMPORT_SECONDS ")) * 1000


def profile_import(target: Target, first_party: frozenset[str]) -> list[Contributor]:
    """Every module of one ``-X importtime`` run of ``target``, in import-completion order.

    ``-X importtime`` prints a module after its children, indented one level deeper than its
    importer, so a module's importer is the next line with less indentation.
    """
    stderr = _run_child(target, importtime=True).stderr
    lines = stderr.split(MARKER, 1)[-1].splitlines()
    parsed = [(int(m[1]), len(m[3]), m[4]) for m in map(_IMPORTTIME.match, lines) if m]
    importer: dict[str, str] = {}
    for index, (_, depth, module) in enumerate(parsed):
        importer[module] = next((name for _, d, name in parsed[index + 1 :] if d < depth), "-")

    def first_party_importer(module: str) -> str:
        current = importer[module]
        while current != "-" and current.split(".")[0] not in first_party:
            current = importer.get(current, "-")
        return current

    return [
        Contributor(module, self_us / 1000, importer[module], first_party_importer(module))
        for self_us, _, module in parsed
    ]


def measure_imports(template: Template, runs: int) -> list[ImportRow]:
    """Time every target ``runs`` times (after one discarded warm-up each) and profile each once."""
    chosen = targets(template)
    first_party = frozenset({"nimbus_core", "bench", *(t.module.split(".")[0] for t in chosen)})
    # The warm-up writes __pycache__, so the timed runs read .pyc like Lambda.
    by_module = {t.module: t for t in chosen}
    timings = round_robin(list(by_module), runs, lambda module: time_import(by_module[module]))
    baseline = statistics.median(timings[BARE_MODULE])
    in_bare = {c.module for c in profile_import(chosen[0], first_party)}
    rows = []
    for target in chosen:
        runs_ms = tuple(timings[target.module])
        median = statistics.median(runs_ms)
        ratio = None if target.module == BARE_MODULE else median / baseline
        profile = [] if ratio is None else profile_import(target, first_party)
        verdict = "-" if ratio is None or not target.budgeted else ("OK" if ratio <= BUDGET_RATIO else "OVER")
        top = tuple(sorted(profile, key=lambda c: c.self_ms, reverse=True)[:TOP])
        added = tuple(c for c in profile if c.module not in in_bare)
        rows.append(ImportRow(target.label, target.module, runs_ms, median, ratio, verdict, top, added))
    return rows


def _by_package(contributors: Sequence[Contributor]) -> dict[str, float]:
    """Self time per top-level package, largest first."""
    totals: defaultdict[str, float] = defaultdict(float)
    for c in contributors:
        totals[c.module.split(".")[0]] += c.self_ms
    return dict(sorted(totals.items(), key=lambda item: item[1], reverse=True))


def run(template: Template, runs: int) -> Report:
    """The import-time table (``runs`` fresh interpreters per module), how it was measured, and where
    each handler's import time goes."""
    rows = measure_imports(template, runs)
    headers = ["Function", "Handler module", "Median ms", "Min-max ms", "x bare", "Budget", "Verdict"]
    body = [
        [
            row.label,
            row.module,
            f"{row.median_ms:.0f}",
            f"{min(row.runs_ms):.0f}-{max(row.runs_ms):.0f}",
            "1.00" if row.ratio is None else f"{row.ratio:.2f}",
            "-" if row.verdict == "-" else f"<= {BUDGET_RATIO:g}x bare",
            row.verdict,
        ]
        for row in rows
    ]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    parts = [
        render(headers, body, right=frozenset({2, 3, 4})),
        f"Measured: median of {runs} fresh `{os.path.basename(sys.executable)} -c` interpreters per module "
        "(perf_counter around the import only, template environment, .pyc cached by 1 discarded "
        f"warm-up run); load average now {load}.",
    ]
    for row in rows:
        if not row.top:
            continue
        added = {c.module for c in row.added}
        top = [
            [f"{c.self_ms:.1f}", c.module, c.imported_by, c.first_party, "no" if c.module in added else "yes"]
            for c in row.top
        ]
        headers = ["Self ms", "Module", "Imported by", "First-party importer", "Bare boto3 has it"]
        parts.append(
            f"\n{row.module}: top {len(row.top)} self times, one `-X importtime` run (adds overhead)"
        )
        parts.append(render(headers, top, right=frozenset({0})))
        packages = ", ".join(f"{name} {ms:.0f}" for name, ms in list(_by_package(row.added).items())[:6])
        parts.append(
            f"Not imported by the bare boto3 handler: {len(row.added)} modules, "
            f"{sum(c.self_ms for c in row.added):.0f} ms self time; by package (ms): {packages}"
        )
    return Report("\n".join(parts), rows, [r.label for r in rows if r.verdict == "OVER"])
