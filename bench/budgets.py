"""Performance budgets: Nimbus against bare boto3 handlers making the same calls (docs/performance.md)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.runs import Report, child_env, result_line, round_robin, run_child
from bench.table import render
from nimbus_core.adapters.sessions import session_item
from nimbus_core.adapters.users import user_item
from nimbus_core.domain.killswitches import OFF, parameter_names
from nimbus_core.domain.ratelimits import LOGIN
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions import passwords
from nimbus_core.sessions.session_issuer import new_session
from nimbus_tools.local.events import HttpRequest, build_event
from nimbus_tools.local.router import Router
from nimbus_tools.template import FunctionSpec, Template, function_specs
from tests.samples import PASSWORD, sample_user

USERNAME = "budget_user"
IP = "203.0.113.10"
JSON = {"content-type": "application/json"}
# A browser, as most real logins send (the session keeps it, and is named after it when listed).
BROWSER = "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
WARM = {"me": (81, 10), "login": (31, 2)}  # rounds, requests per batch: argon2 takes tens of ms
# label, baseline, budget (as a ratio) of each measure: (cold or warm, the Nimbus target).
MEASURES = {
    ("cold", "me"): ("cold import + first GET /users/me", "bare boto3 handler, same BatchGetItem", 1.0),
    ("cold", "login"): ("cold import + first POST /login", "bare boto3 login: argon2 + same 3 calls", 1.3),
    ("warm", "me"): ("warm CPU per GET /users/me", "bare boto3 handler, same BatchGetItem", 1.0),
    ("warm", "login"): ("warm CPU per POST /login", "bare boto3 login: argon2 + same 3 calls", 1.05),
}
BARE = {"me": "bare", "login": "bare_login"}
# The AWS calls each scripted request must make, and its status: anything else is another code path.
LOGIN_CALLS = ["dynamodb.UpdateItem", "dynamodb.Query", "dynamodb.TransactWriteItems"]
EXPECTED = {
    "me": (200, ["ssm.GetParameters", "dynamodb.BatchGetItem"]),
    "login": (201, ["ssm.GetParameters", *LOGIN_CALLS]),
    "bare": (200, ["dynamodb.BatchGetItem"]),
    "bare_login": (201, LOGIN_CALLS),
}


@dataclass(frozen=True)
class BudgetRow:
    """One budgeted ratio: the medians of both sides, and the median of the paired ratios (each
    sample over the baseline's sample taken beside it, in the same round, so a burst of load
    elsewhere on the machine cancels out instead of landing on one side)."""

    label: str
    baseline: str
    budget: float
    nimbus_ms: tuple[float, ...]
    base_ms: tuple[float, ...]
    nimbus: float
    base: float
    ratio: float
    verdict: str


def _row(measure: tuple[str, str], nimbus_ms: Sequence[float], base_ms: Sequence[float]) -> BudgetRow:
    label, baseline, budget = MEASURES[measure]
    ratio = statistics.median(n / b for n, b in zip(nimbus_ms, base_ms, strict=True))
    nimbus, base = statistics.median(nimbus_ms), statistics.median(base_ms)
    verdict = "OK" if ratio <= budget else "OVER"
    return BudgetRow(label, baseline, budget, tuple(nimbus_ms), tuple(base_ms), nimbus, base, ratio, verdict)


def _serving(specs: Sequence[FunctionSpec], method: str, path: str) -> FunctionSpec:
    """The function the template routes ``METHOD /path`` to."""
    match = Router.from_specs(specs).match(method, path)
    if match is None:
        raise RuntimeError(f"the template routes no function for {method} {path}")
    return next(s for s in specs if s.logical_id == match.function)


def _event(specs: Sequence[FunctionSpec], method: str, path: str, headers: dict[str, str], body: Any) -> Any:
    raw = b"" if body is None else json.dumps(body).encode()
    request = HttpRequest(method, path, [("host", "api.example"), *headers.items()], raw, source_ip=IP)
    match = Router.from_specs(specs).match(method, path)
    assert match is not None
    return build_event(request, match)


def _ssm_answer(environment: Mapping[str, str]) -> dict[str, Any]:
    values = dict.fromkeys(parameter_names(environment["KILLSWITCH_PATH"]).values(), OFF)
    values[environment["LOG_LEVEL_PARAMETER"]] = "INFO"
    parameters = [
        {"Name": k, "Type": "String", "Value": v, "Version": 1, "DataType": "text"} for k, v in values.items()
    ]
    return {"Parameters": parameters, "InvalidParameters": []}


def build_fixture(
    specs: Sequence[FunctionSpec], password_hash: str, sent: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The canned AWS answers and the events of every target, built by the real adapters from a
    sample user and a new session (so they cannot drift from what the code reads), as of now; the
    bare handlers' events carry what each Nimbus target ``sent`` (once recorded)."""
    now = time.time()
    me, login = _serving(specs, "GET", "/users/me"), _serving(specs, "POST", "/login")
    user = sample_user(new_id(), USERNAME).changed(password_hash=password_hash)
    issued = new_session(user, name="bench", lifetime=86400, now=now)
    sessions_table, users_table = me.environment["SESSIONS_TABLE"], me.environment["USERS_TABLE"]
    found = {
        "Responses": {sessions_table: [session_item(issued.session)], users_table: [user_item(user)]},
        "UnprocessedKeys": {},
    }
    reset = {"N": str(int(now) + LOGIN.window)}
    counter = {
        "pk": {"S": f"{LOGIN.name}#ip#{IP}"},
        "count": {"N": "1"},
        "resetAt": reset,
        "expiresAt": reset,
    }
    login_canned = {
        "dynamodb.UpdateItem": {"Attributes": counter},
        "dynamodb.Query": {"Items": [user_item(user)], "Count": 1, "ScannedCount": 1},
        "dynamodb.TransactWriteItems": {},
    }
    ssm = {"ssm.GetParameters": _ssm_answer(me.environment)}
    me_headers = {"user-agent": "curl/8.5.0", "authorization": issued.token}
    login_body = {"username": USERNAME, "password": PASSWORD}
    bare = {"module": "bench.budget_bare", "session": "bench.budget_bare:session"}
    targets = {
        "me": {"module": me.handler_module, "canned": {**ssm, "dynamodb.BatchGetItem": found}},
        "login": {"module": login.handler_module, "canned": {**ssm, **login_canned}},
        "bare": {**bare, "canned": {"dynamodb.BatchGetItem": found}},
        "bare_login": {**bare, "handler": "login_handler", "canned": login_canned},
    }
    targets["me"]["event"] = _event(specs, "GET", "/users/me", me_headers, None)
    targets["login"]["event"] = _event(specs, "POST", "/login", {"user-agent": BROWSER, **JSON}, login_body)
    for name, bare_name in BARE.items():
        targets[name]["session"] = "nimbus_core.adapters.clients:session"
        targets[bare_name]["event"] = _event(
            specs, "POST", "/", JSON, {"password": PASSWORD, **sent.get(name, {})}
        )
    return {"targets": targets, "baselines": {n: targets[b] for n, b in BARE.items()}}


def _child(args: Sequence[str], function_env: Mapping[str, str]) -> dict[str, Any]:
    done = run_child(["-m", "bench.budget_child", *args], child_env(function_env))
    parsed: dict[str, Any] = json.loads(result_line(done.stdout, "BUDGET_RESULT "))
    return parsed


def _check(target: str, statuses: list[int], calls: list[str], *, warm: bool = False) -> None:
    status, expected = EXPECTED[target]
    if warm:  # the runtime config is cached (10 s) on a warm function
        calls, expected = [c for c in calls if not c.startswith("ssm.")], expected[1:]
    if statuses != [status] or calls != expected:
        raise RuntimeError(
            f"{target}: answered {statuses} with calls {calls}; scripted {status} with {expected}"
        )


def measure_budgets(template: Template, runs: int) -> tuple[list[BudgetRow], dict[str, tuple[float, ...]]]:
    """Every budgeted ratio (``runs`` cold interpreters per target, then the two warm processes),
    and the cold medians of each target: import, first request, wall (ms)."""
    specs = function_specs(template)
    password_hash = passwords.hash_password(PASSWORD)
    sent: dict[str, dict[str, Any]] = {}
    me, login = _serving(specs, "GET", "/users/me").environment, _serving(specs, "POST", "/login").environment
    envs = {"me": me, "login": login, "bare": me, "bare_login": login}
    with tempfile.TemporaryDirectory(prefix="nimbus-budgets-") as directory:
        fixture = Path(directory) / "fixture.json"

        def refresh() -> None:  # sessions and counters as of now (usedAt, rate-limit window)
            fixture.write_text(json.dumps(build_fixture(specs, password_hash, sent)), encoding="utf-8")

        def cold(name: str) -> dict[str, Any]:
            sample = _child(["cold", name, str(fixture)], envs[name])
            _check(name, [sample["status"]], sample["calls"])
            return sample

        refresh()
        sent.update({name: cold(name)["sent"] for name in BARE})  # what the bare handlers will send
        samples = round_robin(list(envs), runs, cold, before=refresh)
        refresh()
        rows = [
            _row(("cold", n), [s["total_ms"] for s in samples[n]], [s["total_ms"] for s in samples[BARE[n]]])
            for n in BARE
        ]
        for name, (rounds, batch) in WARM.items():
            warm = _child(["warm", name, str(fixture), str(rounds), str(batch)], envs[name])
            _check(name, warm["statuses"], warm["calls"], warm=True)
            rows.append(_row(("warm", name), warm["nimbus_ms"], warm["base_ms"]))
    split = {
        n: tuple(statistics.median(s[k] for s in got) for k in ("import_ms", "first_ms", "wall_ms"))
        for n, got in samples.items()
    }
    return rows, split


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def run(template: Template, runs: int) -> Report:
    """The table of the four ratios (``runs`` cold interpreters per target) and how they were measured."""
    rows, split = measure_budgets(template, runs)
    headers = ["Measure", "Nimbus ms", "Bare ms", "Ratio", "Budget", "Verdict", "Baseline"]
    body = [
        [r.label, _ms(r.nimbus), _ms(r.base), f"{r.ratio:.2f}x", f"<= {r.budget:g}x", r.verdict, r.baseline]
        for r in rows
    ]
    (me_rounds, me_batch), (login_rounds, login_batch) = WARM["me"], WARM["login"]
    cold = "; ".join(
        f"{name} {i:.0f} + {f:.0f} ms CPU ({w:.0f} ms wall)" for name, (i, f, w) in split.items()
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    table = "\n".join(
        [
            render(headers, body, right=frozenset({1, 2, 3})),
            f"Samples: cold, {runs} fresh interpreters per target (round-robin, after 1 "
            "discarded warm-up each; CPU time from before the import to the response); warm, "
            f"{me_rounds} batches of {me_batch} GET /users/me and {login_rounds} batches of "
            f"{login_batch} logins, each beside a batch of its baseline in the same process "
            "(process_time, alternating which goes first). ms columns: medians; ratio: median of "
            "the paired ratios (sample / baseline sample of the same round). AWS answered by a "
            "botocore before-send hook with canned bodies (no network, no moto).",
            f"Cold medians, import + first request: {cold}. Load average now {load}.",
        ]
    )
    return Report(table, rows, [r.label for r in rows if r.verdict == "OVER"])
