"""Hostile input: requests an attacker (or a broken client) sends, each of which must get a 4xx."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from bench.soak.accounts import Account
from bench.soak.actor import Actor
from bench.soak.recorder import Reply

BODY_LIMIT = 64 * 1024


def send_hostile(actor: Actor, account: Account) -> None:
    """A few requests an attacker (or a broken client) sends, each of which must get a 4xx."""
    ip, token = account.ip, account.token

    def probe(kind: str, method: str, path: str, body: Any = None, **extra: Any) -> Callable[[], Reply]:
        return lambda: actor.soak.call(kind, method, path, body, ip=ip, hostile=True, **extra)

    nested = b'{"username": ' + b"[" * 5000 + b"]" * 5000 + b', "password": "x"}'
    huge = json.dumps({"username": "x", "email": "x@example.com", "password": "x" * BODY_LIMIT}).encode()
    forged = f"{account.user_id}.{account.session_id}.{'A' * 43}"
    probes = [
        probe("POST /login [bad JSON]", "POST", "/login", raw=b'{"username": "a", '),
        probe("POST /login [nested 5000 deep]", "POST", "/login", raw=nested),
        probe("POST /login [not UTF-8]", "POST", "/login", raw=b'{"username": "\xff\xfe"}'),
        probe("POST /login [NaN]", "POST", "/login", raw=b'{"username": NaN, "password": 1}'),
        probe("POST /login [duplicate keys]", "POST", "/login", raw=b'{"username": "a", "username": "b"}'),
        probe("POST /register [over 64 KiB]", "POST", "/register", raw=huge),
        probe(
            "PUT /users/me/username [wrong types]",
            "PUT",
            "/users/me/username",
            {"username": 5, "password": ["x"]},
            token=token,
        ),
        probe(
            "PATCH /users/me/sessions/:sid [not an object]",
            "PATCH",
            "/users/me/sessions/me",
            raw=b"[1, 2, 3]",
            token=token,
        ),
        probe(
            "DELETE /users/me/sessions [51 ids]",
            "DELETE",
            "/users/me/sessions",
            {"ids": ["x"] * 51},
            token=token,
        ),
        probe("GET /users/me [forged token]", "GET", "/users/me", token=forged),
        probe("GET /users/me [garbage token]", "GET", "/users/me", token="Bearer ../../etc/passwd"),
        probe("GET /nowhere [unknown route]", "GET", f"/nowhere/{uuid.uuid4().hex}"),
        probe("PATCH /register [wrong method]", "PATCH", "/register", {}),
        probe("GET /users [not staff]", "GET", "/users?limit=5", token=token),
    ]
    exposed = list(actor.soak.exposed)
    if exposed:
        them = actor.rng.choice(exposed)
        theirs = f"/users/me/sessions/{them.session_id}"
        probes += [
            probe("GET /users/me/sessions/:sid [another's]", "GET", theirs, token=token),
            probe(
                "PATCH /users/me/sessions/:sid [another's]",
                "PATCH",
                theirs,
                {"name": "mine"},
                token=token,
            ),
            probe("DELETE /users/me/sessions/:sid [another's]", "DELETE", theirs, token=token),
            probe("GET /users/:id [not staff]", "GET", f"/users/{them.user_id}", token=token),
            probe(
                "GET /users/me [another's ids, own secret]",
                "GET",
                "/users/me",
                token=f"{them.user_id}.{them.session_id}.{token.rsplit('.', 1)[-1]}",
            ),
        ]
        dead = [e for e in exposed if e.dead_token]
        if dead:
            probes.append(
                probe(
                    "GET /users/me [dead token]",
                    "GET",
                    "/users/me",
                    token=actor.rng.choice(dead).dead_token,
                )
            )
    for send in actor.rng.sample(probes, k=min(len(probes), actor.rng.randint(2, 5))):
        send()
