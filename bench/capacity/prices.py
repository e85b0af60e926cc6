"""What traffic costs at list prices, by service; and a month of the monthly active user's profile
(``[profile]`` of bench/capacity.toml) for each number of users it names, beside Amazon Cognito."""

from __future__ import annotations

import tomllib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.capacity.costs import MAIL, RequestCost, duration_s, expand
from bench.capacity.deploy import Deployment
from bench.capacity.limits import (
    ACCESS_LOG_BYTES,
    COGNITO,
    MIXES_PATH,
    MONTH_S,
    PLATFORM_LOG_BYTES,
    PRICE,
    RESPONSE_HEADER_BYTES,
    XRAY_RATE,
    XRAY_RESERVOIR,
)
from nimbus_tools.template import Template, resources_of_type


def api_price(requests: float) -> float:
    """HTTP API requests a month at list price (the first 300 million cost more)."""
    first = min(requests, 300e6)
    return first * PRICE["api_request_first_300m"] + (requests - first) * PRICE["api_request"]


def load_profile(path: Path | None = None) -> dict[str, Any]:
    """The monthly active user's profile (``[profile]`` of bench/capacity.toml), with the scenarios
    it is made of."""
    raw = tomllib.loads((path or MIXES_PATH).read_text())
    profile: dict[str, Any] = dict(raw["profile"])
    mix = raw["mixes"][profile["requests_like"]]
    signing = tuple(profile["sign_in_routes"])
    shares = {r["scenario"]: r["share"] for r in mix["requests"] if not r["scenario"].startswith(signing)}
    total = sum(shares.values())
    profile["request_shares"] = {s: v / total for s, v in shares.items()}
    profile["scenarios"] = [profile["sign_in"], *profile["request_shares"]]
    return profile


@dataclass
class UsersMonth:
    """What a month costs for ``users`` monthly active users of the profile."""

    users: int
    requests: float  # API requests a month
    nimbus: dict[str, float]  # $ by service
    sign_in_part: float  # $ of the sign-ins, mail, storage and fixed costs (what Cognito bills for)
    cognito: dict[str, float]  # $ by Cognito feature plan

    @property
    def total(self) -> float:
        """Nimbus's whole month."""
        return sum(self.nimbus.values())


def cognito_price(users: int, bands: tuple[tuple[float, float], ...]) -> float:
    """Cognito's monthly charge for ``users`` MAUs over a feature plan's price bands."""
    charged, below = 0.0, 0.0
    for upto, each in bands:
        charged += max(0.0, min(users, upto) - below) * each
        below = upto
    return charged


def monthly_per_users(
    profile: Mapping[str, Any], costs: Mapping[str, RequestCost], deploy: Deployment, template: Template
) -> list[UsersMonth]:
    """A month of the profile for each number of users the profile names, priced as deployed."""
    alarms = len(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    dashboards = len(resources_of_type(template, "AWS::CloudWatch::Dashboard"))
    fixed = alarms * PRICE["alarm_month"] + dashboards * PRICE["dashboard_month"]
    sign_in = costs[profile["sign_in"]]
    # What an account keeps stored: its items from registration, and a session per sign-in kept.
    stored = costs["POST /register"].stored_bytes + profile["sessions_kept"] * max(sign_in.stored_bytes, 0)
    found = []
    for users in profile["users"]:
        per_month = {profile["sign_in"]: users * profile["sign_ins"]}
        per_month |= {
            s: users * profile["requests"] * share for s, share in profile["request_shares"].items()
        }
        sign_in_month = priced(
            _expand_no_mail({profile["sign_in"]: per_month[profile["sign_in"]]}, costs), costs, deploy
        )
        mail_month = priced({MAIL: users * profile["mails"]}, costs, deploy)
        whole = priced(_expand_no_mail(per_month, costs) | {MAIL: users * profile["mails"]}, costs, deploy)
        storage = users * stored / 1024**3 * (PRICE["storage_gb_month"] + PRICE["pitr_gb_month"])
        whole["DynamoDB"] += storage
        whole["Alarms, dashboard"] = fixed
        found.append(
            UsersMonth(
                users,
                sum(n for s, n in per_month.items()),
                whole,
                sum(sign_in_month.values()) + sum(mail_month.values()) + storage + fixed,
                {plan: cognito_price(users, bands) for plan, bands in COGNITO.items()},
            )
        )
    return found


def _expand_no_mail(per_month: Mapping[str, float], costs: Mapping[str, RequestCost]) -> dict[str, float]:
    """``per_month`` with the sweeps and recovery work it leads to, but its mail: the profile
    counts mail on its own."""
    expanded = expand(per_month, costs)
    expanded.pop(MAIL, None)
    return expanded


def priced(
    per_month: Mapping[str, float],
    costs: Mapping[str, RequestCost],
    deploy: Deployment,
    ssm_billed_calls: float | None = None,
) -> dict[str, float]:
    """Invocations a month at list prices, by service; with ``ssm_billed_calls`` (GetParameters
    calls a month at higher throughput, billed per call), SSM's line too."""
    api = gb_s = lambda_requests = rru = wru = ses = log_bytes = out_bytes = 0.0
    invocations: dict[str, float] = defaultdict(float)
    for scenario, count in per_month.items():
        cost = costs[scenario]
        batch = deploy.batch_size.get(cost.function, 1)
        if deploy.route_of(scenario) is not None:
            api += count
            out_bytes += count * (cost.reply_bytes + RESPONSE_HEADER_BYTES)
            log_bytes += count * ACCESS_LOG_BYTES
        invocations[cost.function] += count / batch
        lambda_requests += count / batch
        gb_s += count * duration_s(cost, deploy) * deploy.memory_mb.get(cost.function, 128) / 1024
        rru += count * sum(a.reads for a in cost.classes.values())
        wru += count * sum(a.writes for a in cost.classes.values())
        ses += count * cost.ses
        log_bytes += count * (cost.log_bytes + PLATFORM_LOG_BYTES / batch)
    traces = 0.0
    for n in invocations.values():
        per_second = n / MONTH_S
        traces += MONTH_S * (
            min(per_second, XRAY_RESERVOIR) + XRAY_RATE * max(0.0, per_second - XRAY_RESERVOIR)
        )
    ssm = (
        {}
        if ssm_billed_calls is None
        else {"SSM (higher throughput)": ssm_billed_calls * PRICE["ssm_high_call"]}
    )
    return {
        "API Gateway": api_price(api),
        "Lambda": gb_s * PRICE["lambda_gb_s"] + lambda_requests * PRICE["lambda_request"],
        "DynamoDB": rru * PRICE["rru"] + wru * PRICE["wru"],
        "SES": ses * PRICE["ses_message"],
        **ssm,
        "X-Ray": traces * PRICE["xray_trace"] if deploy.traced else 0.0,
        "CloudWatch Logs": log_bytes * PRICE["logs_byte"],
        "Data transfer out": out_bytes * PRICE["transfer_byte"],
    }
