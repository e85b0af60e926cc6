"""New sign-in notices on the fakes (CONTRACT section 17): a sign-in that presents no known device
of its account mails the owner, in the sign-in's own transaction and with no round trip of its own;
the mail function sends at most one an hour per account, however many sign-ins race."""

from __future__ import annotations

import base64
import re
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from auth_api import recovery
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody, ResetPasswordBody
from mail_api.service import MailService, RetryPolicy
from nimbus_core.adapters.outbox import OutboxMessage
from nimbus_core.domain.activity import Attempt, EventType
from nimbus_core.domain.errors import ChallengeRequiredError
from nimbus_core.domain.models import Email, SecondFactor
from nimbus_core.http.steps.challenge import store_challenge
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from tests import totp_reference
from tests.fakes import FakeWorld
from tests.recovery_requests import ask_for_recovery
from tests.unit.test_mail_service import FakeDeadLetters, FakeLedger, FakeMailer

PASSWORD = "correct horse"
IP = "203.0.113.9"
DEVICE = "Firefox 133 on Windows"
NOTICE = "notice-new-sign-in"
HOUR = 3600
# Any link that would carry a secret: a query string or a long opaque path segment.
TOKEN_IN_LINK = re.compile(r"https?://\S*(\?|[A-Za-z0-9_-]{30,})")

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _register(world: FakeWorld, name: str = "alice") -> str | None:
    """A new account (its first session's device token)."""
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="laptop", now=world.clock.now()).device


def _login(
    world: FakeWorld, name: str = "alice", *, device: str | None = None, answer: dict[str, Any] | None = None
) -> str | None:
    """A password login from ``IP`` on ``DEVICE`` (or the answer to its challenge): the new device
    token."""
    body = LoginBody.model_validate({"username": name, "password": PASSWORD, "device": device, "2fa": answer})
    issued = auth.login(
        world.deps, body, session_name=DEVICE, now=world.clock.now(), attempt=Attempt(IP, DEVICE)
    )
    return issued.device


def _notices(world: FakeWorld) -> list[Email]:
    return [email for kind, email in world.db.outbox if kind == NOTICE]


@pytest.fixture
def aged(world: FakeWorld) -> FakeWorld:
    """A world with alice registered over an hour ago (her first hour mails no notice)."""
    _register(world)
    world.clock.advance(HOUR + 1)
    return world


def test_a_password_login_without_a_device_token_mails_when_where_how_and_the_sessions_page(
    aged: FakeWorld,
) -> None:
    _login(aged)
    (notice,) = _notices(aged)
    assert notice.to == "alice@example.com"
    assert notice.subject == "New sign-in to your account"
    for text in (notice.text, notice.html):
        assert aged.clock.iso() in text
        assert IP in text
        assert DEVICE in text
        assert "your password" in text
        assert aged.deps.settings.sessions_url in text
    # The link only shows a page: nothing in the notice can act on the account.
    assert not TOKEN_IN_LINK.search(notice.text)


def test_the_notice_carries_the_sign_ins_activity_event_and_adds_no_write_or_round_trip(
    world: FakeWorld,
) -> None:
    _register(world)
    before, items = world.round_trips(), len(world.db.outbox_events)
    _login(world)  # within the first hour: no notice
    quiet = world.round_trips() - before
    assert _notices(world) == []
    world.clock.advance(HOUR + 1)
    before = world.round_trips()
    _login(world)
    assert world.round_trips() - before == quiet
    assert len(_notices(world)) == 1
    sign_ins = [e for e in world.db.outbox_events[items:] if e.type == EventType.SIGN_IN]
    assert [(e.method, e.ip, e.device) for e in sign_ins] == [("password", IP, DEVICE)] * 2


def test_a_login_with_the_device_token_an_earlier_sign_in_answered_mails_nothing(aged: FakeWorld) -> None:
    device = _login(aged)
    aged.clock.advance(2 * HOUR)
    again = _login(aged, device=device)
    _login(aged, device=again)
    assert len(_notices(aged)) == 1


def test_another_accounts_or_a_revoked_device_token_counts_as_none(aged: FakeWorld) -> None:
    bobs = _register(aged, "bob")
    _login(aged, device=bobs)
    assert len(_notices(aged)) == 1
    alices = _login(aged)
    user = aged.deps.users.find_by_username("alice")
    assert user is not None
    # Signing out everywhere (a new session generation) revokes every device with the sessions.
    aged.db.users[user.id] = user.changed(session_generation=user.session_generation + 1)
    _login(aged, device=alices)
    assert len(_notices(aged)) == 3


def test_the_sign_ins_of_the_first_hour_after_registration_mail_none(world: FakeWorld) -> None:
    _register(world)
    _login(world)
    world.clock.advance(HOUR - 1)
    _login(world)
    assert _notices(world) == []
    world.clock.advance(1)
    _login(world)
    assert len(_notices(world)) == 1


def test_the_sign_in_a_recovery_reset_opens_mails_only_the_password_changed_notice(aged: FakeWorld) -> None:
    ask_for_recovery(aged.deps, "alice", aged.clock.now())
    (link,) = [email.text for kind, email in aged.db.outbox if kind == "recover-password"]
    found = re.search(r"recover\?token=([A-Za-z0-9_.-]+)", link)
    assert found is not None
    new = "a brand new password"
    body = ResetPasswordBody.model_validate(
        {"token": found.group(1), "newPassword": new, "confirmNewPassword": new}
    )
    recovery.reset_password(aged.deps, body, source_ip=IP, now=aged.clock.now(), session_name="laptop")
    assert _notices(aged) == []
    assert [kind for kind, _ in aged.db.outbox if kind.startswith("notice-")] == ["notice-password-changed"]


def test_a_login_answered_with_an_authenticator_code_names_that_method(aged: FakeWorld) -> None:
    secret = base64.b32encode(secrets.token_bytes(10)).decode()  # 16 characters: 80 bits, as upstream's
    user = aged.deps.users.find_by_username("alice")
    assert user is not None
    stamp = aged.clock.iso()
    factor = SecondFactor(
        id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret=secret
    )
    aged.db.users[user.id] = user.changed(second_factors={factor.id: factor})
    with pytest.raises(ChallengeRequiredError) as raised:
        _login(aged)
    store_challenge(aged.deps, raised.value)  # as the guard does when it answers the 401
    assert _notices(aged) == []  # a password alone signs nobody in here
    answer = {
        "token": raised.value.extra["token"],
        "type": "totp",
        "code": totp_reference.totp(secret, aged.clock.now()),
    }
    _login(aged, answer=answer)
    (notice,) = _notices(aged)
    assert "your password and a code from your authenticator app" in notice.text


# --- the hourly bound, kept by the mail function --------------------------------------------------


def _message(user_id: str, at: float) -> OutboxMessage:
    email = Email(to="alice@example.com", subject="New sign-in to your account", text="t", html="h")
    return OutboxMessage(new_id(), NOTICE, email, iso(at), int(at) + 7 * 86400, user_id=user_id)


def _mail(ledger: FakeLedger) -> tuple[MailService, FakeMailer]:
    mailer = FakeMailer([])
    service = MailService(
        mailer, FakeDeadLetters(), ledger, policy=RetryPolicy(), sleep=lambda _s: None, now=lambda: 0
    )
    return service, mailer


def test_concurrent_deliveries_of_one_accounts_notices_send_one_an_hour(world: FakeWorld) -> None:
    t0 = world.clock.now()
    burst = [_message("u-1", t0 + n) for n in range(20)]  # twenty sign-ins in twenty seconds
    service, mailer = _mail(FakeLedger())
    start = threading.Barrier(len(burst))

    def deliver(message: OutboxMessage) -> bool:
        start.wait()
        return service.deliver(message, until=90.0).sent

    with ThreadPoolExecutor(max_workers=len(burst)) as pool:
        sent = list(pool.map(deliver, burst))
    assert sent.count(True) == 1
    assert mailer.calls == 1
    # Another account is told of its own sign-in meanwhile.
    assert service.deliver(_message("u-2", t0 + 30), until=90.0).sent


def test_a_notice_an_hour_after_the_last_one_sent_goes_and_one_within_it_never_does(world: FakeWorld) -> None:
    t0 = world.clock.now()
    service, _ = _mail(FakeLedger())
    first = _message("u-1", t0)
    assert service.deliver(first, until=90.0).sent
    assert service.deliver(_message("u-1", t0 + HOUR - 1), until=90.0).skipped == "bounded"
    # The same record delivered again is the notice already sent: skipped as settled, not bounded.
    assert service.deliver(first, until=90.0).skipped == "settled"
    assert service.deliver(_message("u-1", t0 + HOUR), until=90.0).sent


def test_an_account_whose_creation_time_is_unreadable_still_signs_in_and_is_told(world: FakeWorld) -> None:
    _register(world)
    user = world.deps.users.find_by_username("alice")
    assert user is not None
    world.db.users[user.id] = user.changed(created_at="15/01/2027")
    assert _login(world) is not None
    assert len(_notices(world)) == 1
