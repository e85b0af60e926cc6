"""The session sweeper over the real local API: the users table's stream (keys only, prefix-filtered)
feeds the sweep function beside the mail function on the outbox stream, within seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_name
from tests.e2e.conftest import Client
from tests.e2e.test_e2e_mail import mail_to, poll

PASSWORD = "correct horse"


def stored_sessions(dynamodb: Any, local_api: LocalApiProcess, user_id: str) -> set[str]:
    state = local_api.state
    table = state["tables"]["SessionsTable"]
    items = dynamodb.query(
        TableName=table,
        KeyConditionExpression="userId = :u",
        ExpressionAttributeValues={":u": {"S": user_id}},
        ConsistentRead=True,
    )["Items"]
    return {i["sessionId"]["S"] for i in items}


def wait_for(check: Callable[[], bool], bound: float) -> bool:
    deadline = time.monotonic() + bound
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_password_change_leaves_only_the_calling_session_stored_within_seconds(
    client: Client, local_api: LocalApiProcess, dynamodb: Any
) -> None:
    name = new_name("sweep")
    token = client.register(name).body["token"]
    others = [client.login(name).body["token"] for _ in range(3)]
    user_id, session_id = token.split(".")[:2]
    assert len(stored_sessions(dynamodb, local_api, user_id)) == 4
    body = {"password": PASSWORD, "newPassword": "battery staple", "confirmNewPassword": "battery staple"}

    assert client.call("PUT", "/users/me/password", body, token=token).status == 200

    assert wait_for(lambda: stored_sessions(dynamodb, local_api, user_id) == {session_id}, bound=10)
    assert all(client.call("GET", "/users/me", token=t).status == 401 for t in others)
    assert client.call("GET", "/users/me", token=token).status == 200
    # The outbox stream's function runs beside it: the registration email went out too.
    assert poll(lambda: mail_to(local_api, f"{name}@example.com"), bound=5)
