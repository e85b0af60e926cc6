"""Password changes racing other changes of the same account, on the fakes, in milliseconds.

Each test makes a concurrent request land between the change's read (its authentication, where its
password was proven) and its write, the window in which the change's write goes stale. The answer
must say what happened (CONTRACT sections 3 and 6): a change whose session was revoked meanwhile is
401 INVALID_SESSION_ERROR and writes nothing; a change whose session still stands and whose password
was right when it was read is never told that its password was wrong. Same-session changes land one
after the other (the last to commit sets the password); see docs/flows.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import bcrypt
import pytest

from accounts_api import service as accounts
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core import passwords
from nimbus_core.auth import Caller, authenticate
from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.http.app import create_app
from nimbus_core.notices import Actor, Notice
from nimbus_core.session_issuer import IssuedSession
from nimbus_core.tokens import parse_session_token
from staff_api import service as staff
from staff_api.routes import routes as staff_routes
from tests.fakes import SETTINGS, FakeWorld, fake_world

PASSWORD = "correct horse"
FIRST, SECOND = "battery staple", "tr0ub4dor and 3"
ACTOR = Actor("user", "203.0.113.9", "Firefox 132 on Ubuntu")
# The bcrypt cost upstream used is 15 (seconds of CPU); the rules are the same at the smallest cost.
BCRYPT_COST = 4

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _register(world: FakeWorld, username: str = "alice") -> IssuedSession:
    body = RegisterBody.model_validate(
        {"username": username, "email": f"{username}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="Firefox 132 on Ubuntu", now=world.clock.now())


def _login(world: FakeWorld, username: str = "alice", password: str = PASSWORD) -> IssuedSession:
    body = LoginBody.model_validate({"username": username, "password": password})
    return auth.login(world.deps, body, session_name="curl 8 on an unknown OS", now=world.clock.now())


def _caller(world: FakeWorld, token: str, *, target_id: str | None = None) -> Caller | None:
    parsed = parse_session_token(token)
    assert parsed is not None
    return authenticate(world.deps, parsed, world.clock.now(), target_id=target_id)


def _read(world: FakeWorld, token: str) -> Caller:
    """The caller as a request reads it when it authenticates (its password proven against this)."""
    caller = _caller(world, token)
    assert caller is not None
    return caller


def _lands_first(world: FakeWorld, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[], object]) -> None:
    """Run ``concurrent`` (another request, to its end) just before the next commit: it lands after
    the change's read and before the change's write."""
    commit = world.tx.commit
    pending = [concurrent]

    def racing(ops: Any) -> None:
        if pending:
            pending.pop()()
        commit(ops)

    monkeypatch.setattr(world.tx, "commit", racing)


def _code(action: Callable[[], object]) -> ErrorCode:
    with pytest.raises(NimbusError) as raised:
        action()
    return raised.value.code


def _password_is(world: FakeWorld, user_id: str, password: str) -> bool:
    stored = world.deps.users.get(user_id)
    assert stored is not None
    return passwords.verify_password(stored.password_hash, password)


def _notices(world: FakeWorld) -> list[str]:
    """The password-changed notices queued so far (their recipients), oldest first."""
    return [email.to for kind, email in world.db.outbox if kind == Notice.PASSWORD_CHANGED.kind]


# --- the user's own change -------------------------------------------------------------------------


def test_a_change_whose_session_another_sessions_change_revoked_meanwhile_is_invalid_session(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = _register(world), _login(world)
    caller = _read(world, mine.token)
    other = _read(world, theirs.token)
    _lands_first(
        world, monkeypatch, lambda: accounts.change_password(world.deps, other, SECOND, 0, actor=ACTOR)
    )

    refused = _code(lambda: accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR))

    assert refused is ErrorCode.INVALID_SESSION_ERROR  # its password was right; its session is gone
    assert _password_is(world, caller.user.id, SECOND)
    assert len(_notices(world)) == 1  # the change that landed, none for the refused one
    assert _caller(world, mine.token) is None


def test_a_change_whose_session_a_staff_password_set_revoked_meanwhile_is_invalid_session(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = _register(world)
    caller = _read(world, mine.token)
    _lands_first(world, monkeypatch, lambda: staff.set_password(world.deps, caller.user, SECOND, 0))

    refused = _code(lambda: accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR))

    assert refused is ErrorCode.INVALID_SESSION_ERROR
    assert _password_is(world, caller.user.id, SECOND)
    assert _caller(world, mine.token) is None


def test_two_changes_from_one_session_both_land_and_the_last_to_commit_sets_the_password(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both proved the password that was current when they were read, and the session still stands
    (the other change kept it): neither is told its password was wrong."""
    mine, elsewhere = _register(world), _login(world)
    first_read, second_read = _read(world, mine.token), _read(world, mine.token)
    _lands_first(
        world, monkeypatch, lambda: accounts.change_password(world.deps, second_read, SECOND, 0, actor=ACTOR)
    )

    changed = accounts.change_password(world.deps, first_read, FIRST, 0, actor=ACTOR)

    assert _password_is(world, changed.id, FIRST)  # committed last
    assert _caller(world, mine.token) is not None  # kept by both
    assert _caller(world, elsewhere.token) is None
    assert len(_notices(world)) == 2  # one per change that landed
    assert _read(world, _login(world, password=FIRST).token).user.id == changed.id
    assert _code(lambda: _login(world, password=SECOND)) is ErrorCode.INVALID_PASSWORD_ERROR


def test_a_change_whose_imported_hash_a_login_replaced_meanwhile_lands(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login elsewhere proves the same password and replaces the imported bcrypt hash with
    argon2id: the hash the change read is gone, but the password it proved is still the password."""
    mine = _register(world)
    user = _read(world, mine.token).user
    legacy = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(BCRYPT_COST, prefix=b"2b")).decode()
    world.tx.commit(world.deps.users.change_ops(user, user.changed(password_hash=legacy)))
    caller = _read(world, mine.token)
    _lands_first(world, monkeypatch, lambda: _login(world))

    changed = accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR)

    assert _password_is(world, changed.id, FIRST)
    assert _caller(world, mine.token) is not None


# --- staff setting a password ----------------------------------------------------------------------

# Staff without a second factor: the deployment setting off, so that the password alone reverifies.
NO_FACTOR = replace(SETTINGS, staff_require_second_factor=False)


def _staff_set(world: FakeWorld, token: str, user_id: str, password: str) -> tuple[int, dict[str, Any]]:
    """PUT /users/:id/password through the staff function's app, reverified with the password."""
    app = create_app(staff_routes, deps=lambda: world.deps)
    path = f"/users/{user_id}/password"
    body = {"password": PASSWORD, "newPassword": password, "confirmNewPassword": password}
    event = {
        "version": "2.0",
        "routeKey": "PUT /users/{id}/password",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": token, "content-type": "application/json"},
        "isBase64Encoded": False,
        "body": json.dumps(body),
        "requestContext": {
            "http": {"method": "PUT", "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"])


def _staff_member(world: FakeWorld) -> tuple[str, str]:
    """A staff member's session token and id."""
    token = _register(world, "moderator").token
    user = _read(world, token).user
    world.tx.commit(world.deps.users.change_ops(user, user.changed(staff=True)))
    return token, user.id


def test_a_staff_password_set_whose_own_session_an_earlier_set_revoked_is_invalid_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Staff setting their own password twice from one session: the first revokes every session of
    theirs, this one's included, so the second, read before that, finds its session gone."""
    world = fake_world(NO_FACTOR)
    token, staff_id = _staff_member(world)
    read = _read(world, token).user
    _lands_first(world, monkeypatch, lambda: staff.set_password(world.deps, read, SECOND, 0))

    status, answer = _staff_set(world, token, staff_id, FIRST)

    assert (status, answer["code"]) == (401, "INVALID_SESSION_ERROR")
    assert _password_is(world, staff_id, SECOND)


def test_a_staff_password_set_racing_the_users_own_change_lands_and_revokes_the_users_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = fake_world(NO_FACTOR)
    token, _ = _staff_member(world)
    mine = _register(world)
    user = _read(world, mine.token)
    _lands_first(
        world, monkeypatch, lambda: accounts.change_password(world.deps, user, FIRST, 0, actor=ACTOR)
    )

    status, answer = _staff_set(world, token, user.user.id, SECOND)

    assert status == 200, answer
    assert _password_is(world, user.user.id, SECOND)  # built again on the user as the change left it
    assert _caller(world, mine.token) is None
