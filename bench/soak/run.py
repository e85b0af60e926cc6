"""One soak: the actors' threads and the sampler's, then the settling, the report and the verdict."""

from __future__ import annotations

import argparse
import math
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench.soak.actor import Actor
from bench.soak.client import Soak, traffic_random
from bench.soak.memory import MIB, memory_figures
from bench.soak.recorder import Failure, LifeAbortedError
from bench.soak.report import print_invariants, report
from bench.soak.sampler import Sampler, table_items
from bench.soak.staff import StaffMember
from bench.soak.users import UserLife
from bench.soak.verdict import verdict
from nimbus_tools.local.launcher import LocalApiProcess
from nimbus_tools.local.state import ServeState


def run_actor(soak: Soak, make: Callable[[], Actor]) -> None:
    """Lives of one actor until the run's time is over; each life ends with its cleanup."""
    actor = make()
    while soak.running():
        try:
            actor.run()
        except LifeAbortedError as error:
            soak.recorder.abort(str(error))
        except Exception:
            soak.recorder.fail(Failure("soak", "soak error", "", traceback.format_exc()), "soak_errors")
        soak.recorder.life_done()


def run_soak(
    args: argparse.Namespace, seed: int, state: ServeState, state_file: Path, api: LocalApiProcess | None
) -> list[str]:
    """The traffic, the samples, the report; the reasons the soak fails."""
    soak = Soak(state, state_file, deadline=math.inf, seed=seed)
    soak.think = args.think_ms / 1000

    def tidy() -> None:
        if api is not None:  # the launcher keeps every line the server prints: only the first are needed
            del api.stdout[100:]

    staff = StaffMember(soak, traffic_random(seed - 1))
    staff.setup()
    print(f"Soak: {args.minutes:g} min, {args.clients} users at a time and one staff member, seed {seed}")
    started = time.monotonic()
    soak.deadline = started + args.minutes * 60
    sampler = Sampler(
        soak,
        state["pid"],
        started=started,
        every=args.sample_seconds,
        invariant_every=args.invariant_seconds,
        tidy=tidy,
    )
    actors = [
        threading.Thread(
            target=run_actor,
            args=(soak, lambda i=i: UserLife(soak, traffic_random(seed + i))),
            name=f"user-{i}",
            daemon=True,  # Ctrl-C must not wait for them
        )
        for i in range(args.clients)
    ]
    actors.append(threading.Thread(target=run_actor, args=(soak, lambda: staff), name="staff", daemon=True))
    watcher = threading.Thread(target=sampler.run, name="sampler", daemon=True)
    watcher.start()
    for thread in actors:
        thread.start()
    try:
        for thread in actors:
            thread.join()
    except KeyboardInterrupt:  # Ctrl-C: every user skips to its cleanup, nothing more is judged
        soak.deadline = -math.inf
        soak.stop.set()
        raise
    elapsed = time.monotonic() - started
    soak.stop.set()
    watcher.join()
    sampler.sample()  # the traffic has stopped: every life has deleted its account
    settled, settling = sampler.settle()
    sampler.checks.check(soak, settled=True)
    memory = memory_figures(sampler.samples, args.warm_up * args.minutes * 60, state["pid"])
    report(soak, sampler, memory, elapsed, args)
    left = ", ".join(f"{table} {count}" for table, count in table_items(soak).items() if count)
    print(
        f"  after the traffic, {settling:.0f} s for mail and sweeps to catch up: RSS"
        f" {settled.total / MIB:.1f} MiB, {settled.mails} emails sent in all, items left: {left or 'none'}"
    )
    print(f"  rate-limit counters of finished users deleted (moto has no TTL): {sampler.expired}")
    print()
    print_invariants(sampler)
    return verdict(
        server_errors=soak.recorder.server_errors,
        transport_errors=soak.recorder.transport_errors,
        accepted_hostile=soak.recorder.accepted_hostile,
        soak_errors=soak.recorder.soak_errors,
        invariant_checks=sampler.checks.runs,
        violations=len(sampler.checks.violations),
        memory=memory,
    )
