"""AWS calls per request on a warm function, counted at the SDK boundary under moto (docs/performance.md).

What an endpoint's registration cannot say is a row of ``VARIANTS``. A round trip is an HTTP
attempt: that is what a budget counts.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import groupby
from typing import Any, Literal

import boto3

from bench.runs import REGION, Report
from bench.stack import (
    Account,
    Harness,
    ScenarioError,
    Tally,
    expect,
    measure,
    moto_stack,
    set_config,
)
from bench.table import render
from nimbus_core.adapters import container
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.adapters.user_items import list_partitions
from nimbus_core.adapters.user_listing import count_batches
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES, LOGIN
from nimbus_core.http.policy import Auth
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.auth import USED_AT_REFRESH_SECONDS
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.openapi import Registered, build_document, registered_endpoints
from nimbus_tools.template import Template
from tests.samples import PASSWORD, REQUEST_BODIES

SERVICES = ("dynamodb", "ssm", "sesv2", "kms")
# KMS per instance (docs/security.md, "Sealed secrets"): a warm one holds its data keys and calls
# nothing; a cold one opens each data key it meets once (Decrypt) and makes one to seal with.
KMS_COLD_LIMIT = {"Decrypt": 1, "GenerateDataKey": 1}
REPETITIONS = 5
Setup = Callable[[Harness, Account, dict[str, Any]], None]


@dataclass(frozen=True)
class Budget:
    """A limit on one request's AWS calls; None means "not limited"."""

    text: str
    dynamodb: int | None = None
    ssm: int | None = None
    ses: int | None = None
    total: int | None = None

    def verdict(self, trips: Mapping[str, int]) -> str:
        """OVER if ``trips`` (round trips per service) exceed any limit, else OK."""
        counted = [(self.dynamodb, trips["dynamodb"]), (self.ssm, trips["ssm"]), (self.ses, trips["sesv2"])]
        counted.append((self.total, sum(trips.values())))
        return "OVER" if any(limit is not None and n > limit for limit, n in counted) else "OK"


@dataclass(frozen=True)
class Variant:
    """How one scenario of an endpoint differs from the plain request its registration gives."""

    label: str = ""
    budget: Budget | None = None
    status: int | None = None  # the answer expected, when not the endpoint's success
    body: Mapping[str, Any] | None = None  # instead of the sample body of the endpoint's model
    query: str = ""
    params: Mapping[str, str] = field(default_factory=dict)  # path parameters given as they are
    account: bool = True  # False: the user named ("{username}") is no account
    # The state of the user the request is about (the caller, or a staff endpoint's user).
    logins: int = 0
    factor: Literal["totp", "key", "passkey"] | None = None
    staff: bool = False
    verified: bool = False
    banned: bool = False
    step: Literal["ask", "answer"] = "answer"  # "ask": the challenged first request is measured
    challenged: bool = False  # a second factor is asked for though the policy does not reverify (login)
    setup: Setup | None = None  # more uncounted setup, filling ``values`` for the body
    config: Literal["warm", "cold"] = "warm"
    # Fields the answer's body must hold: a change answered 200 without changing anything (unban
    # of a user who is not banned) would be another code path.
    expect_body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """One scenario of one registered endpoint, before any setup."""

    endpoint: str  # "PUT /users/<id>/ban", as registered
    name: str
    status: int
    registered: Registered
    body: Mapping[str, Any] | None
    params: dict[str, str]  # path parameter -> the value that fills it
    variant: Variant


@dataclass(frozen=True)
class Scenario:
    """One request to measure: ``prepare`` does the uncounted setup and returns the request itself,
    so only that request falls inside the counting window."""

    name: str
    expected_status: int
    prepare: Callable[[], Callable[[], Reply]]
    variant: Variant = Variant()  # its budget, config and expected body


# Register, asking for a recovery link (whatever the name), verifying an address.
TWO_NO_MAIL = Budget("DynamoDB <= 2, SES 0", dynamodb=2, ses=0)
# Each self-service change is authentication + limit + one transaction, and never SES; so is a
# password reset (limit, token and user, transaction) and the recovery function's handling of one
# request (the index Query, the claim on a miss, one transaction).
CHANGE_BUDGET = Budget("DynamoDB <= 3, SES 0", dynamodb=3, ses=0)
# Choosing a domain reads it first: its item never joins the user's transaction (docs/scale.md).
DOMAIN_BUDGET = Budget("DynamoDB <= 4, SES 0", dynamodb=4, ses=0)
ME_BUDGET = Budget("auth 1 DynamoDB; total <= 1, SSM 0", dynamodb=1, ssm=0, total=1)
AUTH_ONLY_BUDGET = Budget("DynamoDB 1 (the auth read)", dynamodb=1, total=1)
TWO_BUDGET = Budget("DynamoDB <= 2", dynamodb=2)  # one session, a list, a domain
THREE_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)  # a login, a scoped session, a passkey's sign-in
# A login that presents a known device: its one more read (the device, by its token's hash).
DEVICE_BUDGET = Budget("DynamoDB <= 4", dynamodb=4)
# A passkey sign-in's challenge: its one write (no rate counter: the challenge step is not counted).
CHALLENGE_BUDGET = Budget("DynamoDB 1 (one write)", dynamodb=1, total=1)
# A page of users: auth, a CreatedIndex Query per list partition and a BatchGetItem per 100 count
# shards (side by side), one BatchGetItem for the page.
PAGE_CALLS = len(list_partitions()) + len(count_batches()) + 2
PAGE_BUDGET = Budget(f"DynamoDB <= {PAGE_CALLS}", dynamodb=PAGE_CALLS)
# By design: runtime_config reads the nine switches and the log level in one GetParameters.
COLD_BUDGET = Budget("SSM <= 1 (by design)", ssm=1)
LISTED_USERS = 110  # stored for GET /users: two full pages of 50 and more
STALE = USED_AT_REFRESH_SECONDS + 300
SWITCH = KillSwitch.FILE_CREATE  # guards no Nimbus endpoint: enabling it disturbs nothing
# What fills a path parameter, by the path segment before it (the target user's: its policy names it).
PARAM_KINDS = {"sessions": "sid", "2fa": "factor", "domains": "domain", "killswitches": "switch"}


def _recovery_link(h: Harness, user: Account, values: dict[str, Any]) -> None:
    asked = h.api.call("POST", "/users/recover", {"username": user.name}, ip=h.fresh_ip())
    expect("setup: recover", 201, asked)
    values["token"] = h.verification_link(f"{user.name}@example.com", kind="recover-password")


def _listed(h: Harness, user: Account, values: dict[str, Any]) -> None:
    h.seed_users(LISTED_USERS, once=values["scenario"])  # full pages, for all of a scenario's requests


def _passkey_answer(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """A passkey sign-in's challenge (uncounted) and the user's passkey answering it."""
    asked = h.api.call("POST", "/login/passkey", {}, ip=h.fresh_ip())
    expect("setup: passkey challenge", 200, asked)
    assert user.key is not None
    values["token"] = asked.body["token"]
    values["response"] = user.key.get(asked.body["challenge"], origin=h.origin)


def _known_device_locked(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """The device a sign-in answered the owner, then the account's logins locked by wrong passwords
    from addresses that each stay under their own limit."""
    signed_in = h.api.call("POST", "/login", {"username": user.name, "password": PASSWORD}, ip=h.fresh_ip())
    expect("setup: a sign-in", 201, signed_in)
    values["device"] = signed_in.body["device"]
    for n in range(ACCOUNT_AUTH_FAILURES.limit):
        wrong = {"username": user.name, "password": f"a guess {n}"}
        expect("setup: lock", 401, h.api.call("POST", "/login", wrong, ip=h.fresh_ip()))


def _flooding(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """An address that used up its login limit, refused once by DynamoDB on this instance."""
    ip = values["ip"] = h.fresh_ip()
    for status in [401] * LOGIN.limit + [429]:
        reply = h.api.call("POST", "/login", {"username": user.name, "password": "x"}, ip=ip)
        expect("setup: flood", status, reply)


V = Variant
TOTP = V(factor="totp")
# A challenged login or change: the first request, then the answers by TOTP and by security key,
# each within 3 round trips.
CHALLENGED = (
    V(factor="totp", step="ask", budget=THREE_BUDGET, challenged=True),
    V(factor="totp", budget=THREE_BUDGET, challenged=True),
    V(factor="key", budget=THREE_BUDGET, challenged=True),
)

VARIANTS: dict[str, tuple[Variant, ...]] = {
    "POST /register": (V(budget=TWO_NO_MAIL, account=False),),
    "POST /login": (
        V(" (username)", THREE_BUDGET),
        V(" (email)", THREE_BUDGET, body={"username": "{username}@example.com", "password": PASSWORD}),
        V(" wrong password", status=401, body={"username": "{username}", "password": "not the password"}),
        V(
            " (a known device, the account locked)",
            DEVICE_BUDGET,
            body={"username": "{username}", "password": PASSWORD, "device": "{device}"},
            setup=_known_device_locked,
        ),
        V(" unknown user", status=404, account=False),
        V(
            " (a refused request from a flooding address)",
            Budget("DynamoDB 0", dynamodb=0),
            status=429,
            setup=_flooding,
        ),
        *CHALLENGED,
    ),
    "POST /login/passkey": (
        V(" (challenge)", CHALLENGE_BUDGET, status=200, body={}, account=False),
        V(
            " (a passkey's answer)",
            THREE_BUDGET,
            factor="passkey",
            setup=_passkey_answer,
        ),
    ),
    "POST /users/recover": (V(" (an account)", TWO_NO_MAIL), V(" (no account)", TWO_NO_MAIL, account=False)),
    "PUT /users/recover": (V(budget=CHANGE_BUDGET, setup=_recovery_link),),
    "GET /users/me": (
        V(" (usedAt recent)", ME_BUDGET),
        V(f" (usedAt {STALE // 60} min old)", setup=lambda h, u, v: h.set_used_at(u.token, STALE)),
        V(", cold config cache", COLD_BUDGET, config="cold"),
    ),
    "PUT /users/me/username": (V(budget=CHANGE_BUDGET), *CHALLENGED),
    "PUT /users/me/email": (V(budget=CHANGE_BUDGET),),
    "PUT /users/me/password": (V(budget=CHANGE_BUDGET),),
    "PUT /users/me/domain": (V(budget=DOMAIN_BUDGET),),
    "GET /users/me/verify": (V(" (resend)", CHANGE_BUDGET),),
    "PUT /users/verify": (
        V(
            budget=TWO_NO_MAIL,
            setup=lambda h, u, v: v.update(token=h.verification_link(f"{u.name}@example.com")),
        ),
    ),
    "DELETE /users/me": (V(" (3 other sessions)", Budget("SES 0", ses=0), logins=3),),
    "GET /domains": (V(budget=TWO_BUDGET),),
    "GET /domains/<id>": (V(budget=TWO_BUDGET),),
    "GET /users/me/sessions": (V(" (4 live)", TWO_BUDGET, logins=3),),
    "GET /users/me/sessions/<sid>": (
        V(budget=AUTH_ONLY_BUDGET, params={"sid": "me"}, logins=3),
        V(" (another)", TWO_BUDGET, logins=3),
    ),
    "PATCH /users/me/sessions/<sid>": (V(budget=TWO_BUDGET, logins=3),),
    "DELETE /users/me/sessions/<sid>": (V(budget=TWO_BUDGET, logins=3),),
    "DELETE /users/me/sessions": (V(" (2 ids)", body={"ids": ["{sid}", "me"]}, logins=3),),
    "DELETE /users/me/sessions/all": (V(" (3 others)", logins=3),),
    "POST /users/me/sessions": (V(" (scoped)", THREE_BUDGET),),
    "GET /users/<uid>/sessions": (V(budget=TWO_BUDGET, logins=1),),
    "GET /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "PATCH /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "DELETE /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "DELETE /users/<uid>/sessions": (V(logins=1),),
    "DELETE /users/<uid>/sessions/all": (V(logins=1),),
    "POST /users/me/2fa/totp": (V(budget=CHANGE_BUDGET),),
    "POST /users/me/2fa/totp/confirm": (
        V(budget=CHANGE_BUDGET, setup=lambda h, u, v: v.update(h.enrolment(u.token, "totp"))),
    ),
    "POST /users/me/2fa/webauthn": (V(budget=CHANGE_BUDGET),),
    "POST /users/me/reverify": (V(" (a passkey's challenge)", THREE_BUDGET, factor="passkey"),),
    "POST /users/me/2fa/webauthn/confirm": (
        V(budget=CHANGE_BUDGET, setup=lambda h, u, v: v.update(h.enrolment(u.token, "webauthn"))),
    ),
    "GET /users/me/2fa": (V(budget=AUTH_ONLY_BUDGET, factor="totp"),),
    "GET /users/me/2fa/<id>": (V(budget=AUTH_ONLY_BUDGET, factor="totp"),),
    "POST /users/me/2fa/backup": (TOTP,),
    "DELETE /users/me/2fa/<id>": (TOTP,),
    "DELETE /users/me/2fa": (V(" (1 id)", factor="totp"),),
    "DELETE /users/me/2fa/all": (TOTP,),
    "GET /users/<uid>/2fa": (TOTP,),
    "GET /users/<uid>/2fa/<id>": (TOTP,),
    "DELETE /users/<uid>/2fa/<id>": (TOTP,),
    "DELETE /users/<uid>/2fa": (V(" (1 id)", factor="totp"),),
    "DELETE /users/<uid>/2fa/all": (TOTP,),
    "GET /users": (
        V(" (page of 50)", PAGE_BUDGET, setup=_listed),
        V(query="?offset=50&limit=50", budget=PAGE_BUDGET, setup=_listed),
        # An offset past any list (a 64-bit one once answered 500): an empty page with the count.
        V(" (an offset past every user)", PAGE_BUDGET, query="?offset=9223372036854775807", setup=_listed),
    ),
    "DELETE /users/<id>/verify": (V(verified=True, expect_body={"verifiedAt": None}),),
    "GET /users/<id>/verify": (V(" (resend)"),),
    "PUT /users/<id>/staff": (V(factor="totp", expect_body={"staff": True}),),
    "DELETE /users/<id>/staff": (V(staff=True, expect_body={"staff": False}),),
    "PUT /users/<id>/ban": (V(step="ask"), V(" (3 sessions)", logins=2, expect_body={"banReason": "Spam"})),
    "DELETE /users/<id>/ban": (V(banned=True, expect_body={"bannedAt": None}),),
    "DELETE /users/<id>": (V(" (3 sessions)", logins=2),),
    "DELETE /users": (
        V(
            " (2 ids)",
            body={"ids": ["{uid}", "{uid2}"]},
            setup=lambda h, u, v: v.update(uid2=h.account().id),
            expect_body={"count": 2},
        ),
    ),
    # The runtime-configuration changes write SSM: each starts from switches that make it write.
    "PUT /killswitches/<id>": (V(setup=lambda h, u, v: h.set_killswitches([])),),
    "DELETE /killswitches/<id>": (V(setup=lambda h, u, v: h.set_killswitches([SWITCH])),),
    "DELETE /killswitches": (V(" (1 on)", setup=lambda h, u, v: h.set_killswitches([SWITCH])),),
    # The level stored now, so the change leaves the functions' logging as it was.
    "PATCH /loglevel": (
        V(setup=lambda h, u, v: v.update(level=container.production_deps().config.current().log_level)),
    ),
}


def _sample_body(key: str, operation: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The sample body of the model the document says ``operation`` takes (the password of a
    reverification is added when the request is made)."""
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    refs = [part["$ref"].rsplit("/", 1)[1] for part in (schema.get("allOf") or [schema])] if schema else []
    models = [ref for ref in refs if ref != "Reverification"]
    if not models:
        return None
    if models[0] not in REQUEST_BODIES:
        raise ScenarioError(f"{key}: no sample body of {models[0]} in tests/samples.REQUEST_BODIES")
    return REQUEST_BODIES[models[0]]


def _answered_by(registered: Registered, variant: Variant) -> str | None:
    """The second factor a challenged request's caller answers with (staff always have TOTP)."""
    policy = registered.endpoint.policy
    return ("totp" if policy.staff else variant.factor) if policy.reverify or variant.challenged else None


_ANSWERED_WITH = {None: "", "totp": ", TOTP answer", "key": ", key answer", "passkey": ", passkey answer"}


def _plans_of(
    registered: Registered, document: Mapping[str, Any], variants: Sequence[Variant] | None = None
) -> list[Plan]:
    endpoint = registered.endpoint
    key = f"{endpoint.method} {endpoint.path}"
    operation = document["paths"][registered.openapi_path][endpoint.method.lower()]
    success = endpoint.status  # a two-step endpoint's first step has its own variant
    body, params = _sample_body(key, operation), {}
    for before, name in re.findall(r"([^/]*)/<(\w+)>", endpoint.path):
        kind = "uid" if name == endpoint.policy.target else PARAM_KINDS.get(before)
        if kind is None:
            raise ScenarioError(f"{key}: no rule fills the path parameter <{name}>")
        params[name] = kind
    plans = []
    for variant in variants if variants is not None else VARIANTS.get(key, (Variant(),)):
        answer = _answered_by(registered, variant)
        shown = _path(endpoint.path, {name: variant.params.get(name, f":{name}") for name in params})
        how = _ANSWERED_WITH[answer]
        how = ", challenged" if answer and variant.step == "ask" else how
        status = variant.status or (401 if how == ", challenged" else success)
        name = f"{endpoint.method} {shown}{variant.query}{variant.label}{how}"
        plans.append(Plan(key, name, status, registered, body, params, variant))
    return plans


def plan(endpoints: Sequence[Registered], document: Mapping[str, Any]) -> list[Plan]:
    """The scenarios of ``endpoints`` in their order; :class:`ScenarioError` naming every endpoint
    whose request cannot be derived, and every row of ``VARIANTS`` that names no endpoint."""
    plans: list[Plan] = []
    known = {f"{r.endpoint.method} {r.endpoint.path}" for r in endpoints}
    problems = [
        f"{key}: a row of VARIANTS, but no such endpoint is registered" for key in VARIANTS.keys() - known
    ]
    for registered in endpoints:
        try:
            plans += _plans_of(registered, document)
        except ScenarioError as error:
            problems.append(str(error))
    if problems:
        raise ScenarioError("no scenario for: " + "; ".join(problems))
    return plans


def _path(path: str, params: Mapping[str, str]) -> str:
    return re.sub(r"<(\w+)>", lambda m: params[m[1]], path)


def _fill(value: Any, values: Mapping[str, Any]) -> Any:
    """``value`` with its "{...}" placeholders filled (a lone placeholder takes the value's type)."""
    if isinstance(value, str):
        lone = re.fullmatch(r"\{(\w+)\}", value)
        return values[lone[1]] if lone else value.format_map(values)
    if isinstance(value, Mapping):
        return {k: _fill(v, values) for k, v in value.items()}
    return [_fill(v, values) for v in value] if isinstance(value, list) else value


def _prepare(h: Harness, p: Plan) -> Callable[[], Reply]:
    """The setup of ``p`` (uncounted), and its request, to send later."""
    v, endpoint = p.variant, p.registered.endpoint
    policy = endpoint.policy
    user = h.account(logins=v.logins, factor=v.factor, staff=v.staff, verified=v.verified, banned=v.banned)
    caller = h.account(staff=True) if policy.staff else user
    values: dict[str, Any] = {
        "scenario": p.name,
        "name": h.unique("n"),
        "username": user.name if v.account else h.unique("nobody"),
        "domain": get_settings().default_domain,
        "switch": str(int(SWITCH)),
        "uid": user.id,
        "sid": user.other_session,
        "factor": user.factor,
    }
    if v.setup is not None:
        v.setup(h, user, values)
    filled = {n: v.params.get(n, str(values[kind])) for n, kind in p.params.items()}
    path = _path(endpoint.path, filled) + v.query
    body = v.body if v.body is not None else p.body  # a variant's {} is a body too
    sent = None if body is None else _fill(body, values)
    token = caller.token if policy.auth is Auth.REQUIRED else None
    ip = values.get("ip") or h.fresh_ip()
    if policy.reverify:
        sent = {"password": PASSWORD} | (sent or {})
    if _answered_by(p.registered, v) and v.step == "answer":
        sent = h.answer(caller, endpoint.method, path, sent or {}, token=token, ip=ip)
    return lambda: h.api.call(endpoint.method, path, sent, token=token, ip=ip)


def scenario_of(h: Harness, endpoint: str, variant: Variant) -> Scenario:
    """One more scenario of a registered ``endpoint`` ("POST /login"), for a variant ``VARIANTS``
    does not list (the capacity model's own cases)."""
    endpoints = registered_endpoints()
    [registered] = [r for r in endpoints if f"{r.endpoint.method} {r.endpoint.path}" == endpoint]
    [p] = _plans_of(registered, build_document(endpoints), (variant,))
    return Scenario(p.name, p.status, partial(_prepare, h, p), p.variant)


def exhausted_login_limit(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """An address whose login limit is used up on the counter, and which this instance has not seen
    refused: its next request is refused by DynamoDB (what the refusal memo spares the others)."""
    ip = values["ip"] = h.fresh_ip()
    for _ in range(LOGIN.limit):
        reply = h.api.call("POST", "/login", {"username": user.name, "password": "x"}, ip=ip)
        expect("setup: flood", 401, reply)


def _recovery_request(h: Harness, known: bool) -> Callable[[], Reply]:
    """The recovery function handling one request (asked uncounted) for an account's name or not."""
    name = h.account().name if known else h.unique("nobody")
    expect("setup: recover", 201, h.api.call("POST", "/users/recover", {"username": name}, ip=h.fresh_ip()))
    return h.recovery_invocation()


def scenarios(h: Harness) -> list[Scenario]:
    """Every registered endpoint's scenarios, then an unknown route and the recovery function."""
    endpoints = registered_endpoints()
    planned = plan(endpoints, build_document(endpoints))
    recovery = Variant(budget=CHANGE_BUDGET)
    recover = partial(_recovery_request, h)
    return [
        *(Scenario(p.name, p.status, partial(_prepare, h, p), p.variant) for p in planned),
        Scenario("GET /no/such/route (404)", 404, lambda: partial(h.api.call, "GET", "/no/such/route")),
        Scenario("RecoveryFunction: a request (an account)", 200, partial(recover, True), recovery),
        Scenario("RecoveryFunction: a request (no account)", 200, partial(recover, False), recovery),
    ]


@dataclass(frozen=True)
class ServiceFigures:
    """Median calls and HTTP attempts of one service, and the operations called in order."""

    calls: int
    attempts: int
    operations: tuple[str, ...]

    def cell(self) -> str:
        """As the table shows it: round trips, the calls when retries differ, the operations."""
        calls = f" ({self.calls} call{'' if self.calls == 1 else 's'})" if self.attempts != self.calls else ""
        # A run of one operation (a Query per list partition) is written once with its number.
        runs = [(op, len(list(same))) for op, same in groupby(self.operations)]
        named = ", ".join(op if n == 1 else f"{n} x {op}" for op, n in runs)
        return f"{self.attempts}{calls}" + (f" {named}" if named else "")


@dataclass(frozen=True)
class CallRow:
    """The result of one scenario."""

    scenario: str
    function: str
    status: int
    services: dict[str, ServiceFigures]
    constant: bool  # every repetition made the same calls (in any order: some run side by side)
    budget: Budget | None
    verdict: str  # OK or OVER against the budget (round trips: HTTP attempts), "-" without one
    kms_cold: tuple[str, ...] = ()  # the KMS calls of the same request on an instance holding no data key


def _figures(service: str, tallies: Sequence[Tally]) -> ServiceFigures:
    # median_low keeps whole numbers; with constant figures every statistic is the same anyway.
    calls = statistics.median_low([len(t.operations(service)) for t in tallies])
    attempts = statistics.median_low([t.attempts[service] for t in tallies])
    sequences = Counter(tuple(t.operations(service)) for t in tallies)
    return ServiceFigures(calls=calls, attempts=attempts, operations=sequences.most_common(1)[0][0])


def run_scenario(scenario: Scenario, repetitions: int) -> CallRow:
    """Measure ``scenario`` ``repetitions`` times after one discarded warm-up request."""
    tallies: list[Tally] = []
    variant = scenario.variant
    for repetition in range(repetitions + 1):
        send = scenario.prepare()
        set_config(variant.config)
        with measure() as tally:
            reply = send()
        expect(scenario.name, scenario.expected_status, reply)
        if wrong := {k: reply.body.get(k) for k, v in variant.expect_body.items() if reply.body.get(k) != v}:
            raise ScenarioError(f"{scenario.name}: expected {dict(variant.expect_body)}, got {wrong}")
        if repetition:  # repetition 0 warms lazy imports and first-use caches on this path
            tallies.append(tally)
    services = {service: _figures(service, tallies) for service in SERVICES}
    trips = {name: figures.attempts for name, figures in services.items()}
    verdict = "-" if variant.budget is None else variant.budget.verdict(trips)
    made = {(frozenset(Counter(t.calls).items()), frozenset(t.attempts.items())) for t in tallies}
    constant = len(made) == 1
    cold = _kms_on_a_cold_instance(scenario)
    if trips["kms"] or any(n > KMS_COLD_LIMIT.get(op, 0) for op, n in Counter(cold).items()):
        verdict = "OVER"
    row = CallRow(scenario.name, reply.function, reply.status, services, constant, variant.budget, verdict)
    return replace(row, kms_cold=tuple(cold))


def _kms_on_a_cold_instance(scenario: Scenario) -> list[str]:
    """The KMS calls of the request on an instance that holds no TOTP data key yet."""
    send = scenario.prepare()
    set_config(scenario.variant.config)
    sealer = container.production_deps().sealer
    assert isinstance(sealer, Sealer)
    sealer.forget()
    with measure() as tally:
        reply = send()
    expect(scenario.name, scenario.expected_status, reply)
    return tally.operations("kms")


def run(template: Template, runs: int) -> Report:
    """Every scenario on moto, warm, and the calls table (``--runs`` does not apply: the counts are
    the same every time)."""
    with moto_stack(template, streams=()) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        rows = []
        for scenario in scenarios(harness):
            rows.append(run_scenario(scenario, REPETITIONS))
            harness.reset()
    headers = [
        "Scenario",
        "HTTP",
        "DynamoDB round trips",
        "SSM",
        "SES",
        "KMS",
        "KMS cold",
        "Budget",
        "Verdict",
    ]
    body = [
        [
            row.scenario + ("" if row.constant else " (varies!)"),
            str(row.status),
            *(row.services[service].cell() for service in SERVICES),
            ", ".join(row.kms_cold) or "0",
            row.budget.text if row.budget else "-",
            row.verdict,
        ]
        for row in rows
    ]
    how = (
        f"Measured: median of {REPETITIONS} requests per scenario after 1 discarded warm-up, handlers in "
        "process on moto, SSM config cached just before each warm request; counts are HTTP attempts "
        "(botocore before-send) of every client (the functions' 3 cached ones), '(n calls)' = before-call "
        "count when retries differ. KMS cold: the same request once more on an instance that holds no "
        "TOTP data key (a cold start); OVER when a warm request calls KMS or a cold one calls Decrypt or "
        "GenerateDataKey more than once."
    )
    return Report(
        "\n".join([render(headers, body), how]), rows, [r.scenario for r in rows if r.verdict == "OVER"]
    )
