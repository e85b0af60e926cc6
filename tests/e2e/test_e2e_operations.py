"""Operators at work against the running local API: kill switches, staff, and AWS failing."""

from __future__ import annotations

import time
from typing import Any

from nimbus_tools.local.control import clear_faults, inject_fault
from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import Reply, new_ip, new_name
from tests.e2e.conftest import CACHE_AGE, Client, parallel, run_cli, with_totp

PASSWORD = "correct horse"


def _wait_for_status(client: Client, call: Any, status: int, bound: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if call().status == status:
            return time.monotonic() - start
        time.sleep(0.25)
    raise AssertionError(f"status {status} not seen within {bound}s")


def test_kill_switch_flipped_in_ssm_takes_effect_within_the_cache_age_and_staff_pass(
    client: Client, local_api: LocalApiProcess
) -> None:
    staff_name, user_name = new_name("staff"), new_name()
    staff_token = client.register(staff_name).body["token"]
    user_token = client.register(user_name).body["token"]
    promoted = run_cli(local_api, "staff", "promote", staff_name)
    assert promoted.returncode == 0, promoted.stderr

    enabled = run_cli(local_api, "killswitch", "enable", "GLOBAL")
    flipped = time.monotonic()
    assert enabled.returncode == 0, enabled.stderr
    try:
        _wait_for_status(
            client, lambda: client.call("GET", "/users/me", token=user_token), 503, CACHE_AGE + 5
        )
        # No timed bound on the first 503 (a loaded machine stretches it): every worker (each with
        # its own cache, like Lambda containers) sees it once the cache age has passed.
        time.sleep(max(0.0, flipped + CACHE_AGE + 0.5 - time.monotonic()))
        for _ in range(6):
            blocked = client.call("GET", "/users/me", token=user_token)
            assert blocked.body == {
                "code": "SERVICE_UNAVAILABLE_ERROR",
                "message": "Service Unavailable",
                "feature": 8,
            }
            assert client.call("GET", "/").status == 503
            assert client.login(user_name).status == 503
        staff = client.call("GET", "/users/me", token=staff_token)
        assert (staff.status, staff.body["staff"]) == (200, True)
        listed = run_cli(local_api, "killswitch", "list")
        assert "GLOBAL" in listed.stdout
    finally:
        assert run_cli(local_api, "killswitch", "disable", "GLOBAL").returncode == 0
        cleared = time.monotonic()
    # Leave no worker with a stale copy for the tests that follow: wait out the cache age.
    time.sleep(max(0.0, cleared + CACHE_AGE + 0.5 - time.monotonic()))
    for _ in range(6):
        assert client.call("GET", "/users/me", token=user_token).status == 200


def test_operator_tool_refuses_bad_input_with_non_zero_exit(local_api: LocalApiProcess) -> None:
    assert run_cli(local_api, "killswitch", "enable", "NOT_A_SWITCH").returncode != 0
    assert run_cli(local_api, "staff", "promote", new_name("ghost")).returncode != 0
    assert run_cli(local_api, "loglevel", "set", "LOUD").returncode != 0


def test_an_ses_outage_does_not_fail_registration(
    client: Client, local_api: LocalApiProcess, dynamodb: Any
) -> None:
    name, ip = new_name(), new_ip()
    inject_fault(local_api.aws_endpoint_url, "ses", "SendEmail", status=400, code="MessageRejected")
    try:
        registered = client.register(name, ip=ip)
    finally:
        clear_faults(local_api.aws_endpoint_url)
    assert registered.status == 201, registered.body
    assert client.call("GET", "/users/me", token=registered.body["token"]).status == 200
    for pk in (f"USERNAME#{name.lower()}", f"EMAIL#{name.lower()}@example.com"):
        assert "Item" in dynamodb.get_item(TableName="UsersTable", Key={"pk": {"S": pk}}, ConsistentRead=True)


def test_database_failure_answers_500_and_writes_nothing(
    client: Client, local_api: LocalApiProcess, dynamodb: Any
) -> None:
    name, ip = new_name(), new_ip()
    inject_fault(local_api.aws_endpoint_url, "dynamodb", "TransactWriteItems")
    try:
        failed = client.register(name, ip=ip)
        token = client.register(new_name()).body  # any registration fails while DynamoDB does
    finally:
        clear_faults(local_api.aws_endpoint_url)
    assert failed.status == 500
    assert "Traceback" not in str(failed.body)
    assert token["code"] == "INTERNAL_SERVER_ERROR"
    assert "Item" not in dynamodb.get_item(
        TableName="UsersTable", Key={"pk": {"S": f"USERNAME#{name.lower()}"}}, ConsistentRead=True
    )
    assert client.register(name, ip=ip).status == 201


# ---------------------------------------------------------------- two staff, different switches


def _staff_with_backup_codes(client: Client, local_api: LocalApiProcess) -> tuple[str, list[str]]:
    """A staff member with a second factor: (session, backup codes to answer challenges with)."""
    name, session, _, codes = with_totp(client)
    promoted = run_cli(local_api, "staff", "promote", name)
    assert promoted.returncode == 0, promoted.stderr
    return session, codes


def _challenged(client: Client, method: str, path: str, session: str) -> str:
    """The challenge token of a kill-switch change asked with the password."""
    first = client.call(method, path, {"password": PASSWORD}, token=session, ip=new_ip())
    assert first.body.get("code") == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", first.body
    return str(first.body["token"])


def _states(client: Client, session: str) -> dict[str, bool]:
    listed = client.call("GET", "/killswitches", token=session)
    assert listed.status == 200, listed.body
    return {item["name"]: item["state"] for item in listed.body["items"]}


def _api_shows(client: Client, session: str, expected: set[str]) -> bool:
    """Whether GET /killswitches shows exactly ``expected`` on, within the cache age."""
    deadline = time.monotonic() + CACHE_AGE + 1
    while {name for name, on in _states(client, session).items() if on} != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# FILE_CREATE, FILE_MODIFY, FILE_DELETE guard no Nimbus endpoint: flipping them disturbs no other test.
FILE_SWITCHES = {5: "FILE_CREATE", 6: "FILE_MODIFY", 7: "FILE_DELETE"}


def _race(client: Client, method: str, changes: list[tuple[str, int, str]]) -> list[Reply]:
    """Each ``(session, switch number, backup code)`` change asked with the password, then all the
    answers sent at the same instant, so the writes race."""
    tokens = [
        _challenged(client, method, f"/killswitches/{switch}", session) for session, switch, _ in changes
    ]

    def answer(i: int) -> Reply:
        session, switch, code = changes[i]
        body = {"2fa": {"token": tokens[i], "type": "backup", "code": code}}
        return client.call(method, f"/killswitches/{switch}", body, token=session, ip=new_ip())

    return parallel(len(changes), answer)


def test_two_staff_changing_different_switches_at_once_never_lose_a_change(
    client: Client, local_api: LocalApiProcess
) -> None:
    (first, first_codes), (second, second_codes) = (
        _staff_with_backup_codes(client, local_api) for _ in range(2)
    )
    try:
        for number, (mine, theirs) in enumerate([(5, 6), (6, 7), (7, 5), (5, 7)]):
            for method, expected in (
                ("PUT", {FILE_SWITCHES[mine], FILE_SWITCHES[theirs]}),
                ("DELETE", set()),
            ):
                code = number * 2 + (method == "DELETE")
                changes = [(first, mine, first_codes[code]), (second, theirs, second_codes[code])]

                replies = _race(client, method, changes)

                assert [r.status for r in replies] == [200, 200], [r.body for r in replies]
                # What is stored (the operator tool reads SSM itself): both changes, at once.
                listed = run_cli(local_api, "killswitch", "list").stdout
                stored = {line.split()[0] for line in listed.splitlines() if line.endswith(" on")}
                assert stored == expected, (number, method)
                # And the API, whichever worker answers, within its cache age: a worker that made
                # only the other change may show its own copy until then (CONTRACT section 11).
                assert _api_shows(client, first, expected), (number, method)
    finally:
        for name in FILE_SWITCHES.values():
            run_cli(local_api, "killswitch", "disable", name)
