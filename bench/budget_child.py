"""The child interpreter of the budgets bench: ``python -m bench.budget_child MODE TARGET FIXTURE``.

Before the timed import only json and ``bench.aws_hook`` are loaded (no boto3), as on a Lambda cold
start. The result is one ``BUDGET_RESULT {json}`` line.
"""

import importlib
import json
import sys
import time
from typing import Any

from bench.aws_hook import CannedAws

RESULT = "BUDGET_RESULT "


class Context:
    """The parts of the Lambda context the measured handlers read (Powertools' inject_lambda_context)."""

    function_name = "bench"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"


def _attribute(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def cold(target: dict[str, Any]) -> dict[str, object]:
    """Import the handler and answer one request; milliseconds of each part."""
    aws = CannedAws(target["canned"])
    start, start_cpu = time.perf_counter(), time.process_time()
    module = importlib.import_module(target["module"])
    imported_cpu = time.process_time()
    aws.install(_attribute(target["session"])())
    response = getattr(module, target.get("handler", "lambda_handler"))(target["event"], Context())
    done, done_cpu = time.perf_counter(), time.process_time()
    return {
        "import_ms": (imported_cpu - start_cpu) * 1000,
        "first_ms": (done_cpu - imported_cpu) * 1000,
        "total_ms": (done_cpu - start_cpu) * 1000,
        "wall_ms": (done - start) * 1000,
        "status": response["statusCode"],
        "calls": aws.calls,
        "sent": {name.split(".", 1)[1]: json.loads(body) for name, body in aws.sent.items()},
    }


def _events(event: object, count: int) -> list[object]:
    # A fresh copy per request (a handler may normalise its event), made outside the timed batch.
    text = json.dumps(event)
    return [json.loads(text) for _ in range(count)]


def _loaded(target: dict[str, Any]) -> tuple[CannedAws, Any]:
    """The target's handler, imported, its AWS answered from its canned bodies."""
    aws = CannedAws(target["canned"])
    module = importlib.import_module(target["module"])
    aws.install(_attribute(target["session"])())
    return aws, getattr(module, target.get("handler", "lambda_handler"))


def warm(target: dict[str, Any], baseline: dict[str, Any], rounds: int, batch: int) -> dict[str, object]:
    """CPU milliseconds per request of the handler and of its baseline, one figure per batch."""
    context = Context()
    (aws, handler), (_, bare_handler) = _loaded(target), _loaded(baseline)
    # Warm-up (clients, caches, the first request's imports), then what one warm request calls.
    statuses = {handler(e, context)["statusCode"] for e in _events(target["event"], 3)}
    for e in _events(baseline["event"], 3):
        bare_handler(e, context)
    aws.calls.clear()
    handler(_events(target["event"], 1)[0], context)
    warm_calls = aws.calls[:]
    nimbus_ms: list[float] = []
    base_ms: list[float] = []
    for index in range(rounds):
        mine, theirs = _events(target["event"], batch), _events(baseline["event"], batch)
        # Alternate which goes first, so a drift in machine load does not favour one side.
        order = [(handler, mine, nimbus_ms), (bare_handler, theirs, base_ms)]
        for run, events, out in order if index % 2 == 0 else reversed(order):
            started = time.process_time()
            for event in events:
                run(event, context)
            out.append((time.process_time() - started) * 1000 / batch)
    return {
        "nimbus_ms": nimbus_ms,
        "base_ms": base_ms,
        "statuses": sorted(statuses),
        "calls": warm_calls,
    }


def main() -> None:
    """Run one measurement and print its result."""
    mode, name, fixture_path = sys.argv[1:4]
    with open(fixture_path, encoding="utf-8") as file:
        fixture = json.load(file)
    targets = fixture["targets"]
    if mode == "cold":
        result = cold(targets[name])
    else:
        rounds, batch = int(sys.argv[4]), int(sys.argv[5])
        result = warm(targets[name], fixture["baselines"][name], rounds, batch)
    sys.stdout.write(RESULT + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
