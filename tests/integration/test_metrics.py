"""Business events reach CloudWatch as EMF log lines; plain reads print none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.conftest import Api, Stack


def _emf(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


def _counted(output: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in _emf(output):
        for metric in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(line[metric["Name"]])
    return totals


def test_registration_and_logins_are_counted(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    assert api.register().status == 201
    assert api.login(password="wrong password").status == 401
    assert api.login().status == 201
    output = capsys.readouterr().out
    assert _counted(output) == {"Registered": 1, "LoginFailed": 1, "LoginSucceeded": 1}
    assert {line["_aws"]["CloudWatchMetrics"][0]["Namespace"] for line in _emf(output)} == {"Nimbus"}


def test_rate_limit_and_kill_switch_refusals_are_counted(
    api: Api, stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert api.register(ip="192.0.2.50").status == 201
    assert api.register("bob", ip="192.0.2.50").status == 429
    stack.set_switches("ACCOUNT_LOGIN")
    assert api.login().status == 503
    counted = _counted(capsys.readouterr().out)
    assert counted["RateLimited"] == 1
    assert counted["KillSwitchRefused"] == 1


def test_reads_print_no_metrics(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    token = api.register().body["token"]
    capsys.readouterr()
    assert api.call("GET", "/users/me", token=token).status == 200
    assert api.call("GET", "/").status == 200
    assert _emf(capsys.readouterr().out) == []


def test_a_failure_to_emit_metrics_never_fails_the_request(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools import Metrics

    def unavailable(self: Metrics, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("metrics sink unavailable")

    monkeypatch.setattr(Metrics, "flush_metrics", unavailable)
    assert api.register().status == 201
    assert api.login().status == 201


def test_metrics_recorded_outside_an_invocation_do_not_leak_into_the_next(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    from nimbus_core.platform import metrics

    metrics.count(metrics.Event.LOGIN_FAILED)  # e.g. left over by code run outside a handler
    assert api.register().status == 201
    assert _counted(capsys.readouterr().out) == {"Registered": 1}


def test_the_sweeper_counts_the_sessions_it_deleted_and_prints_nothing_when_none_were_stale(
    api: Api, stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    token = api.register().body["token"]
    assert api.login().status == 201
    assert api.login().status == 201
    body = {
        "password": "correct horse",
        "newPassword": "battery staple",
        "confirmNewPassword": "battery staple",
    }
    assert api.call("PUT", "/users/me/password", body, token=token).status == 200
    capsys.readouterr()

    stack.sweep()

    assert _counted(capsys.readouterr().out) == {"SessionsSwept": 2}
    assert (
        api.call(
            "PUT", "/users/me/username", {"username": "alicia", "password": "battery staple"}, token=token
        ).status
        == 200
    )
    assert len(stack.sweep()) == 1  # the rename is swept too: nothing stale, nothing counted
    assert _emf(capsys.readouterr().out) == []
