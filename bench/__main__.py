"""``python -m bench``: AWS calls per request (warm functions), revoking every session of a user,
the session sweeper on 5,000 stale sessions, banning a user with 1,000 sessions (and the sweep after),
handler import times, the performance budgets (Nimbus against bare handlers, cold and warm, as
ratios), what each SDK choice buys, the pace of ``nimbus import``, keep-alive latency, and how
long ``POST /users/recover`` takes for an account's name against no account's.

The tables are reports, not tests: an OVER verdict is printed, never asserted (timings depend on
the machine). A scenario that does not answer the scripted HTTP status stops the run instead,
because its call counts would describe some other code path.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from nimbus_tools.template import Template, load_template

CALL_REPETITIONS = 5


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "AWS calls per request, revoke-all, the session sweeper, banning a user with 1,000 "
            "sessions, handler import times, performance budgets, keep-alive latency and recovery "
            "timing of Nimbus."
        ),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=7,
        help="fresh interpreters per module for import times and per target for the cold budgets (default 7)",
    )
    parser.add_argument(
        "--only",
        choices=tuple(BENCHMARKS),
        help=f"run one of the {len(BENCHMARKS)} benchmarks",
    )
    parser.add_argument(
        "--json", action="store_true", help="also print the results as one JSON object on the last line"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


# Each benchmark imports its module when it runs: moto and the handlers take seconds to load, and
# `--only imports` needs neither (the import timings run in child interpreters, unaffected by this
# process either way). Each returns its printed table and its results for --json.


def _calls(template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.calls import calls_json, format_calls, measure_calls

    rows = measure_calls(template, CALL_REPETITIONS)
    return format_calls(rows, CALL_REPETITIONS), calls_json(rows)


def _revoke(template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.sessions import format_revoke, measure_revoke, revoke_json

    rows = measure_revoke(template)
    return format_revoke(rows), revoke_json(rows)


def _sweep(template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.sweep import format_sweep, measure_sweep, sweep_json

    sweep = measure_sweep(template)
    return format_sweep(sweep), sweep_json(sweep)


def _ban(template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.ban import ban_json, format_ban, measure_ban

    rows = measure_ban(template)
    return format_ban(rows), ban_json(rows)


def _imports(template: Template, args: argparse.Namespace) -> tuple[str, Any]:
    from bench.imports import format_imports, imports_json, measure_imports

    rows = measure_imports(template, args.runs)
    return format_imports(rows, args.runs), imports_json(rows)


def _budgets(template: Template, args: argparse.Namespace) -> tuple[str, Any]:
    from bench.budgets import budgets_json, format_budgets, measure_budgets

    budgets = measure_budgets(template, args.runs)
    return format_budgets(budgets), budgets_json(budgets)


def _sdk(_template: Template, args: argparse.Namespace) -> tuple[str, Any]:
    from bench.sdk_choices import format_sdk, measure_sdk, sdk_json

    result = measure_sdk(args.runs)
    return format_sdk(result, args.runs), sdk_json(result)


def _import(template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.import_rate import format_import, import_json, measure_import

    result = measure_import(template)
    return format_import(result), import_json(result)


def _recovery(_template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.recovery_timing import format_recovery_timing, measure_recovery_timing, recovery_timing_json

    timing = measure_recovery_timing()
    return format_recovery_timing(timing), recovery_timing_json(timing)


def _keepalive(_template: Template, _args: argparse.Namespace) -> tuple[str, Any]:
    from bench.keepalive import format_keepalive, keepalive_json, measure_keepalive

    keepalive = measure_keepalive()
    return format_keepalive(keepalive), keepalive_json(keepalive)


Benchmark = Callable[[Template, argparse.Namespace], tuple[str, Any]]
# In the order of a full run: name -> (heading, benchmark).
BENCHMARKS: dict[str, tuple[str, Benchmark]] = {
    "calls": ("AWS calls per request, warm functions (moto, in process)", _calls),
    "revoke": ("Revoking every session of a user with N sessions (moto, in process)", _revoke),
    "sweep": (
        "Session sweeper: one user's stale sessions after a generation bump (moto, in process)",
        _sweep,
    ),
    "ban": ("Banning a user with N sessions, then sweeping them (moto, in process)", _ban),
    "imports": ("Handler import time (fresh interpreter per run)", _imports),
    "budgets": (
        "Performance budgets: Nimbus against bare boto3 handlers making the same calls, in one run",
        _budgets,
    ),
    "sdk": ("What each SDK choice buys: botocore's defaults against the functions' public options", _sdk),
    "import": ("nimbus import: an upstream PostgreSQL database of 10,000 users into the stack", _import),
    "keepalive": ("Keep-alive requests through the local API's HTTP server (no function work)", _keepalive),
    "recovery": (
        "POST /users/recover: an account's name against no account's, over HTTP (local API)",
        _recovery,
    ),
}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the chosen benchmarks and print their tables (and JSON with ``--json``)."""
    args = parse_args(argv)
    started = time.perf_counter()
    template = load_template()
    results: dict[str, Any] = {}
    chosen = [args.only] if args.only else list(BENCHMARKS)
    for index, name in enumerate(chosen):
        heading, benchmark = BENCHMARKS[name]
        if index:
            print()
        print(f"== {heading} ==")
        table, results[name] = benchmark(template, args)
        print(table)
    over = [r["scenario"] for r in results.get("calls", []) if r["verdict"] == "OVER"]
    over += [r["function"] for r in results.get("imports", []) if r["verdict"] == "OVER"]
    over += [r["label"] for r in results.get("budgets", []) if r["verdict"] == "OVER"]
    if results.get("keepalive", {}).get("verdict") == "OVER":
        over.append("keep-alive latency")
    if results.get("recovery", {}).get("verdict") == "OVER":
        over.append("recovery timing")
    print(f"\nOVER budget: {', '.join(over) if over else 'none'}  ({time.perf_counter() - started:.0f} s)")
    if args.json:
        print(json.dumps(results, separators=(",", ":")))


if __name__ == "__main__":
    main()
