"""SSM throttling every GetParameters against the running local API (the emulator's fault harness,
``POST /_nimbus/faults``): warm functions keep answering with the configuration they last read, at
once, and take up the operator's switches again when SSM answers. Cold starts under the same
faults are proven on a fake clock in tests/integration/test_runtime_config_bursts.py."""

from __future__ import annotations

import time

from nimbus_tools.local.control import clear_faults, inject_fault
from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip, new_name
from tests.e2e.conftest import CACHE_AGE, Client


def test_warm_functions_answer_normally_and_at_once_while_ssm_throttles_every_read(
    client: Client, local_api: LocalApiProcess
) -> None:
    name, ip = new_name(), new_ip()
    token = client.register(name, ip=ip).body["token"]  # the functions below are warm
    assert client.call("GET", "/users/me", token=token).status == 200
    assert client.call("GET", "/users/me/sessions", token=token).status == 200
    inject_fault(local_api.aws_endpoint_url, "ssm", "GetParameters", status=400, code="ThrottlingException")
    try:
        time.sleep(CACHE_AGE + 0.5)  # every copy is due for a refresh, which SSM refuses
        answers, slowest = [], 0.0
        for _ in range(3):
            for method, path in (("GET", "/users/me"), ("GET", "/users/me/sessions")):
                started = time.monotonic()
                answers.append(client.call(method, path, token=token).status)
                slowest = max(slowest, time.monotonic() - started)
        logged_in = client.login(name, ip=ip)
    finally:
        clear_faults(local_api.aws_endpoint_url)

    assert answers == [200] * 6
    assert logged_in.status == 201, logged_in.body
    assert slowest < 1.0  # a warm request never waits on SSM's refusals
