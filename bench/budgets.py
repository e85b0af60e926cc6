"""Performance budgets: Nimbus against bare boto3 handlers making the same calls, side by side in
one run, as ratios.

Four measures, each against a peer on the same machine in the same run (``bench.budget_bare``):

- cold GET /users/me: a fresh interpreter imports AccountsFunction's handler module and answers its
  first GET /users/me, against a fresh interpreter importing a bare boto3 handler that creates a
  DynamoDB client and makes the same one BatchGetItem;
- cold login: AuthFunction's handler and its first POST /login, against a bare boto3 handler that
  makes the same three DynamoDB calls (counter UpdateItem, username Query, session
  TransactWriteItems) around argon2's verify of the same hash;
- warm GET /users/me: CPU time per request in one warm process, against the bare BatchGetItem;
- warm login: CPU time per POST /login, against the bare login handler (argon2 plus the same three
  boto3 calls): argon2 is the part of a login that no code of ours can make cheaper.

AWS is answered by a botocore ``before-send`` hook (``bench.aws_hook``) with canned bodies built by
the real adapters from a sample user and session, so the SDK does its real work (serialising,
signing, parsing) and only the network is left out; no moto in any timed path. Each handler runs
with the environment the template gives its function. Cold children run one after another,
round-robin over the targets (two shared cores: a burst of load elsewhere spreads over all of them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.calls import FAKE_AWS
from bench.imports import DROPPED_ENV
from bench.table import render
from nimbus_core.adapters.sessions import session_item, session_key
from nimbus_core.adapters.users import user_item, user_key
from nimbus_core.domain.killswitches import OFF, parameter_names
from nimbus_core.domain.ratelimits import LOGIN
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions import passwords
from nimbus_core.sessions.session_issuer import new_session
from nimbus_tools.local.events import HttpRequest, build_event
from nimbus_tools.local.router import Router
from nimbus_tools.template import REPO_ROOT, FunctionSpec, Template, function_specs
from tests.samples import sample_user

CHILD_MODULE = "bench.budget_child"
RESULT = "BUDGET_RESULT "
UNSET_AWS = ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
PASSWORD = "correct horse battery"
USERNAME = "budget_user"
# A browser, as most real logins send (the session keeps it, and is named after it when listed).
BROWSER = "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
WARM_ME = (81, 10)  # rounds, requests per batch: short batches pair better under load
WARM_LOGIN = (31, 2)  # argon2 takes tens of ms per verify


@dataclass(frozen=True)
class Measure:
    """One budgeted ratio: what is measured, the function, the baseline and its limit."""

    key: str
    label: str
    baseline: str
    budget: float


MEASURES = (
    Measure("cold_me", "cold import + first GET /users/me", "bare boto3 handler, same BatchGetItem", 1.0),
    Measure("cold_login", "cold import + first POST /login", "bare boto3 login: argon2 + same 3 calls", 1.3),
    Measure("warm_me", "warm CPU per GET /users/me", "bare boto3 handler, same BatchGetItem", 1.0),
    Measure("warm_login", "warm CPU per POST /login", "bare boto3 login: argon2 + same 3 calls", 1.05),
)
# The AWS calls each scripted request must make: anything else is another code path.
EXPECTED_CALLS = {
    "me": ["ssm.GetParameters", "dynamodb.BatchGetItem"],
    "login": ["ssm.GetParameters", "dynamodb.UpdateItem", "dynamodb.Query", "dynamodb.TransactWriteItems"],
    "bare": ["dynamodb.BatchGetItem"],
    "bare_login": ["dynamodb.UpdateItem", "dynamodb.Query", "dynamodb.TransactWriteItems"],
}
EXPECTED_STATUS = {"me": 200, "login": 201, "bare": 200, "bare_login": 201}


class BudgetScenarioError(RuntimeError):
    """A request did not answer or call AWS as scripted, so its timing would describe another path."""


@dataclass(frozen=True)
class BudgetRow:
    """The figures of one measure."""

    measure: Measure
    nimbus_ms: tuple[float, ...]
    base_ms: tuple[float, ...]

    @property
    def nimbus(self) -> float:
        """Median of the handler's samples."""
        return statistics.median(self.nimbus_ms)

    @property
    def base(self) -> float:
        """Median of the baseline's samples."""
        return statistics.median(self.base_ms)

    @property
    def ratio(self) -> float:
        """The median of the paired ratios: each sample over the baseline's sample taken beside it
        (same round), so a burst of load elsewhere on the machine cancels out instead of landing
        on one side."""
        return statistics.median(n / b for n, b in zip(self.nimbus_ms, self.base_ms, strict=True))

    @property
    def verdict(self) -> str:
        """OK within the budget, OVER beyond it."""
        return "OK" if self.ratio <= self.measure.budget else "OVER"


@dataclass(frozen=True)
class Budgets:
    """Every row, how many samples each figure is the median of, and the cold phases' split."""

    rows: tuple[BudgetRow, ...]
    cold_runs: int
    warm: dict[str, tuple[int, int]]
    cold_split: dict[str, tuple[float, float, float]]  # target -> median import, first request, wall ms


def _spec(specs: Sequence[FunctionSpec], handler_module: str) -> FunctionSpec:
    return next(s for s in specs if s.handler_module == handler_module)


def _serve(specs: Sequence[FunctionSpec], routes: tuple[str, str]) -> str:
    """The handler module of the function the template routes ``METHOD /path`` to."""
    match = Router.from_specs(specs).match(*routes)
    if match is None:
        raise BudgetScenarioError(f"the template routes no function for {' '.join(routes)}")
    return next(s.handler_module for s in specs if s.logical_id == match.function)


def _event(specs: Sequence[FunctionSpec], method: str, path: str, headers: dict[str, str], body: Any) -> Any:
    request = HttpRequest(
        method=method,
        target=path,
        headers=[("host", "api.example"), *headers.items()],
        body=b"" if body is None else json.dumps(body).encode(),
        source_ip="203.0.113.10",
    )
    match = Router.from_specs(specs).match(method, path)
    assert match is not None
    return build_event(request, match)


def _ssm_answer(environment: Mapping[str, str]) -> dict[str, Any]:
    values = dict.fromkeys(parameter_names(environment["KILLSWITCH_PATH"]).values(), OFF)
    values[environment["LOG_LEVEL_PARAMETER"]] = "INFO"
    return {
        "Parameters": [
            {"Name": name, "Type": "String", "Value": value, "Version": 1, "DataType": "text"}
            for name, value in values.items()
        ],
        "InvalidParameters": [],
    }


def build_fixture(specs: Sequence[FunctionSpec], password_hash: str) -> dict[str, Any]:
    """The canned AWS answers and the events of every target, built by the real adapters from a
    sample user and a new session (so they cannot drift from what the code reads), as of now."""
    now = time.time()
    me_module = _serve(specs, ("GET", "/users/me"))
    login_module = _serve(specs, ("POST", "/login"))
    env = _spec(specs, me_module).environment
    user = sample_user(new_id(), USERNAME).changed(password_hash=password_hash)
    issued = new_session(user, name="bench", lifetime=86400, now=now)
    sessions_table, users_table = env["SESSIONS_TABLE"], env["USERS_TABLE"]
    found = {
        "Responses": {sessions_table: [session_item(issued.session)], users_table: [user_item(user)]},
        "UnprocessedKeys": {},
    }
    keys = {
        sessions_table: {"Keys": [session_key(user.id, issued.session.id)], "ConsistentRead": True},
        users_table: {"Keys": [user_key(user.id)], "ConsistentRead": True},
    }
    counter = {
        "Attributes": {
            "pk": {"S": f"{LOGIN.name}#ip#203.0.113.10"},
            "count": {"N": "1"},
            "resetAt": {"N": str(int(now) + LOGIN.window)},
            "expiresAt": {"N": str(int(now) + LOGIN.window)},
        }
    }
    bare = {"module": "bench.budget_bare", "session": "bench.budget_bare:session"}
    login_canned = {
        "dynamodb.UpdateItem": counter,
        "dynamodb.Query": {"Items": [user_item(user)], "Count": 1, "ScannedCount": 1},
        "dynamodb.TransactWriteItems": {},
    }
    bare_login_body = {
        "password": PASSWORD,
        "counter": {
            "TableName": env["COUNTERS_TABLE"],
            "Key": {"pk": counter["Attributes"]["pk"]},
            "UpdateExpression": "ADD #c :one SET resetAt = if_not_exists(resetAt, :r)",
            "ExpressionAttributeNames": {"#c": "count"},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":r": counter["Attributes"]["resetAt"]},
            "ReturnValues": "ALL_NEW",
        },
        "query": {
            "TableName": users_table,
            "IndexName": "UsernameIndex",
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": "usernameKey"},
            "ExpressionAttributeValues": {":k": {"S": USERNAME}},
            "Limit": 2,
        },
        "transaction": {
            "TransactItems": [
                {
                    "Put": {
                        "TableName": sessions_table,
                        "Item": session_item(issued.session),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": users_table,
                        "Key": user_key(user.id),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        },
    }
    bare_login_target = {
        "module": "bench.budget_bare",
        "handler": "login_handler",
        "session": "bench.budget_bare:session",
        "canned": login_canned,
        "event": _event(specs, "POST", "/", {"content-type": "application/json"}, bare_login_body),
    }
    nimbus_session = "nimbus_core.adapters.clients:session"
    bare_target = {
        **bare,
        "canned": {"dynamodb.BatchGetItem": found},
        "event": _event(specs, "POST", "/", {"content-type": "application/json"}, {"RequestItems": keys}),
    }
    return {
        "targets": {
            "me": {
                "module": me_module,
                "session": nimbus_session,
                "canned": {"ssm.GetParameters": _ssm_answer(env), "dynamodb.BatchGetItem": found},
                "event": _event(
                    specs,
                    "GET",
                    "/users/me",
                    {"user-agent": "curl/8.5.0", "authorization": issued.token},
                    None,
                ),
            },
            "login": {
                "module": login_module,
                "session": nimbus_session,
                "canned": {"ssm.GetParameters": _ssm_answer(env), **login_canned},
                "event": _event(
                    specs,
                    "POST",
                    "/login",
                    {"user-agent": BROWSER, "content-type": "application/json"},
                    {"username": USERNAME, "password": PASSWORD},
                ),
            },
            "bare": bare_target,
            "bare_login": bare_login_target,
        },
        "baselines": {
            "me": {"kind": "bare", **bare_target},
            "login": {"kind": "bare", **bare_login_target},
        },
        "environments": {"me": dict(env), "login": dict(_spec(specs, login_module).environment)},
    }


def _child_env(function_env: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV and k not in UNSET_AWS}
    env.update(FAKE_AWS)
    env.update(function_env)
    return env


def _run_child(args: Sequence[str], function_env: Mapping[str, str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", CHILD_MODULE, *args],
        cwd=REPO_ROOT,
        env=_child_env(function_env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT):
            parsed: dict[str, Any] = json.loads(line.removeprefix(RESULT))
            return parsed
    raise BudgetScenarioError(
        f"budget child {' '.join(args[:2])} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    )


def _check(target: str, status: int | list[int], calls: list[str], *, warm: bool = False) -> None:
    statuses = status if isinstance(status, list) else [status]
    expected = EXPECTED_CALLS[target]
    if warm:  # the runtime config is cached (10 s) on a warm function
        calls, expected = [c for c in calls if not c.startswith("ssm.")], expected[1:]
    if statuses != [EXPECTED_STATUS[target]] or calls != expected:
        raise BudgetScenarioError(
            f"{target}: answered {statuses} with calls {calls}; scripted "
            f"{EXPECTED_STATUS[target]} with {expected}"
        )


def measure_budgets(template: Template, runs: int) -> Budgets:
    """Every budgeted ratio: ``runs`` cold interpreters per target, then the two warm processes."""
    specs = function_specs(template)
    password_hash = passwords.hash_password(PASSWORD)
    environments = build_fixture(specs, password_hash)["environments"]
    target_env = {
        "me": environments["me"],
        "login": environments["login"],
        "bare": environments["me"],
        "bare_login": environments["login"],
    }
    cold: dict[str, list[dict[str, Any]]] = {name: [] for name in target_env}
    with tempfile.TemporaryDirectory(prefix="nimbus-budgets-") as directory:
        fixture_path = Path(directory) / "fixture.json"

        def refresh() -> None:  # sessions and counters as of now (usedAt, rate-limit window)
            fixture_path.write_text(json.dumps(build_fixture(specs, password_hash)), encoding="utf-8")

        refresh()
        for name, env in target_env.items():  # warm-up: __pycache__ written, results checked
            first = _run_child(["cold", name, str(fixture_path)], env)
            _check(name, first["status"], first["calls"])
        for _ in range(runs):
            refresh()
            for name, env in target_env.items():
                sample = _run_child(["cold", name, str(fixture_path)], env)
                _check(name, sample["status"], sample["calls"])
                cold[name].append(sample)
        refresh()
        warm: dict[str, dict[str, Any]] = {}
        for name, (rounds, batch) in (("me", WARM_ME), ("login", WARM_LOGIN)):
            result = _run_child(["warm", name, str(fixture_path), str(rounds), str(batch)], target_env[name])
            _check(name, result["statuses"], result["calls"], warm=True)
            warm[name] = result
    totals = {name: tuple(s["total_ms"] for s in samples) for name, samples in cold.items()}
    rows = (
        BudgetRow(MEASURES[0], totals["me"], totals["bare"]),
        BudgetRow(MEASURES[1], totals["login"], totals["bare_login"]),
        BudgetRow(MEASURES[2], tuple(warm["me"]["nimbus_ms"]), tuple(warm["me"]["base_ms"])),
        BudgetRow(MEASURES[3], tuple(warm["login"]["nimbus_ms"]), tuple(warm["login"]["base_ms"])),
    )
    split = {
        name: (
            statistics.median(s["import_ms"] for s in samples),
            statistics.median(s["first_ms"] for s in samples),
            statistics.median(s["wall_ms"] for s in samples),
        )
        for name, samples in cold.items()
    }
    return Budgets(rows, runs, {"me": WARM_ME, "login": WARM_LOGIN}, split)


def format_budgets(budgets: Budgets) -> str:
    """The table of the four ratios and how they were measured."""
    headers = ["Measure", "Nimbus ms", "Bare ms", "Ratio", "Budget", "Verdict", "Baseline"]
    body = [
        [
            row.measure.label,
            f"{row.nimbus:.2f}" if row.nimbus < 10 else f"{row.nimbus:.1f}",
            f"{row.base:.2f}" if row.base < 10 else f"{row.base:.1f}",
            f"{row.ratio:.2f}x",
            f"<= {row.measure.budget:g}x",
            row.verdict,
            row.measure.baseline,
        ]
        for row in budgets.rows
    ]
    (me_rounds, me_batch), (login_rounds, login_batch) = budgets.warm["me"], budgets.warm["login"]
    split = "; ".join(
        f"{name} {imported:.0f} + {first:.0f} ms CPU ({wall:.0f} ms wall)"
        for name, (imported, first, wall) in budgets.cold_split.items()
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join(
        [
            render(headers, body, right=frozenset({1, 2, 3})),
            f"Samples: cold, {budgets.cold_runs} fresh interpreters per target (round-robin, after 1 "
            "discarded warm-up each; CPU time from before the import to the response); warm, "
            f"{me_rounds} batches of {me_batch} GET /users/me and {login_rounds} batches of "
            f"{login_batch} logins, each beside a batch of its baseline in the same process "
            "(process_time, alternating which goes first). ms columns: medians; ratio: median of "
            "the paired ratios (sample / baseline sample of the same round). AWS answered by a "
            "botocore before-send hook with canned bodies (no network, no moto).",
            f"Cold medians, import + first request: {split}. Load average now {load}.",
        ]
    )


def budgets_json(budgets: Budgets) -> list[dict[str, object]]:
    """The rows as plain data for ``--json``."""
    return [
        {
            "measure": row.measure.key,
            "label": row.measure.label,
            "nimbus_ms": round(row.nimbus, 3),
            "base_ms": round(row.base, 3),
            "ratio": round(row.ratio, 3),
            "budget_ratio": row.measure.budget,
            "verdict": row.verdict,
            "nimbus_samples_ms": [round(ms, 3) for ms in row.nimbus_ms],
            "base_samples_ms": [round(ms, 3) for ms in row.base_ms],
        }
        for row in budgets.rows
    ]
