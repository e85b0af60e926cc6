"""``python -m bench``: every part of docs/performance.md's table, or one (``--only``).

The tables are reports, not tests: an OVER verdict is printed, never asserted (timings depend on
the machine). A scenario that does not answer the scripted HTTP status stops the run instead,
because its call counts would describe some other code path.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import time
from collections.abc import Sequence
from typing import Any

from nimbus_tools.template import load_template

# In the order of a full run: name -> (heading, "module:function"), the function taking the template
# and --runs. Its module is imported when it runs: moto and the handlers take seconds to load, and
# ``--only imports`` needs neither (the import timings run in child interpreters, unaffected by this
# process either way).
BENCHMARKS = {
    "calls": ("AWS calls per request, warm functions (moto, in process)", "calls:run"),
    "revoke": ("Revoking every session of a user with N sessions (moto, in process)", "sessions:revoke"),
    "sweep": (
        "Session sweeper: one user's stale sessions after a generation bump (moto, in process)",
        "sessions:sweep",
    ),
    "ban": ("Banning a user with N sessions, then sweeping them (moto, in process)", "sessions:ban"),
    "imports": ("Handler import time (fresh interpreter per run)", "imports:run"),
    "passwords": (
        "Compromised-password check: import, first use (the shipped list) and one lookup",
        "passwords:run",
    ),
    "budgets": (
        "Performance budgets: Nimbus against bare boto3 handlers making the same calls, in one run",
        "budgets:run",
    ),
    "sdk": (
        "What each SDK choice buys: botocore's defaults against the functions' public options",
        "sdk_choices:run",
    ),
    "import": (
        "nimbus import: an upstream PostgreSQL database of 10,000 users into the stack",
        "import_rate:run",
    ),
    "local-scale": (
        "make serve at real sizes: GET /users/me and POST /login, 100 users against 100,000 users",
        "local_scale:run",
    ),
    "keepalive": (
        "Keep-alive requests through the local API's HTTP server (no function work)",
        "local_api:keepalive",
    ),
    "recovery": (
        "POST /users/recover: an account's name against no account's, over HTTP (local API)",
        "local_api:recovery",
    ),
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    about = (
        "AWS calls per request, revoke-all, the sweeper, bans, import times, the compromised-password "
        "check, budgets, SDK choices, import, "
    )
    about += "the local stack at real sizes, keep-alive latency and recovery timing of Nimbus "
    about += "(docs/performance.md)."
    parser = argparse.ArgumentParser(prog="python -m bench", description=about)
    runs = "fresh interpreters per module for import times and per target for the cold budgets (default 7)"
    parser.add_argument("--runs", type=int, default=7, help=runs)
    parser.add_argument(
        "--only", choices=tuple(BENCHMARKS), help=f"run one of the {len(BENCHMARKS)} benchmarks"
    )
    parser.add_argument(
        "--json", action="store_true", help="also print the results as one JSON object on the last line"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def _plain(value: Any) -> Any:
    """A figure's record as JSON data: what its ``as_json`` gives, or a dataclass's fields."""
    return value.as_json() if hasattr(value, "as_json") else dataclasses.asdict(value)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the chosen benchmarks and print their tables (and JSON with ``--json``)."""
    args = parse_args(argv)
    started = time.perf_counter()
    template = load_template()
    results: dict[str, Any] = {}
    over: list[str] = []
    for index, name in enumerate([args.only] if args.only else BENCHMARKS):
        heading, where = BENCHMARKS[name]
        module, function = where.split(":")
        print(f"{chr(10) if index else ''}== {heading} ==")
        report = getattr(importlib.import_module(f"bench.{module}"), function)(template, args.runs)
        print(report.table)
        results[name] = report.data
        over += report.over
    print(f"\nOVER budget: {', '.join(over) if over else 'none'}  ({time.perf_counter() - started:.0f} s)")
    if args.json:
        print(json.dumps(results, separators=(",", ":"), default=_plain))


if __name__ == "__main__":
    main()
