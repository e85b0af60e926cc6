"""``python -m bench``: AWS calls per request (warm functions), revoking every session of a user,
the session sweeper on 5,000 stale sessions, handler import times, keep-alive latency.

The tables are reports, not tests: an OVER verdict is printed, never asserted (timings depend on
the machine). A scenario that does not answer the scripted HTTP status stops the run instead,
because its call counts would describe some other code path.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from nimbus_tools.template import load_template

CALL_REPETITIONS = 5


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "AWS calls per request, revoke-all, the session sweeper, handler import times and "
            "keep-alive latency of Nimbus."
        ),
    )
    parser.add_argument(
        "--runs", type=int, default=7, help="fresh interpreters per module for import times (default 7)"
    )
    parser.add_argument(
        "--only",
        choices=("calls", "revoke", "sweep", "imports", "keepalive"),
        help="run one of the five benchmarks",
    )
    parser.add_argument(
        "--json", action="store_true", help="also print the results as one JSON object on the last line"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the chosen benchmarks and print their tables (and JSON with ``--json``)."""
    args = parse_args(argv)
    started = time.perf_counter()
    template = load_template()
    results: dict[str, Any] = {}
    if args.only in (None, "calls"):
        # Imported here: moto and the handlers take seconds to load, and `--only imports` needs neither
        # (the import timings run in child interpreters, unaffected by this process either way).
        from bench.calls import calls_json, format_calls, measure_calls

        print("== AWS calls per request, warm functions (moto, in process) ==")
        call_rows = measure_calls(template, CALL_REPETITIONS)
        print(format_calls(call_rows, CALL_REPETITIONS))
        results["calls"] = calls_json(call_rows)
        if args.only is None:
            print()
    if args.only in (None, "revoke"):
        from bench.sessions import format_revoke, measure_revoke, revoke_json

        print("== Revoking every session of a user with N sessions (moto, in process) ==")
        revoke_rows = measure_revoke(template)
        print(format_revoke(revoke_rows))
        results["revoke"] = revoke_json(revoke_rows)
        if args.only is None:
            print()
    if args.only in (None, "sweep"):
        from bench.sweep import format_sweep, measure_sweep, sweep_json

        print("== Session sweeper: one user's stale sessions after a generation bump (moto, in process) ==")
        sweep = measure_sweep(template)
        print(format_sweep(sweep))
        results["sweep"] = sweep_json(sweep)
        if args.only is None:
            print()
    if args.only in (None, "imports"):
        from bench.imports import format_imports, imports_json, measure_imports

        print("== Handler import time (fresh interpreter per run) ==")
        import_rows = measure_imports(template, args.runs)
        print(format_imports(import_rows, args.runs))
        results["imports"] = imports_json(import_rows)
        if args.only is None:
            print()
    if args.only in (None, "keepalive"):
        from bench.keepalive import format_keepalive, keepalive_json, measure_keepalive

        print("== Keep-alive requests through the local API's HTTP server (no function work) ==")
        keepalive = measure_keepalive()
        print(format_keepalive(keepalive))
        results["keepalive"] = keepalive_json(keepalive)
    over = [r["scenario"] for r in results.get("calls", []) if r["verdict"] == "OVER"]
    over += [r["function"] for r in results.get("imports", []) if r["verdict"] == "OVER"]
    if results.get("keepalive", {}).get("verdict") == "OVER":
        over.append("keep-alive latency")
    print(f"\nOVER budget: {', '.join(over) if over else 'none'}  ({time.perf_counter() - started:.0f} s)")
    if args.json:
        print(json.dumps(results, separators=(",", ":")))


if __name__ == "__main__":
    main()
