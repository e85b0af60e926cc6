"""Session rules on the fakes, in milliseconds: liveness, "me", counts, revoke-all and its race,
scoped-session lifetimes and staff scopes, and the store round trips each costs."""

from __future__ import annotations

import pytest

from accounts_api import service as accounts
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core.accounts import notices
from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.errors import ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.scopes import Scope
from nimbus_core.http.guard import Request
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.session_issuer import NoDeviceTokenError
from nimbus_core.sessions.tokens import parse_session_token
from sessions_api import service
from sessions_api.service import Owner
from tests.fakes import FakeWorld, fake_world

PASSWORD = "correct horse"
DAY = 86400


# argon2id at its smallest parameters (tests/unit/conftest.py): the rules are the same, the tests fast.
pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _user(world: FakeWorld, logins: int = 0, *, remember: bool = False) -> list[str]:
    """Register alice-like user; its tokens, oldest first."""
    name = f"u{new_id()[-8:].lower()}"
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    tokens = [auth.register(world.deps, body, session_name="first", now=world.clock.now()).token]
    for _ in range(logins):
        login = LoginBody.model_validate({"username": name, "password": PASSWORD, "rememberMe": remember})
        tokens.append(auth.login(world.deps, login, session_name="later", now=world.clock.now()).token)
    return tokens


def _caller(world: FakeWorld, token: str) -> Caller | None:
    parsed = parse_session_token(token)
    assert parsed is not None
    return authenticate(world.deps, parsed, world.clock.now())


def _me(world: FakeWorld, token: str) -> Owner:
    caller = _caller(world, token)
    assert caller is not None
    return Owner.me(caller, Actor.user("203.0.113.9", caller.session))


def _sid(token: str) -> str:
    return token.split(".")[1]


def _error(action: object) -> NimbusError:
    with pytest.raises(NimbusError) as raised:
        action()  # type: ignore[operator]
    return raised.value


def test_list_counts_every_live_session_and_pages_newest_first(world: FakeWorld) -> None:
    tokens = _user(world, logins=4)
    owner = _me(world, tokens[0])

    count, page = service.list_sessions(world.deps, owner, world.clock.now(), limit=2, offset=1)

    assert count == 5
    assert [s.id for s in page] == [_sid(tokens[3]), _sid(tokens[2])]


def test_expired_and_revoked_sessions_are_invisible(world: FakeWorld) -> None:
    short, long = _user(world, logins=1, remember=True)
    world.clock.advance(DAY)
    owner = _me(world, long)

    count, page = service.list_sessions(world.deps, owner, world.clock.now(), limit=50, offset=0)

    assert (count, [s.id for s in page]) == (1, [_sid(long)])
    assert (
        _error(lambda: service.get_session(world.deps, owner, _sid(short), world.clock.now())).status == 404
    )


def test_me_is_answered_from_the_authentication_read(world: FakeWorld) -> None:
    (token,) = _user(world)
    owner = _me(world, token)
    before = world.round_trips()

    session = service.get_session(world.deps, owner, "me", world.clock.now())

    assert session.id == _sid(token)
    assert world.round_trips() == before


def test_me_means_nothing_to_staff_endpoints(world: FakeWorld) -> None:
    (token,) = _user(world)
    caller = _caller(world, token)
    assert caller is not None

    refused = _error(lambda: service.get_session(world.deps, Owner(caller.user), "me", world.clock.now()))

    assert (refused.code, refused.status) == (ErrorCode.INVALID_SESSION_ERROR, 404)


def test_malformed_ids_are_unknown_without_a_read(world: FakeWorld) -> None:
    (token,) = _user(world)
    owner = _me(world, token)
    before = world.round_trips()

    for bad in ("", "x" * 5000, "all", "../" * 9):
        assert (
            _error(lambda bad=bad: service.get_session(world.deps, owner, bad, world.clock.now())).status
            == 404
        )
        assert (
            _error(lambda bad=bad: service.delete_session(world.deps, owner, bad, world.clock.now())).status
            == 404
        )
    assert service.delete_sessions(world.deps, owner, ["", "x" * 5000], world.clock.now()) == 0
    assert world.round_trips() == before


def test_bulk_delete_counts_live_sessions_once_and_resolves_me(world: FakeWorld) -> None:
    tokens = _user(world, logins=2)
    owner = _me(world, tokens[0])
    ids = [_sid(tokens[1]), _sid(tokens[1]), "me", new_id()]

    assert service.delete_sessions(world.deps, owner, ids, world.clock.now()) == 2
    assert _caller(world, tokens[0]) is None
    assert _caller(world, tokens[1]) is None
    assert _caller(world, tokens[2]) is not None


def test_revoke_all_keeps_the_caller_in_the_new_generation(world: FakeWorld) -> None:
    tokens = _user(world, logins=3)

    count = service.revoke_all_sessions(
        world.deps, _me(world, tokens[0]), keep_current=True, now=world.clock.now()
    )

    assert count == 3
    assert [_caller(world, t) is not None for t in tokens] == [True, False, False, False]


def test_revoke_all_from_a_stale_view_is_refused_and_keeps_nobody_extra(world: FakeWorld) -> None:
    tokens = _user(world, logins=1)
    first, second = _me(world, tokens[0]), _me(world, tokens[1])  # both authenticated before either wrote

    service.revoke_all_sessions(world.deps, first, keep_current=True, now=world.clock.now())
    refused = _error(
        lambda: service.revoke_all_sessions(world.deps, second, keep_current=True, now=world.clock.now())
    )

    assert refused.code is ErrorCode.INVALID_SESSION_ERROR
    assert [_caller(world, t) is not None for t in tokens] == [True, False]


def test_staff_revoke_all_retries_after_a_concurrent_revocation(world: FakeWorld) -> None:
    tokens = _user(world, logins=1)
    caller = _caller(world, tokens[0])
    assert caller is not None
    stale_target = Owner(caller.user)  # staff read the user before the user's own revoke-all
    service.revoke_all_sessions(world.deps, _me(world, tokens[0]), keep_current=True, now=world.clock.now())

    service.revoke_all_sessions(world.deps, stale_target, keep_current=False, now=world.clock.now())

    assert [_caller(world, t) for t in tokens] == [None, None]


def test_staff_revoke_all_lands_after_the_users_own_password_change(world: FakeWorld) -> None:
    """The password change that lands between the staff read and the revocation revoked the other
    sessions and changed the hash: the revocation is made again on the user as stored, never
    answered INVALID_PASSWORD_ERROR (no password was asked)."""
    tokens = _user(world, logins=1)
    owner = _caller(world, tokens[0])
    assert owner is not None
    stale_target = Owner(owner.user)
    actor = notices.Actor("user", "203.0.113.9", "Firefox 132 on Ubuntu")
    accounts.change_password(world.deps, owner, "a new long password", world.clock.now(), actor=actor)

    service.revoke_all_sessions(world.deps, stale_target, keep_current=False, now=world.clock.now())

    assert [_caller(world, t) for t in tokens] == [None, None]


def test_staff_revoke_all_whose_write_went_stale_is_made_again_on_a_fresh_read(world: FakeWorld) -> None:
    """A condition that failed for a change the revocation cannot see (the fresh read finds the
    user as read) is no answer: the revocation is made again and lands."""
    tokens = _user(world, logins=2)
    caller = _caller(world, tokens[0])
    assert caller is not None
    world.tx.fail_next = UserChangedError()

    count = service.revoke_all_sessions(
        world.deps, Owner(caller.user), keep_current=False, now=world.clock.now()
    )

    assert count == 3
    assert [_caller(world, t) for t in tokens] == [None, None, None]


def test_revoke_all_costs_one_transaction_whatever_the_number_of_sessions(world: FakeWorld) -> None:
    tokens = _user(world, logins=40)
    owner = _me(world, tokens[0])
    calls = len(world.db.calls)

    service.revoke_all_sessions(world.deps, owner, keep_current=False, now=world.clock.now())

    # One Query (for the count) and one transaction; no per-session write.
    assert world.db.calls[calls:] == ["sessions.count_live", "commit"]
    assert all(_caller(world, t) is None for t in tokens)


@pytest.mark.parametrize(("long_lived", "lifetime"), [(False, DAY), (True, 3650 * DAY)])
def test_scoped_sessions_last_24_hours_or_10_years(world: FakeWorld, long_lived: bool, lifetime: int) -> None:
    (token,) = _user(world)
    caller = _caller(world, token)
    assert caller is not None
    now = world.clock.now()

    issued = service.create_scoped_session(
        world.deps,
        caller,
        name="key",
        permission_flags=int(Scope.ACCOUNT_READ),
        long_lived=long_lived,
        now=now,
        actor=notices.STAFF,
    )

    assert issued.session.exp == int(now) + lifetime
    assert issued.session.permission_flags == int(Scope.ACCOUNT_READ)
    scoped = _caller(world, issued.token)
    assert scoped is not None
    assert scoped.session.scoped


def test_a_scoped_session_is_never_shown_as_a_sign_in(world: FakeWorld) -> None:
    """SuccessfulAuth always carries a known-device token; a scoped session has none, and its token
    is shown with its Session (ScopedSessionView), so showing it as a sign-in is a bug, not a reply
    without ``device``."""
    (token,) = _user(world)
    caller = _caller(world, token)
    assert caller is not None
    issued = service.create_scoped_session(
        world.deps,
        caller,
        name="key",
        permission_flags=int(Scope.ACCOUNT_READ),
        long_lived=False,
        now=world.clock.now(),
        actor=notices.STAFF,
    )
    with pytest.raises(NoDeviceTokenError):
        issued.to_public()


def test_staff_scopes_are_refused_to_a_non_staff_user_before_anything_is_written(world: FakeWorld) -> None:
    (token,) = _user(world)
    caller = _caller(world, token)
    assert caller is not None
    stored = len(world.db.sessions)

    refused = _error(
        lambda: service.create_scoped_session(
            world.deps,
            caller,
            name="k",
            permission_flags=int(Scope.STAFF_READ_SESSIONS | Scope.ALL),
            long_lived=False,
            now=world.clock.now(),
            actor=notices.STAFF,
        )
    )

    assert refused.code is ErrorCode.INSUFFICIENT_PERMISSIONS_ERROR
    assert len(world.db.sessions) == stored


def test_an_unknown_staff_target_is_invalid_user() -> None:
    world = fake_world()
    # The guard leaves target_id unset when the path names no user (malformed id or none at all).
    request = Request(deps=world.deps, source_ip="203.0.113.9", headers={}, now=world.clock.now(), token=None)

    assert _error(request.target).code is ErrorCode.INVALID_USER_ERROR
