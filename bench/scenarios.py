"""The scenarios of ``make bench``'s calls part, derived from every endpoint's registration and the
OpenAPI document (a sample body of the model it takes, a rule filling each path parameter), with
the variants of bench/variants.py; each one's uncounted setup and the request to measure."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.harness import Harness
from bench.stack import ScenarioError, expect
from bench.variants import CHANGE_BUDGET, PARAM_KINDS, SWITCH, VARIANTS, Variant
from nimbus_core.http.policy import Auth
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.openapi import Registered, build_document, registered_endpoints
from tests.samples import PASSWORD, REQUEST_BODIES


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
    variant: Variant = field(default_factory=Variant)  # its budget, config and expected body


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
