"""Whether the soak passes: the reasons it fails, from its counts and its memory figures."""

from __future__ import annotations

from bench.soak.memory import MIB, MemoryFigures


def verdict(
    *,
    server_errors: int,
    transport_errors: int,
    accepted_hostile: int,
    soak_errors: int,
    invariant_checks: int,
    violations: int,
    memory: MemoryFigures | None,
) -> list[str]:
    """Why the soak fails, one line per reason (empty when it passes)."""
    reasons: list[str] = []
    if server_errors:
        reasons.append(f"{server_errors} answers with a 5xx status")
    if transport_errors:
        reasons.append(f"{transport_errors} requests without an answer (connection errors, timeouts)")
    if accepted_hostile:
        reasons.append(f"{accepted_hostile} hostile requests answered with a 2xx")
    if soak_errors:
        reasons.append(f"{soak_errors} errors in the soak's own code (a bug here, see above)")
    if invariant_checks == 0:
        reasons.append("no invariant check ran")
    if violations:
        reasons.append(f"{violations} invariant violations")
    if memory is None:
        reasons.append("too few memory samples to judge growth (run longer)")
    elif not memory.ok:
        reasons.append(
            f"memory grew {memory.growth / MIB:.1f} MiB over the second half, "
            f"more than the {memory.allowance / MIB:.1f} MiB allowed"
        )
    return reasons
