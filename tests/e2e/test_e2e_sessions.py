"""Sessions over HTTP against the local API: revocation across function workers, and the session
rules under concurrent requests (process-isolated workers, like Lambda)."""

from __future__ import annotations

from collections import Counter

from tests.api_client import new_ip, new_name
from tests.e2e.conftest import Client, parallel

PASSWORD = "correct horse"


def _user(client: Client, logins: int = 0) -> tuple[str, list[str]]:
    name = new_name("ses")
    registered = client.register(name)
    assert registered.status == 201, registered.body
    tokens = [registered.body["token"]]
    for _ in range(logins):
        reply = client.login(name)
        assert reply.status == 201, reply.body
        tokens.append(reply.body["token"])
    return name, tokens


def test_the_client_librarys_user_agent_names_the_session(client: Client) -> None:
    name, _ = _user(client)
    reply = client.call(
        "POST",
        "/login",
        {"username": name, "password": PASSWORD},
        headers={"User-Agent": "Cumulonimbus-Wrapper/5.1.0"},
        ip=new_ip(),
    )
    token = reply.body["token"]

    current = client.call("GET", "/users/me/sessions/me", token=token)

    assert current.body["name"] == "Cumulonimbus-Wrapper 5 on an unknown OS"


def test_a_revoked_session_fails_its_next_request_in_every_function(client: Client) -> None:
    _, (first, second) = _user(client, logins=1)
    for path in ("/users/me", "/users/me/sessions", "/domains"):  # warm the workers of two functions
        assert client.call("GET", path, token=second).status == 200

    assert client.call("DELETE", f"/users/me/sessions/{second.split('.')[1]}", token=first).status == 200

    for path in ("/users/me", "/users/me/sessions", "/domains"):
        assert client.call("GET", path, token=second).status == 401, path


def test_concurrent_revoke_all_from_two_sessions_never_keeps_both(client: Client) -> None:
    """Each asks "revoke all but mine": one wins, the other is revoked with the rest."""
    _, tokens = _user(client, logins=3)
    a, b = tokens[0], tokens[1]

    replies = parallel(2, lambda i: client.call("DELETE", "/users/me/sessions/all", token=(a, b)[i]))

    alive = [t for t in tokens if client.call("GET", "/users/me", token=t).status == 200]
    assert len(alive) == 1, [(r.status, r.body) for r in replies]
    assert alive[0] in (a, b)
    assert sorted(r.status for r in replies) in ([200, 200], [200, 401])


def test_concurrent_scoped_session_creation_is_limited_per_ip(client: Client) -> None:
    _, (token,) = _user(client)
    ip = new_ip()
    body = {"name": "key", "permissionFlags": 4, "password": PASSWORD}

    replies = parallel(10, lambda _: client.call("POST", "/users/me/sessions", body, token=token, ip=ip))

    assert Counter(r.status for r in replies) == {201: 4, 429: 6}
    listed = client.call("GET", "/users/me/sessions", token=token).body
    assert listed["count"] == 5
    tokens = {r.body["token"] for r in replies if r.status == 201}
    assert len(tokens) == 4


def test_concurrent_bulk_deletes_all_succeed_and_leave_only_the_caller(client: Client) -> None:
    _, tokens = _user(client, logins=6)
    ids = [t.split(".")[1] for t in tokens[1:]]

    replies = parallel(
        4, lambda _: client.call("DELETE", "/users/me/sessions", {"ids": ids}, token=tokens[0])
    )

    assert all(r.status == 200 for r in replies)
    assert client.call("GET", "/users/me/sessions", token=tokens[0]).body["count"] == 1
    # Each request counts what it found live before deleting (one read, then one batch write), so
    # overlapping requests may both count a session; no request counts more than exist.
    assert all(r.body["count"] <= len(ids) for r in replies)
    assert sum(r.body["count"] for r in replies) >= len(ids)
