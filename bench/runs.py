"""What the benchmarks share that needs neither moto nor boto3: fresh interpreters for the cold
measurements, run one after another (parallel children would time each other on two cores) and
round-robin over the targets after one discarded warm-up each (bytecode written, page cache warm),
so a burst of load elsewhere spreads over every target; and the AWS settings a run uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple
from unittest.mock import patch

from nimbus_tools.template import REPO_ROOT

REGION = "us-east-1"
# Fake credentials instead of every AWS_* setting (an endpoint, a profile, a retry mode): moto or a
# canned answer responds, nothing can reach an account, and no local setting changes the measure.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
# Settings that would change what a child measures: no .pyc writing (the Lambda runtime has compiled
# files, so cold imports read .pyc), or -X importtime turned on for every run.
DROPPED_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This environment without what would change the measure, with fake AWS and ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in DROPPED_ENV}
    return env | FAKE_AWS | dict(extra)


@contextmanager
def aws_environment() -> Iterator[None]:
    """Fake AWS instead of every AWS_* setting for the block; the environment restored after."""
    with patch.dict(os.environ, FAKE_AWS):
        for name in [n for n in os.environ if n.startswith("AWS_") and n not in FAKE_AWS]:
            del os.environ[name]
        yield


def run_child(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh interpreter at the repository's root; RuntimeError if it fails."""
    result = subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"python {' '.join(args)[:200]} failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    return result


def result_line(stdout: str, prefix: str) -> str:
    """What follows ``prefix`` on the last line of ``stdout`` that starts with it."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip()
    raise RuntimeError(f"no {prefix.strip()} line from the child: {stdout[-2000:]!r}")


def round_robin[K, T](
    targets: Sequence[K], runs: int, sample: Callable[[K], T], *, before: Callable[[], None] | None = None
) -> dict[K, list[T]]:
    """``runs`` samples of every target, taken in turn, after one discarded warm-up each (``sample``
    may check it); ``before`` runs before each round, the warm-ups' included."""
    samples: dict[K, list[T]] = {target: [] for target in targets}
    for index in range(runs + 1):
        if before is not None:
            before()
        for target in targets:
            value = sample(target)
            if index:  # round 0 is the warm-up
                samples[target].append(value)
    return samples


class Report(NamedTuple):
    """What a benchmark prints, its figures as data (``--json``), and what is over its budget."""

    table: str
    data: Any
    over: list[str]
