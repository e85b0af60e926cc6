"""``python -m bench.soak`` (``make soak``): the command line, the local API, the threads, the verdict."""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from threading import Thread

from bench.soak.client import Soak, traffic_random
from bench.soak.memory import Sampler, memory_figures
from bench.soak.report import report, verdict
from bench.soak.traffic import look_after, staff_member, user_life
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from nimbus_tools.local.state import ServeState, read_state

STOP_SECONDS = 60.0  # for the local API to stop on Ctrl-C


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description="Minutes of mixed traffic (users, staff, hostile input) against the local API: fails "
        "on any 5xx, on memory growth beyond the allowance, or on a broken invariant.",
    )
    option = parser.add_argument
    option("--minutes", type=float, default=2.0, help="traffic time (default 2)")
    option("--clients", type=int, default=8, help="concurrent users (default 8), plus one staff member")
    option("--state", type=Path, help="attach to the local API that wrote this serve.json (`make serve`)")
    option("--think-ms", type=float, default=200.0, help="a user's average pause before each request")
    option("--seed", type=int, help="random seed of the traffic (default: a new one, printed)")
    option("--sample-seconds", type=float, default=2.0, help="memory sampling period (default 2)")
    option("--invariant-seconds", type=float, default=30.0, help="invariant check period while traffic runs")
    option("--warm-up", type=float, default=0.25, help="fraction of the run before the start figure")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.clients < 1 or args.sample_seconds <= 0 or args.invariant_seconds <= 0:
        parser.error("--minutes, --clients, --sample-seconds and --invariant-seconds must be positive")
    if not 0 <= args.warm_up < 0.5:
        parser.error("--warm-up must be in [0, 0.5): the second half is judged")
    return args


def run_soak(
    args: argparse.Namespace, seed: int, state: ServeState, state_file: Path, api: LocalApiProcess | None
) -> list[str]:
    """The traffic (each actor and the sampler on a thread), the report; the reasons the soak fails."""
    soak = Soak(state, state_file, seed, think=args.think_ms / 1000)
    staff = staff_member(soak, seed - 1)
    print(f"Soak: {args.minutes:g} min, {args.clients} users at a time and one staff member, seed {seed}")
    sampler = Sampler(soak, api, every=args.sample_seconds, invariant_every=args.invariant_seconds)
    soak.deadline = sampler.started + args.minutes * 60
    users = [partial(soak.live, user_life, soak, traffic_random(seed + i)) for i in range(args.clients)]
    actors = [Thread(target=actor, daemon=True) for actor in (*users, partial(soak.live, look_after, *staff))]
    watcher = Thread(target=sampler.run, daemon=True)  # daemons: Ctrl-C must not wait for them
    for thread in (watcher, *actors):
        thread.start()
    try:
        for thread in actors:
            thread.join()
    except KeyboardInterrupt:  # Ctrl-C: every user skips to its cleanup, nothing more is judged
        soak.deadline = -math.inf
        raise
    finally:
        elapsed = time.monotonic() - sampler.started
        soak.stop.set()
    watcher.join()
    sampler.finish()
    memory = memory_figures(sampler.samples, args.warm_up * args.minutes * 60, state["pid"])
    report(soak, sampler, memory, args, elapsed)
    checks = {"invariant_checks": len(sampler.check_seconds), "violations": len(sampler.violations)}
    return verdict({**soak.counts, **checks}, memory)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; 0 when every check passes, 1 otherwise (2: nothing to attach to)."""
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    api: LocalApiProcess | None = None  # the local API started here (none when attached)
    if args.state is not None:
        state, state_file = read_state(args.state), args.state
        if state is None:  # absent, unreadable, or left by a server that is gone
            print(f"no running local API wrote {args.state}: is `make serve` running?", file=sys.stderr)
            return 2
        print(f"Attached to the local API on {state['api_url']} (pid {state['pid']})", flush=True)
    else:
        print("Starting the local API...", flush=True)
        api = start_local_api(state_dir=Path(tempfile.mkdtemp(prefix="nimbus-soak-")), timeout=120)
        state, state_file = api.state, api.state_dir / "serve.json"
        print(f"Local API on {state['api_url']} (pid {state['pid']}, logs in {api.state_dir / 'logs'})")
    reasons = ["the soak did not finish"]
    try:
        reasons = run_soak(args, seed, state, state_file, api)
    finally:
        if api is not None:
            print("Stopping the local API...", flush=True)
            if (stopped := api.stop(timeout=STOP_SECONDS)) != 0:
                reasons.append(f"the local API did not stop cleanly on Ctrl-C (exit status {stopped})")
                print("\n".join(api.stdout[-10:] + api.stderr[-20:]))
    print("\nPASS" if not reasons else "\nFAIL:\n" + "\n".join(f"  {r}" for r in reasons), flush=True)
    if api is not None and reasons:
        print(f"The local API's function logs are kept in {api.state_dir / 'logs'}")
    elif api is not None:
        shutil.rmtree(api.state_dir, ignore_errors=True)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
