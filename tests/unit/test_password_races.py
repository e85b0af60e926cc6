"""Password changes racing other changes of the same account, on the fakes, in milliseconds.

Each test makes a concurrent request land between the change's read (its authentication, where its
password was proven) and its write, the window in which the change's write goes stale. The answer
must say what happened (CONTRACT sections 3 and 6): a change whose session was revoked meanwhile is
401 INVALID_SESSION_ERROR and writes nothing; a change whose session still stands and whose password
was right when it was read is never told that its password was wrong. Same-session changes land one
after the other (the last to commit sets the password); see docs/flows.md.
"""

from __future__ import annotations

from typing import Any

import bcrypt
import pytest

from accounts_api import service as accounts
from accounts_api.routes import routes as account_routes
from nimbus_core.accounts.notices import Actor, Notice
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.ratelimits import CHANGE_PASSWORD
from nimbus_core.factors.reverify import reverify
from nimbus_core.sessions import credentials, passwords
from staff_api import service as staff
from tests.fakes import FakeWorld, fake_world
from tests.races import (
    NO_FACTOR,
    PASSWORD,
    call,
    caller_of,
    code,
    lands_first,
    login,
    read,
    register,
    staff_member,
)

FIRST, SECOND = "battery staple", "tr0ub4dor and 3"
ACTOR = Actor("user", "203.0.113.9", "Firefox 132 on Ubuntu")
# The bcrypt cost upstream used is 15 (seconds of CPU); the rules are the same at the smallest cost.
BCRYPT_COST = 4

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


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
    mine, theirs = register(world), login(world)
    caller = read(world, mine.token)
    other = read(world, theirs.token)
    lands_first(
        world, monkeypatch, lambda: accounts.change_password(world.deps, other, SECOND, 0, actor=ACTOR)
    )

    refused = code(lambda: accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR))

    assert refused is ErrorCode.INVALID_SESSION_ERROR  # its password was right; its session is gone
    assert _password_is(world, caller.user.id, SECOND)
    assert len(_notices(world)) == 1  # the change that landed, none for the refused one
    assert caller_of(world, mine.token) is None


def test_a_change_whose_session_a_staff_password_set_revoked_meanwhile_is_invalid_session(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = register(world)
    caller = read(world, mine.token)
    lands_first(world, monkeypatch, lambda: staff.set_password(world.deps, caller.user, SECOND, 0))

    refused = code(lambda: accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR))

    assert refused is ErrorCode.INVALID_SESSION_ERROR
    assert _password_is(world, caller.user.id, SECOND)
    assert caller_of(world, mine.token) is None


def test_two_changes_from_one_session_both_land_and_the_last_to_commit_sets_the_password(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both proved the password that was current when they were read, and the session still stands
    (the other change kept it): neither is told its password was wrong."""
    mine, elsewhere = register(world), login(world)
    first_read, second_read = read(world, mine.token), read(world, mine.token)
    lands_first(
        world, monkeypatch, lambda: accounts.change_password(world.deps, second_read, SECOND, 0, actor=ACTOR)
    )

    changed = accounts.change_password(world.deps, first_read, FIRST, 0, actor=ACTOR)

    assert _password_is(world, changed.id, FIRST)  # committed last
    assert caller_of(world, mine.token) is not None  # kept by both
    assert caller_of(world, elsewhere.token) is None
    assert len(_notices(world)) == 2  # one per change that landed
    assert read(world, login(world, password=FIRST).token).user.id == changed.id
    assert code(lambda: login(world, password=SECOND)) is ErrorCode.INVALID_PASSWORD_ERROR


def test_a_change_that_loses_to_each_of_four_identical_changes_sent_with_it_still_lands(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five changes from one session at once, each with the right password (the endpoint's limit
    lets five through): the one that commits last lost to each of the other four, and is still a
    200, never a 500."""
    mine = register(world)
    caller = read(world, mine.token)
    racers = [
        lambda: accounts.change_password(world.deps, read(world, mine.token), PASSWORD, 0, actor=ACTOR)
        for _ in range(CHANGE_PASSWORD.limit - 1)
    ]
    commit, inside = world.tx.commit, list[bool]()

    def each_attempt_loses(ops: Any) -> None:
        if racers and not inside:  # another request lands before each of this change's writes
            inside.append(True)
            try:
                racers.pop()()
            finally:
                inside.pop()
        commit(ops)

    monkeypatch.setattr(world.tx, "commit", each_attempt_loses)

    changed = accounts.change_password(world.deps, caller, PASSWORD, 0, actor=ACTOR)

    assert racers == []  # all four landed first
    assert _password_is(world, changed.id, PASSWORD)
    assert caller_of(world, mine.token) is not None
    assert len(_notices(world)) == CHANGE_PASSWORD.limit


def test_a_change_whose_imported_hash_a_login_replaced_meanwhile_lands(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login elsewhere proves the same password and replaces the imported bcrypt hash with
    argon2id: the hash the change read is gone, but the password it proved is still the password."""
    mine = register(world)
    user = read(world, mine.token).user
    legacy = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(BCRYPT_COST, prefix=b"2b")).decode()
    world.tx.commit(world.deps.users.change_ops(user, user.changed(password_hash=legacy)))
    caller = read(world, mine.token)
    lands_first(world, monkeypatch, lambda: login(world))

    changed = accounts.change_password(world.deps, caller, FIRST, 0, actor=ACTOR)

    assert _password_is(world, changed.id, FIRST)
    assert caller_of(world, mine.token) is not None


def test_the_own_password_change_carries_no_rehash_of_the_imported_hash_it_replaces(world: FakeWorld) -> None:
    """PUT /users/me/password declares ``sets_own_password``: its own write replaces the imported
    hash, so reverification adds no rehash of it (a second write of the user item in one
    transaction, which DynamoDB refuses); any other reverified change carries the rehash."""
    mine = register(world)
    user = read(world, mine.token).user
    legacy = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(BCRYPT_COST, prefix=b"2b")).decode()
    world.tx.commit(world.deps.users.change_ops(user, user.changed(password_hash=legacy)))
    caller, proof = read(world, mine.token), {"password": PASSWORD}
    (own,) = [
        e.policy for e in account_routes.endpoints if (e.method, e.path) == ("PUT", "/users/me/password")
    ]
    others = [e for e in account_routes.endpoints if e.policy.reverify and e.policy is not own]

    assert own.sets_own_password
    assert (
        reverify(world.deps, caller, proof, 0, endpoint="PUT /users/me/password", sets_own_password=True)
        == []
    )
    assert others
    assert not any(e.policy.sets_own_password for e in others)
    assert len(reverify(world.deps, caller, proof, 0, endpoint="DELETE /users/me")) == 1


def test_the_guard_hands_the_policys_sets_own_password_to_reverification_over_http(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the accounts app: the own password change reverifies without rehashing the imported
    hash (the guard passes ``Policy.sets_own_password`` on), while the address change does rehash."""
    rehashed: list[str] = []
    real_rehash = credentials.rehash_ops

    def recorded(*args: Any, **kwargs: Any) -> Any:
        rehashed.append("rehash")
        return real_rehash(*args, **kwargs)

    monkeypatch.setattr(credentials, "rehash_ops", recorded)
    legacy = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(BCRYPT_COST, prefix=b"2b")).decode()
    mine = register(world)
    user = read(world, mine.token).user
    world.tx.commit(world.deps.users.change_ops(user, user.changed(password_hash=legacy)))

    body = {"password": PASSWORD, "newPassword": FIRST, "confirmNewPassword": FIRST}
    status, answer = call(world, mine.token, "PUT", "/users/me/password", body, routes=account_routes)
    assert status == 200, answer
    assert rehashed == []
    assert _password_is(world, user.id, FIRST)

    user = read(world, mine.token).user
    world.tx.commit(world.deps.users.change_ops(user, user.changed(password_hash=legacy)))
    status, answer = call(
        world,
        mine.token,
        "PUT",
        "/users/me/email",
        {"password": PASSWORD, "email": "new@example.com"},
        routes=account_routes,
    )
    assert status == 200, answer
    assert rehashed == ["rehash"]


# --- staff setting a password ----------------------------------------------------------------------


def _staff_set(world: FakeWorld, token: str, user_id: str, password: str) -> tuple[int, dict[str, Any]]:
    """PUT /users/:id/password through the staff function's app, reverified with the password."""
    body = {"password": PASSWORD, "newPassword": password, "confirmNewPassword": password}
    return call(world, token, "PUT", f"/users/{user_id}/password", body)


def test_a_staff_password_set_whose_own_session_an_earlier_set_revoked_is_invalid_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Staff setting their own password twice from one session: the first revokes every session of
    theirs, this one's included, so the second, read before that, finds its session gone."""
    world = fake_world(NO_FACTOR)
    token, staff_id = staff_member(world)
    as_read = read(world, token).user
    lands_first(world, monkeypatch, lambda: staff.set_password(world.deps, as_read, SECOND, 0))

    status, answer = _staff_set(world, token, staff_id, FIRST)

    assert (status, answer["code"]) == (401, "INVALID_SESSION_ERROR")
    assert _password_is(world, staff_id, SECOND)


def test_a_staff_password_set_racing_the_users_own_change_lands_and_revokes_the_users_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = fake_world(NO_FACTOR)
    token, _ = staff_member(world)
    mine = register(world)
    user = read(world, mine.token)
    lands_first(world, monkeypatch, lambda: accounts.change_password(world.deps, user, FIRST, 0, actor=ACTOR))

    status, answer = _staff_set(world, token, user.user.id, SECOND)

    assert status == 200, answer
    assert _password_is(world, user.user.id, SECOND)  # built again on the user as the change left it
    assert caller_of(world, mine.token) is None
