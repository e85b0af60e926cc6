"""Passwords the world already knows (CONTRACT section 17), on the fakes through the functions'
apps: every way of choosing a new password refuses one from the shipped list with 400
INSECURE_PASSWORD_ERROR naming its field, and writes nothing; Have I Been Pwned is asked only where
the deployment turns it on; a login with such a password still signs in, and is told."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from accounts_api.routes import routes as account_routes
from auth_api import recovery
from auth_api.models import ResetPasswordBody
from auth_api.routes import routes as auth_routes
from nimbus_core.accounts import password_policy
from nimbus_core.adapters.outbox import OutboxMessage
from nimbus_core.compromised import is_listed
from nimbus_core.compromised.pwned_range import PwnedRange
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Email
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions import passwords
from staff_api.routes import routes as staff_routes
from tests.fakes import SETTINGS, FakeWorld, fake_world
from tests.migration.upstream import bcrypt_hash
from tests.races import NO_FACTOR, PASSWORD, read, staff_member
from tests.unit.test_activity_rules import _request
from tests.unit.test_mail_service import FakeLedger
from tests.unit.test_new_sign_in_notices import _mail
from tests.unit.test_recovery_rules import _token as recovery_token

# Entries of the shipped list (8 characters or more, as new passwords must be).
LISTED = ("iloveyou", "qwertyuiop", "password1", "sunshine1")
# Not in the shipped list; a range answer below knows it.
REUSED = "Summer2019!Bristol"


@pytest.fixture
def world() -> FakeWorld:
    return fake_world()


def test_the_listed_examples_are_in_the_shipped_list_and_the_test_passwords_are_not() -> None:
    assert all(is_listed(p) for p in LISTED)
    assert not any(is_listed(p) for p in (PASSWORD, REUSED, "battery staple"))


@pytest.mark.parametrize("password", LISTED)
def test_register_refuses_a_listed_password_and_creates_nothing(world: FakeWorld, password: str) -> None:
    body = {"username": "alice", "email": "alice@example.com", "password": password}

    status, answer = _request(world, auth_routes, "POST", "/register", body)

    assert (status, answer["code"], answer["fields"]) == (400, "INSECURE_PASSWORD_ERROR", ["password"])
    assert world.db.users == {}


def test_a_password_change_refuses_a_listed_password_and_keeps_the_old_one(world: FakeWorld) -> None:
    token = _register(world)
    body = {"password": PASSWORD, "newPassword": "password1", "confirmNewPassword": "password1"}

    status, answer = _request(world, account_routes, "PUT", "/users/me/password", body, token=token)

    assert (status, answer["code"], answer["fields"]) == (400, "INSECURE_PASSWORD_ERROR", ["newPassword"])
    assert _login_status(world, PASSWORD) == 201


def test_staff_cannot_set_a_listed_password_either() -> None:
    world = fake_world(NO_FACTOR)
    staff_token, _ = staff_member(world)
    user_id = read(world, _register(world)).user.id
    body = {"password": PASSWORD, "newPassword": "sunshine1", "confirmNewPassword": "sunshine1"}

    status, answer = _request(
        world, staff_routes, "PUT", f"/users/{user_id}/password", body, token=staff_token
    )

    assert (status, answer["code"], answer["fields"]) == (400, "INSECURE_PASSWORD_ERROR", ["newPassword"])


def test_a_recovery_reset_refuses_a_listed_password_and_keeps_the_link_usable(world: FakeWorld) -> None:
    _register(world)
    token = _recovery_token(world)

    refused = _reset_error(world, token, "qwertyuiop")
    reset = recovery.reset_password(
        world.deps, _reset_body(token, "battery staple"), source_ip="203.0.113.9", now=world.clock.now()
    )

    assert (refused.code, refused.extra["fields"]) == (ErrorCode.INSECURE_PASSWORD_ERROR, ["newPassword"])
    assert reset.token  # the same link, with a password nobody knows


@pytest.fixture
def pwned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Have I Been Pwned, answering that REUSED was seen 3 times; the prefixes it was asked for."""
    asked: list[str] = []
    digest = hashlib.sha1(REUSED.encode(), usedforsecurity=False).hexdigest().upper()

    def transport(prefix: str, _timeout: float) -> bytes:
        asked.append(prefix)
        return f"{digest[5:]}:3\r\n{'0' * 35}:0".encode()

    monkeypatch.setattr(password_policy, "range_client", lambda: PwnedRange(transport=transport))
    return asked


def test_the_range_api_is_asked_only_where_the_deployment_turns_it_on(pwned: list[str]) -> None:
    off, on = fake_world(), fake_world(dataclasses.replace(SETTINGS, pwned_passwords_range=True))
    body = {"username": "alice", "email": "alice@example.com", "password": REUSED}

    accepted, _ = _request(off, auth_routes, "POST", "/register", body)
    refused, answer = _request(on, auth_routes, "POST", "/register", body)

    assert (accepted, refused, answer["code"]) == (201, 400, "INSECURE_PASSWORD_ERROR")
    assert pwned == [hashlib.sha1(REUSED.encode(), usedforsecurity=False).hexdigest().upper()[:5]]


def test_a_login_with_a_listed_password_signs_in_and_says_so(world: FakeWorld) -> None:
    _register(world)
    user = next(iter(world.db.users.values()))
    # An account imported from upstream: its bcrypt hash, as upstream made it.
    world.db.users[user.id] = user.changed(password_hash=bcrypt_hash("iloveyou", cost=4))

    listed = _request(world, auth_routes, "POST", "/login", {"username": "alice", "password": "iloveyou"})
    world.db.users[user.id] = user
    unlisted = _request(world, auth_routes, "POST", "/login", {"username": "alice", "password": PASSWORD})

    assert (listed[0], listed[1].get("passwordCompromised")) == (201, True)
    assert (unlisted[0], "passwordCompromised" in unlisted[1]) == (201, False)


# --- helpers ---------------------------------------------------------------------------------------


def _register(world: FakeWorld) -> str:
    body = {"username": "alice", "email": "alice@example.com", "password": PASSWORD}
    status, answer = _request(world, auth_routes, "POST", "/register", body)
    assert status == 201, answer
    return str(answer["token"])


def _login_status(world: FakeWorld, password: str) -> int:
    status, _ = _request(world, auth_routes, "POST", "/login", {"username": "alice", "password": password})
    return status


def _recovery_token(world: FakeWorld) -> str:
    return recovery_token(world)


def _reset_body(token: str, password: str) -> ResetPasswordBody:
    return ResetPasswordBody.model_validate(
        {"token": token, "newPassword": password, "confirmNewPassword": password}
    )


def _reset_error(world: FakeWorld, token: str, password: str) -> NimbusError:
    with pytest.raises(NimbusError) as raised:
        recovery.reset_password(
            world.deps, _reset_body(token, password), source_ip="203.0.113.9", now=world.clock.now()
        )
    return raised.value


def test_a_login_with_a_listed_password_queues_the_notice_to_change_it_with_the_session(
    world: FakeWorld,
) -> None:
    _register(world)
    user = next(iter(world.db.users.values()))
    world.db.users[user.id] = user.changed(password_hash=passwords.hash_password("iloveyou"))
    commits = world.db.calls.count("commit")

    status, _ = _request(world, auth_routes, "POST", "/login", {"username": "alice", "password": "iloveyou"})

    assert status == 201
    assert world.db.calls.count("commit") == commits + 1  # the notice rides the session's transaction
    [email] = [e for k, e in world.db.outbox if k == "notice-password-compromised"]
    assert email.subject == "Your password appears in breached-password lists"
    assert "Choose a new password now" in email.text
    assert "iloveyou" not in email.text  # never the password itself


def test_the_mail_function_sends_one_compromised_password_notice_a_week(world: FakeWorld) -> None:
    t0 = world.clock.now()
    service, mailer = _mail(FakeLedger())

    def notice(at: float) -> OutboxMessage:
        email = Email(to="alice@example.com", subject="s", text="t", html="h")
        return OutboxMessage(
            new_id(), "notice-password-compromised", email, iso(at), int(at) + 86400, user_id="u-1"
        )

    sent = [service.deliver(notice(t0 + day * 86400), until=90.0).sent for day in (0, 1, 6, 7)]

    assert sent == [True, False, False, True]
    assert mailer.calls == 2
