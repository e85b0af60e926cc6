"""The child interpreter of the budgets bench: ``python -m bench.budget_child MODE TARGET FIXTURE``.

``cold``: import TARGET's handler module and answer its first request, timed from before the import
to the response (the interpreter's own start-up, equal for all, is left out): CPU time
(process_time; the cold path is CPU bound, and waiting for the other engineers' processes on the
two shared cores is not counted) and wall time (perf_counter) for reference.
``warm``: import TARGET's handler and its baseline, then time requests in alternating batches with
process_time (CPU time: a batch waiting for the other engineers' processes is not counted).

Before the timed import this imports only the standard library's json and ``bench.aws_hook`` (no
boto3): everything the handler needs is loaded inside the measurement, as on a Lambda cold start.
The result is printed as one ``BUDGET_RESULT {json}`` line (the handlers print their own logs).
"""

import importlib
import json
import sys
import time

from bench.aws_hook import CannedAws

RESULT = "BUDGET_RESULT "


class Context:
    """The parts of the Lambda context the handlers read."""

    function_name = "bench"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        """Plenty of time left."""
        return 10_000


def _attribute(path: str) -> object:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def cold(target: dict[str, object]) -> dict[str, object]:
    """Import the handler and answer one request; milliseconds of each part."""
    aws = CannedAws(target["canned"])  # type: ignore[arg-type]
    start, start_cpu = time.perf_counter(), time.process_time()
    module = importlib.import_module(str(target["module"]))
    imported_cpu = time.process_time()
    aws.install(_attribute(str(target["session"]))())  # type: ignore[operator]
    response = getattr(module, str(target.get("handler", "lambda_handler")))(target["event"], Context())
    done, done_cpu = time.perf_counter(), time.process_time()
    return {
        "import_ms": (imported_cpu - start_cpu) * 1000,
        "first_ms": (done_cpu - imported_cpu) * 1000,
        "total_ms": (done_cpu - start_cpu) * 1000,
        "wall_ms": (done - start) * 1000,
        "status": response["statusCode"],
        "calls": aws.calls,
    }


def _events(event: object, count: int) -> list[object]:
    # A fresh copy per request (a handler may normalise its event), made outside the timed batch.
    text = json.dumps(event)
    return [json.loads(text) for _ in range(count)]


def warm(
    target: dict[str, object], baseline: dict[str, object], rounds: int, batch: int
) -> dict[str, object]:
    """CPU milliseconds per request of the handler and of its baseline, one figure per batch."""
    aws = CannedAws(target["canned"])  # type: ignore[arg-type]
    module = importlib.import_module(str(target["module"]))
    aws.install(_attribute(str(target["session"]))())  # type: ignore[operator]
    context = Context()

    def nimbus(event: object) -> object:
        return module.lambda_handler(event, context)

    bare_aws = CannedAws(baseline["canned"])  # type: ignore[arg-type]
    bare = importlib.import_module(str(baseline["module"]))
    bare_aws.install(_attribute(str(baseline["session"]))())  # type: ignore[operator]
    bare_handler = getattr(bare, str(baseline.get("handler", "lambda_handler")))

    def base(event: object) -> object:
        return bare_handler(event, context)

    # Warm-up (clients, caches, the first request's imports), then what one warm request calls.
    statuses = {nimbus(e)["statusCode"] for e in _events(target["event"], 3)}  # type: ignore[index]
    for e in _events(baseline.get("event"), 3):
        base(e)
    aws.calls.clear()
    nimbus(_events(target["event"], 1)[0])
    warm_calls = aws.calls[:]
    nimbus_ms: list[float] = []
    base_ms: list[float] = []
    for index in range(rounds):
        mine, theirs = _events(target["event"], batch), _events(baseline.get("event"), batch)
        # Alternate which goes first, so a drift in machine load does not favour one side.
        order = [(nimbus, mine, nimbus_ms), (base, theirs, base_ms)]
        for run, events, out in order if index % 2 == 0 else reversed(order):
            started = time.process_time()
            for event in events:
                run(event)
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
