"""Each scenario a mix names run once on moto and recorded: the calls part's scenarios, and the
model's own (the stream functions' work, a refused login its instance has not seen refused)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import boto3

from bench.capacity.costs import ACTIVITY, MAIL, RECOVERY, SWEEP, RequestCost
from bench.capacity.recorder import Recorder, installed
from bench.harness import Harness
from bench.runs import REGION
from bench.scenarios import Scenario, scenario_of, scenarios
from bench.stack import expect, logged_characters, moto_stack, set_config
from bench.variants import Variant, exhausted_login_limit
from nimbus_core.adapters.outbox import ACTIVITY as ACTIVITY_KIND
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.template import Template


def _mail_message(h: Harness) -> Callable[[], Reply]:
    """MailFunction sending one message: a new account's verification mail, as queued."""
    address = f"{h.account().name}@example.com"
    table = get_settings().outbox_table
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=table)["Items"]
    [message] = [
        i
        for i in items
        if i["kind"]["S"] not in (RECOVERY_REQUEST, ACTIVITY_KIND) and i["to"]["S"] == address
    ]
    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"id": message["id"]}, "NewImage": message}}
    return h.stream_invocation("MailFunction", [{**record, "SequenceNumber": "1"}], table)


def _stored_event(h: Harness) -> Callable[[], Reply]:
    """ActivityFunction storing one event: a new account's first (its registration), as queued."""
    user = h.account()
    table = get_settings().outbox_table
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=table)["Items"]
    [carrier] = [i for i in items if i["kind"]["S"] == ACTIVITY_KIND and i["userId"]["S"] == user.id]
    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"id": carrier["id"]}, "NewImage": carrier}}
    return h.stream_invocation("ActivityFunction", [{**record, "SequenceNumber": "1"}], table)


def _swept_user(h: Harness) -> Callable[[], Reply]:
    """SweepFunction on one user item changed (a wrong password counted, a name changed): the
    user's three live sessions read, none stale."""
    user = h.account(logins=2)
    record = {
        "eventName": "MODIFY",
        "dynamodb": {"Keys": {"pk": {"S": f"USER#{user.id}"}}, "SequenceNumber": "1"},
    }
    return h.stream_invocation("SweepFunction", [record], get_settings().users_table)


def _scenarios(h: Harness) -> dict[str, Scenario]:
    """The calls part's scenarios, and the model's own: the stream functions' work, and a refused
    login that its instance has not seen refused before (what the refusal memo spares)."""
    found = {s.name: s for s in scenarios(h)}
    memo_miss = Variant(
        " (a refused request, the first its instance sees)", status=429, setup=exhausted_login_limit
    )
    refused = scenario_of(h, "POST /login", memo_miss)
    found[refused.name] = refused
    found[MAIL] = Scenario(MAIL, 200, lambda: _mail_message(h))
    found[SWEEP] = Scenario(SWEEP, 200, lambda: _swept_user(h))
    found[ACTIVITY] = Scenario(ACTIVITY, 200, lambda: _stored_event(h))
    return found


def measure_costs(template: Template, names: set[str]) -> tuple[dict[str, RequestCost], int]:
    """Each named scenario (and the stream functions' ones) run once, after a discarded warm-up,
    and recorded; and how long the functions cache the runtime configuration."""
    costs: dict[str, RequestCost] = {}
    with moto_stack(template, streams=()) as api:
        harness = Harness(api, boto3.Session(region_name=REGION))
        with installed(Recorder(boto3.client("dynamodb", region_name=REGION))) as recorder:
            by_name = _scenarios(harness)
            wanted = names | {MAIL, SWEEP, RECOVERY, ACTIVITY}
            if unknown := wanted - by_name.keys():
                raise ValueError(f"no scenario of bench/scenarios.py is named {sorted(unknown)}")
            for name in sorted(wanted):
                scenario = by_name[name]
                for warm_up in (True, False):
                    send = scenario.prepare()
                    set_config(scenario.variant.config)
                    cost = RequestCost(name, "")
                    logged = logged_characters()
                    with recorder.recording(cost):
                        started = time.thread_time()
                        reply = send()
                        cost.own_ms = (time.thread_time() - started - recorder.aws_cpu_s) * 1000
                    cost.log_bytes = logged_characters() - logged
                    cost.reply_bytes = len(json.dumps(reply.body)) if reply.body is not None else 0
                    expect(name, scenario.expected_status, reply)
                    if not warm_up:
                        cost.function = reply.function
                        costs[name] = cost
                harness.reset()
            cache_seconds = get_settings().config_cache_seconds
    return costs, cache_seconds
