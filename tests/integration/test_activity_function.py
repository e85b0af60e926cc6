"""The activity function on moto, fed the outbox stream as its event source mapping would feed it,
and the activity endpoints reading what it stored (CONTRACT section 17)."""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.items import from_item
from tests.integration.conftest import Api, Stack
from tests.integration.test_stream_resilience import invoke


def _activity(api: Api, token: str, **query: Any) -> dict[str, Any]:
    suffix = "&".join(f"{k}={v}" for k, v in query.items())
    reply = api.call("GET", f"/users/me/activity{'?' + suffix if suffix else ''}", token=token)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_a_sign_in_and_a_failure_are_listed_newest_first_once_the_function_stored_them(
    api: Api, stack: Stack
) -> None:
    token = api.register("alice").body["token"]
    assert api.login("alice", "wrong password", ip="198.51.100.30").status == 401
    assert api.login("alice", ip="198.51.100.31").status == 201

    [invocation] = stack.store_activity()

    assert invocation.failures == []
    listed = _activity(api, token)
    assert listed["count"] == 3
    newest, failed, registered = listed["items"]
    assert (newest["type"], newest["outcome"], newest["method"], newest["ip"]) == (
        "sign-in",
        "success",
        "password",
        "198.51.100.31",
    )
    assert (failed["type"], failed["outcome"], failed["code"], failed["ip"]) == (
        "sign-in",
        "failure",
        "INVALID_PASSWORD_ERROR",
        "198.51.100.30",
    )
    assert registered["type"] == "registered"
    assert newest["sessionId"] is not None
    assert failed["sessionId"] is None


def test_a_record_delivered_twice_stores_one_event(api: Api, stack: Stack) -> None:
    token = api.register("bob").body["token"]
    [first] = stack.store_activity()

    again = invoke(stack, "ActivityFunction", first.records)

    assert again == {"batchItemFailures": []}
    assert _activity(api, token)["count"] == 1
    assert all(from_item(i)["expiresAt"] > 0 for i in stack.items("ActivityTable"))
