"""Account rules on the in-memory fakes: no moto, no network, milliseconds per test."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accounts_api import service as accounts
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core import reverify, verification
from nimbus_core.auth import Caller, authenticate
from nimbus_core.errors import DependencyError, ErrorCode, NimbusError, RateLimitedError
from nimbus_core.tokens import parse_session_token
from tests.fakes import FakeWorld, fake_world

PASSWORD = "correct horse"


@pytest.fixture
def world() -> FakeWorld:
    return fake_world()


def _register(world: FakeWorld, name: str = "alice") -> str:
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="laptop", now=world.clock.now()).token


def _caller(world: FakeWorld, token: str) -> Caller:
    parsed = parse_session_token(token)
    assert parsed is not None
    caller = authenticate(world.deps, parsed, world.clock.now())
    assert caller is not None
    return caller


def _login(world: FakeWorld, name: str, password: str = PASSWORD) -> str:
    body = LoginBody.model_validate({"username": name, "password": password})
    return auth.login(world.deps, body, session_name="phone", now=world.clock.now()).token


def _link_token(world: FakeWorld, to: str) -> str:
    [*_, (_, email)] = [m for m in world.db.outbox if m[1].to == to]
    return email.text.split("token=", 1)[1].split()[0]


def test_register_writes_user_claims_session_token_and_email_in_one_commit(world: FakeWorld) -> None:
    _register(world)
    assert world.db.calls == ["commit"]  # no read, no SES: one transaction
    assert len(world.db.users) == len(world.db.sessions) == len(world.db.tokens) == len(world.db.outbox) == 1
    assert [kind for kind, _ in world.db.outbox] == ["verify-email"]


def test_the_eleventh_wrong_password_on_an_account_is_a_lock_without_endpoint_headers(
    world: FakeWorld,
) -> None:
    _register(world)
    for _ in range(10):
        with pytest.raises(NimbusError) as wrong:
            _login(world, "alice", "wrong password")
        assert wrong.value.code is ErrorCode.INVALID_PASSWORD_ERROR
    with pytest.raises(RateLimitedError) as locked:
        _login(world, "alice")
    assert locked.value.account_lock
    assert 0 < locked.value.retry_after <= 900
    world.clock.advance(901)
    assert _login(world, "alice")


def test_reverification_asks_normal_sessions_for_the_password_even_with_a_2fa_object(
    world: FakeWorld,
) -> None:
    caller = _caller(world, _register(world))
    for body in ({}, {"2fa": {"token": "t", "type": "totp", "code": "123456"}}, {"password": 12345678}):
        with pytest.raises(NimbusError) as missing:
            reverify.reverify(world.deps, caller, body, world.clock.now())
        assert (missing.value.code, missing.value.extra) == (
            ErrorCode.MISSING_FIELDS_ERROR,
            {"fields": ["password"]},
        )
    with pytest.raises(NimbusError) as wrong:
        reverify.reverify(world.deps, caller, {"password": "nope nope"}, world.clock.now())
    assert wrong.value.code is ErrorCode.INVALID_PASSWORD_ERROR
    assert world.db.users[caller.user.id].auth_failures == 1  # counted toward the account lock
    reverify.reverify(world.deps, caller, {"password": PASSWORD}, world.clock.now())


def test_scoped_sessions_are_never_asked_to_reverify(world: FakeWorld) -> None:
    caller = _caller(world, _register(world))
    scoped = Caller(caller.user, caller.session.changed(permission_flags=1))
    reverify.reverify(world.deps, scoped, {}, world.clock.now())  # no password, no error


def test_a_password_change_keeps_the_caller_and_revokes_every_other_session(world: FakeWorld) -> None:
    token = _register(world)
    others = [_login(world, "alice") for _ in range(3)]
    world.db.calls.clear()
    accounts.change_password(world.deps, _caller(world, token), "a brand new one", world.clock.now())
    assert world.db.calls.count("commit") == 1
    assert _caller(world, token).user.session_generation == 1
    for other in others:
        parsed = parse_session_token(other)
        assert parsed is not None
        assert authenticate(world.deps, parsed, world.clock.now()) is None
    assert _login(world, "alice", "a brand new one")


def test_a_changed_email_is_unverified_and_only_the_new_link_works_once(world: FakeWorld) -> None:
    token = _register(world)
    old_link = _link_token(world, "alice@example.com")
    changed = accounts.change_email(world.deps, _caller(world, token), "new@example.org", world.clock.now())
    assert changed.verified_at is None
    new_link = _link_token(world, "new@example.org")
    with pytest.raises(NimbusError):
        verification.verify(world.deps, old_link, world.clock.now())
    assert verification.verify(world.deps, new_link, world.clock.now()).verified_at is not None
    with pytest.raises(NimbusError) as replay:
        verification.verify(world.deps, new_link, world.clock.now())
    assert replay.value.code is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR


def test_a_verification_link_expires_after_24_hours(world: FakeWorld) -> None:
    _register(world)
    link = _link_token(world, "alice@example.com")
    world.clock.advance(24 * 3600)
    with pytest.raises(NimbusError):
        verification.verify(world.deps, link, world.clock.now())


def test_a_banned_user_cannot_verify(world: FakeWorld) -> None:
    token = _register(world)
    link = _link_token(world, "alice@example.com")
    user = _caller(world, token).user
    world.db.users[user.id] = user.changed(banned_at="2027-01-01T00:00:00.000Z")
    with pytest.raises(NimbusError) as banned:
        verification.verify(world.deps, link, world.clock.now())
    assert banned.value.code is ErrorCode.BANNED_ERROR


def test_each_change_is_one_commit_after_authentication(world: FakeWorld) -> None:
    token = _register(world)
    world.deps.domains.put("files.example", subdomains=True, now="2027-01-01T00:00:00.000Z")
    changes: list[Callable[[Caller], object]] = [
        lambda c: accounts.change_username(world.deps, c, "alice_2", world.clock.now()),
        lambda c: accounts.change_email(world.deps, c, "a2@example.com", world.clock.now()),
        lambda c: accounts.change_password(world.deps, c, "another secret", world.clock.now()),
        lambda c: accounts.change_domain(world.deps, c, "files.example", "me", world.clock.now()),
        lambda c: accounts.resend_verification(world.deps, c, world.clock.now()),
    ]
    for change in changes:
        caller = _caller(world, token)
        world.db.calls.clear()
        change(caller)
        assert world.db.calls == ["commit"]


def test_a_deletion_cut_between_its_phases_leaves_a_usable_account_and_completes_on_retry(
    world: FakeWorld,
) -> None:
    token = _register(world)
    _login(world, "alice")
    world.tx.fail_next = DependencyError("injected")
    with pytest.raises(DependencyError):
        accounts.delete_account(world.deps, _caller(world, token))
    assert _login(world, "alice")  # the account still works
    accounts.delete_account(world.deps, _caller(world, token))
    assert world.db.users == {}
    assert world.db.sessions == {}
    assert world.db.tokens == {}
    assert world.db.usernames == world.db.emails == {}
    _register(world)  # the name and the address are free at once
