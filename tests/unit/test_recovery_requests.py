"""Asking for a recovery link (CONTRACT section 14) on the fakes: the request does the same work for
every name (it is queued, nothing looked up), and the recovery function handles it after the answer:
a link to the account's current address, nothing for an unknown name, a banned account or one past
its silent limit, and one token and one mail per request however often its record arrives."""

from __future__ import annotations

import re
import threading

import pytest

from auth_api import recovery
from auth_api import service as auth
from auth_api.models import RecoverBody, RegisterBody
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import RecoveryRequest
from recovery_api.service import handle_request
from tests.fakes import FakeWorld
from tests.recovery_requests import ask_for_recovery

PASSWORD = "correct horse"
LINK = re.compile(r"recover\?token=([A-Za-z0-9_.-]+)")

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _register(world: FakeWorld, name: str = "alice") -> None:
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    auth.register(world.deps, body, session_name="laptop", now=world.clock.now())


def _user(world: FakeWorld, name: str = "alice") -> User:
    user = world.deps.users.find_by_username(name)
    assert user is not None
    return user


def _ban(world: FakeWorld, name: str) -> None:
    world.db.users[_user(world, name).id] = _user(world, name).changed(banned_at=world.clock.iso())


def _queue(world: FakeWorld, name: str) -> RecoveryRequest:
    return recovery.request_recovery(
        world.deps, RecoverBody.model_validate({"username": name}), world.clock.now()
    )


def _ask(world: FakeWorld, name: str) -> str:
    return ask_for_recovery(world.deps, name, world.clock.now())


def _mailed_tokens(world: FakeWorld, to: str) -> list[str]:
    return [
        found.group(1)
        for kind, email in world.db.outbox
        if kind == "recover-password" and email.to == to and (found := LINK.search(email.text))
    ]


# --- the request: the same work for every name -------------------------------------------------------


def test_the_request_does_the_same_store_calls_for_an_existing_unknown_banned_or_limited_name(
    world: FakeWorld,
) -> None:
    _register(world)
    _register(world, "bob")
    _ban(world, "bob")
    _register(world, "carol")
    for _ in range(3):
        _ask(world, "carol")
    calls = {}
    for name in ("alice", "nobody", "bob", "carol", "nobody@example.com", "alice@example.com"):
        world.db.calls.clear()
        _queue(world, name)
        calls[name] = list(world.db.calls)
    assert all(made == ["outbox.queue_recovery"] for made in calls.values()), calls
    assert len(_mailed_tokens(world, "carol@example.com")) == 3  # nothing mailed by the requests
    assert len(world.db.recovery_requests) == 6  # each waits for the recovery function


def test_the_request_stores_the_name_as_asked_cut_past_any_accounts_length(world: FakeWorld) -> None:
    assert _queue(world, "  Alice@Example.com ").login_name == "Alice@Example.com"  # trimmed, as login
    assert len(_queue(world, "x" * 5000).login_name) == 321


# --- the recovery function ---------------------------------------------------------------------------


def test_a_link_goes_to_the_accounts_current_address_verified_or_not_matched_as_login_matches(
    world: FakeWorld,
) -> None:
    _register(world)
    assert _ask(world, "ALICE") == "mailed"  # case-insensitively
    assert _ask(world, "Alice@Example.com") == "mailed"  # or by address
    (first, second) = _mailed_tokens(world, "alice@example.com")
    assert first != second
    mail = next(email for kind, email in world.db.outbox if kind == "recover-password")
    assert "30 minutes" in mail.text
    assert "30 minutes" in mail.html
    assert _user(world).verified_at is None
    assert world.db.recovery_requests == {}  # each request removed with its mail


def test_an_unknown_name_a_banned_account_and_one_past_its_limit_are_mailed_nothing(world: FakeWorld) -> None:
    _register(world)
    assert [_ask(world, "alice") for _ in range(5)] == ["mailed"] * 3 + ["withheld"] * 2
    world.clock.advance(24 * 3600)  # the window is over
    assert _ask(world, "alice") == "mailed"
    assert len(_mailed_tokens(world, "alice@example.com")) == 4
    _register(world, "bob")
    _ban(world, "bob")
    assert _ask(world, "bob") == "withheld"
    assert _mailed_tokens(world, "bob@example.com") == []
    for unknown in ("nobody", "nobody@example.com", "not an address@", "", "x" * 400):
        assert _ask(world, unknown) == "withheld"
    assert world.db.recovery_requests == {}


def test_a_request_handled_twice_issues_one_token_and_one_mail(world: FakeWorld) -> None:
    _register(world)
    request = _queue(world, "alice")

    outcomes = [handle_request(world.deps, request, world.clock.now()) for _ in range(2)]

    assert outcomes == ["mailed", "handled"]
    assert len(_mailed_tokens(world, "alice@example.com")) == 1
    assert len(world.db.recovery) == 1
    assert _user(world).recovery_mails == 1


def test_one_request_handled_by_parallel_deliveries_mails_once(world: FakeWorld) -> None:
    _register(world)
    request = _queue(world, "alice")
    outcomes: list[str] = []

    def deliver() -> None:
        outcomes.append(handle_request(world.deps, request, world.clock.now()))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["handled"] * 7 + ["mailed"]
    assert len(_mailed_tokens(world, "alice@example.com")) == 1


def test_concurrent_requests_never_mail_more_than_the_limit(world: FakeWorld) -> None:
    _register(world)
    threads = [threading.Thread(target=_ask, args=(world, "alice")) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(_mailed_tokens(world, "alice@example.com")) == 3


def test_a_newer_request_supersedes_the_pending_token_and_only_one_is_stored(world: FakeWorld) -> None:
    _register(world)
    _ask(world, "alice")
    first = _user(world).pending_recovery
    _ask(world, "alice")
    assert len(world.db.recovery) == 1
    assert _user(world).pending_recovery != first
    assert set(world.db.recovery) == {_user(world).pending_recovery}


def test_a_request_that_waited_past_its_ttl_is_removed_unmailed(world: FakeWorld) -> None:
    _register(world)
    request = _queue(world, "alice")
    world.clock.advance(request.expires_at - world.clock.now())

    assert handle_request(world.deps, request, world.clock.now()) == "expired"
    assert _mailed_tokens(world, "alice@example.com") == []
    assert world.db.recovery_requests == {}
