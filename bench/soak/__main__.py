"""``python -m bench.soak`` (``make soak``): the command line, the local API started (or attached
to) and stopped, PASS or FAIL."""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.soak.run import run_soak
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from nimbus_tools.local.state import process_alive, read_state

DEFAULT_MINUTES = 2.0
DEFAULT_CLIENTS = 8
THINK_MS = 200.0  # a user's average pause before a request
SAMPLE_SECONDS = 2.0
INVARIANT_SECONDS = 30.0
WARM_UP_FRACTION = 0.25
STOP_SECONDS = 60.0  # for the local API to stop on Ctrl-C


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=(
            "Minutes of mixed traffic (users, staff, hostile input) against the local API: fails on any "
            "5xx, on memory growth beyond the allowance, or on a broken invariant."
        ),
    )
    parser.add_argument(
        "--minutes", type=float, default=DEFAULT_MINUTES, help=f"traffic time (default {DEFAULT_MINUTES:g})"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=DEFAULT_CLIENTS,
        help=f"concurrent users (default {DEFAULT_CLIENTS}), plus one staff member",
    )
    parser.add_argument(
        "--state",
        type=Path,
        help="attach to the local API that wrote this serve.json (`make serve`: .local/serve.json)",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=THINK_MS,
        help=f"a user's average pause before each request (default {THINK_MS:g} ms)",
    )
    parser.add_argument("--seed", type=int, help="random seed of the traffic (default: a new one, printed)")
    parser.add_argument("--sample-seconds", type=float, default=SAMPLE_SECONDS, help="memory sampling period")
    parser.add_argument(
        "--invariant-seconds",
        type=float,
        default=INVARIANT_SECONDS,
        help="invariant check period while traffic runs",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_FRACTION,
        help="fraction of the run before the start figure (default 0.25)",
    )
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.clients < 1 or args.sample_seconds <= 0 or args.invariant_seconds <= 0:
        parser.error("--minutes, --clients, --sample-seconds and --invariant-seconds must be positive")
    if not 0 <= args.warm_up < 0.5:
        parser.error("--warm-up must be in [0, 0.5): the second half is judged")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; 0 when every check passes, 1 otherwise (2: nothing to attach to)."""
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    api: LocalApiProcess | None = None
    state_dir: Path | None = None
    if args.state is not None:
        state = read_state(args.state)
        if state is None or not process_alive(state["pid"]):
            print(f"no running local API wrote {args.state}: is `make serve` running?", file=sys.stderr)
            return 2
        state_file = args.state
        print(f"Attached to the local API on {state['api_url']} (pid {state['pid']})", flush=True)
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="nimbus-soak-"))
        print("Starting the local API...", flush=True)
        api = start_local_api(state_dir=state_dir, timeout=120)
        state, state_file = api.state, state_dir / "serve.json"
        print(
            f"Local API on {state['api_url']} (pid {state['pid']}, logs in {state_dir / 'logs'})", flush=True
        )
    reasons = ["the soak did not finish"]
    try:
        reasons = run_soak(args, seed, state, state_file, api)
    finally:
        if api is not None:
            print("Stopping the local API...", flush=True)
            stopped = api.stop(timeout=STOP_SECONDS)
            if stopped != 0:
                reasons.append(f"the local API did not stop cleanly on Ctrl-C (exit status {stopped})")
                print("\n".join(api.stdout[-10:] + api.stderr[-20:]))
    print()
    print("PASS" if not reasons else "FAIL:\n" + "\n".join(f"  {r}" for r in reasons), flush=True)
    if state_dir is not None:
        if reasons:
            print(f"The local API's function logs are kept in {state_dir / 'logs'}")
        else:
            shutil.rmtree(state_dir, ignore_errors=True)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
