"""Account recovery rules (CONTRACT section 14) on the fakes: the single-use token bound to its user,
address and password, the second-factor step, and the reset's one transaction. The request, the
same for every name, and its handling after the answer: test_recovery_requests.py."""

from __future__ import annotations

import re
import threading
from typing import Any

import pyotp
import pytest

from auth_api import recovery
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody, ResetPasswordBody
from nimbus_core.domain.errors import ChallengeRequiredError, ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.factors import otp
from nimbus_core.http.steps.challenge import store_challenge
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions import passwords
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.session_issuer import IssuedSession
from nimbus_core.sessions.tokens import parse_session_token
from tests import totp_reference
from tests.fakes import FakeWorld
from tests.recovery_requests import ask_for_recovery

PASSWORD = "correct horse"
NEW_PASSWORD = "a brand new password"
IP = "198.51.100.7"
BACKUP_CODE = otp.new_backup_codes()[0]
LINK = re.compile(r"recover\?token=([A-Za-z0-9_.-]+)")


# argon2id at its smallest parameters (tests/unit/conftest.py): the rules are the same, the tests fast.
pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


# --- helpers ---------------------------------------------------------------------------------------


def _register(world: FakeWorld, name: str = "alice") -> str:
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="laptop", now=world.clock.now()).token


def _user(world: FakeWorld, name: str = "alice") -> User:
    user = world.deps.users.find_by_username(name)
    assert user is not None
    return user


def _request(world: FakeWorld, name: str) -> None:
    ask_for_recovery(world.deps, name, world.clock.now())


def _mailed_tokens(world: FakeWorld, to: str) -> list[str]:
    return [
        found.group(1)
        for kind, email in world.db.outbox
        if kind == "recover-password" and email.to == to and (found := LINK.search(email.text))
    ]


def _token(world: FakeWorld, name: str = "alice") -> str:
    _request(world, name)
    return _mailed_tokens(world, f"{name}@example.com")[-1]


def _reset(world: FakeWorld, token: str, password: str = NEW_PASSWORD, answer: Any = None) -> Any:
    body = ResetPasswordBody.model_validate(
        {"token": token, "newPassword": password, "confirmNewPassword": password, "2fa": answer}
    )
    return recovery.reset_password(
        world.deps, body, source_ip=IP, now=world.clock.now(), session_name="laptop"
    )


def _error(action: Any) -> NimbusError:
    with pytest.raises(NimbusError) as raised:
        action()
    return raised.value


def _logs_in(world: FakeWorld, name: str, password: str) -> bool:
    body = LoginBody.model_validate({"username": name, "password": password})
    try:
        auth.login(world.deps, body, session_name="x", now=world.clock.now())
    except NimbusError:
        return False
    return True


def _with_totp(world: FakeWorld, name: str) -> str:
    """Give ``name`` a TOTP factor and backup codes directly in the store; the seed."""
    secret = pyotp.random_base32()
    user = _user(world, name)
    stamp = world.clock.iso()
    factor = SecondFactor(
        id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret=secret
    )
    code_hash = otp.backup_code_hash(BACKUP_CODE)
    assert code_hash is not None
    world.db.users[user.id] = user.changed(second_factors={factor.id: factor}, backup_codes={code_hash: True})
    return secret


def _challenged(world: FakeWorld, token: str) -> ChallengeRequiredError:
    with pytest.raises(ChallengeRequiredError) as raised:
        _reset(world, token)
    store_challenge(world.deps, raised.value)  # as the guard does when it answers the 401
    return raised.value


def _totp_answer(world: FakeWorld, challenge_token: str, secret: str) -> dict[str, str]:
    return {"token": challenge_token, "type": "totp", "code": pyotp.TOTP(secret).at(world.clock.now())}


# --- the reset ---------------------------------------------------------------------------------------


def test_a_reset_sets_the_password_revokes_every_session_clears_the_lock_verifies_and_notifies(
    world: FakeWorld,
) -> None:
    session = _register(world)
    user = _user(world)
    world.db.users[user.id] = user.changed(
        auth_failures=10, auth_failures_reset_at=int(world.clock.now()) + 900
    )
    token = _token(world)
    _reset(world, token)
    after = _user(world)
    assert after.verified_at is not None
    assert after.pending_verification is None
    assert after.auth_failures == 0
    assert after.pending_recovery is None
    parsed = parse_session_token(session)
    assert parsed is not None
    assert authenticate(world.deps, parsed, world.clock.now()) is None  # every session revoked
    assert _logs_in(world, "alice", NEW_PASSWORD)
    assert not _logs_in(world, "alice", PASSWORD)
    (notice,) = [email for kind, email in world.db.outbox if kind == "notice-password-changed"]
    assert notice.to == "alice@example.com"
    assert IP in notice.text
    assert "http" not in notice.text
    assert world.db.tokens == {}  # the pending verification link went with the verified address


def test_a_token_is_single_use_and_expires_after_thirty_minutes(world: FakeWorld) -> None:
    _register(world)
    token = _token(world)
    _reset(world, token)
    assert _error(lambda: _reset(world, token)).code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR
    late = _token(world)
    world.clock.advance(30 * 60)
    assert _error(lambda: _reset(world, late)).code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR


@pytest.mark.parametrize("change", ["password", "email", "Alice@Example.com", "alice@EXAMPLE.COM"])
def test_a_token_dies_with_a_password_or_address_changed_after_it_was_sent(
    world: FakeWorld, change: str
) -> None:
    # Any other string is another address: one that folds to the same claim may be another
    # mailbox (``ß`` and ``ss`` fold alike), so it is a change too.
    _register(world)
    token = _token(world)
    user = _user(world)
    changed = (
        user.changed(password_hash=passwords.hash_password("changed elsewhere"))
        if change == "password"
        else user.changed(email="new@example.com" if change == "email" else change)
    )
    world.db.users[user.id] = changed
    assert _error(lambda: _reset(world, token)).code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR


@pytest.mark.parametrize(
    "forge",
    [
        lambda token, other: f"{other}.{token.partition('.')[2]}",  # another user's id, this secret
        lambda token, other: f"{token.partition('.')[0]}.{'A' * 43}",  # this user, a guessed secret
        lambda token, other: token + "x",
        lambda token, other: "",
        lambda token, other: "é" * 5000,
    ],
)
def test_a_token_presented_for_another_account_or_forged_is_invalid(world: FakeWorld, forge: Any) -> None:
    _register(world)
    _register(world, "bob")
    token = _token(world)
    forged = forge(token, _user(world, "bob").id)
    assert _error(lambda: _reset(world, forged)).code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR
    _reset(world, token)  # the real one still works


def test_a_banned_user_is_refused_with_banned(world: FakeWorld) -> None:
    _register(world)
    token = _token(world)
    world.db.users[_user(world).id] = _user(world).changed(banned_at=world.clock.iso(), ban_reason="spam")
    assert _error(lambda: _reset(world, token)).code is ErrorCode.BANNED_ERROR


def test_parallel_resets_with_one_token_let_exactly_one_win(world: FakeWorld) -> None:
    _register(world)
    token = _token(world)
    outcomes: list[str] = []

    def attempt(n: int) -> None:
        try:
            _reset(world, token, password=f"{NEW_PASSWORD} {n}")
            outcomes.append("ok")
        except NimbusError as refused:
            outcomes.append(refused.code.name)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["INVALID_RECOVERY_TOKEN_ERROR"] * 7 + ["ok"]
    assert len([kind for kind, _ in world.db.outbox if kind == "notice-password-changed"]) == 1


# --- the second factor -------------------------------------------------------------------------------


def test_an_account_with_a_factor_is_challenged_and_a_wrong_answer_spends_nothing(world: FakeWorld) -> None:
    _register(world)
    secret = _with_totp(world, "alice")
    token = _token(world)
    required = _challenged(world, token)
    assert required.extra["types"] == ["totp", "backup"]
    wrong = {
        "token": required.extra["token"],
        "type": "totp",
        "code": totp_reference.wrong_code(secret, world.clock.now()),
    }
    assert _error(lambda: _reset(world, token, answer=wrong)).code is (
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    )
    assert _user(world).pending_recovery is not None  # the token survives a challenge and a wrong answer
    _reset(world, token, answer=_totp_answer(world, required.extra["token"], secret))
    assert _logs_in(world, "alice", NEW_PASSWORD) is False  # a factor: the login is challenged, not refused
    assert passwords.verify_password(_user(world).password_hash, NEW_PASSWORD)


def test_a_backup_code_answers_the_reset_challenge_once(world: FakeWorld) -> None:
    _register(world)
    _with_totp(world, "alice")
    token = _token(world)
    required = _challenged(world, token)
    backup = {"token": required.extra["token"], "type": "backup", "code": BACKUP_CODE}
    _reset(world, token, answer=backup)
    assert _user(world).backup_codes == {}


def test_a_challenge_is_answered_only_for_its_own_user_and_recovery_token(world: FakeWorld) -> None:
    _register(world)
    _register(world, "mallory")
    secret = _with_totp(world, "alice")
    mallory_secret = _with_totp(world, "mallory")
    token = _token(world)
    mallory_token = _token(world, "mallory")
    mallory_challenge = _challenged(world, mallory_token).extra["token"]
    # Mallory's own challenge, answered with her own code, does not open Alice's reset.
    stolen = _totp_answer(world, mallory_challenge, mallory_secret)
    assert _error(lambda: _reset(world, token, answer=stolen)).code is (
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    )
    # A challenge bound to one of Alice's recovery tokens does not serve a newer one.
    required = _challenged(world, token).extra["token"]
    newer = _token(world)
    answer = _totp_answer(world, required, secret)
    assert _error(lambda: _reset(world, newer, answer=answer)).code is (
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    )
    # Nor does a login challenge.
    with pytest.raises(ChallengeRequiredError) as login:
        auth.login(
            world.deps,
            LoginBody.model_validate({"username": "alice", "password": PASSWORD}),
            session_name="x",
            now=world.clock.now(),
        )
    store_challenge(world.deps, login.value)
    login_answer = _totp_answer(world, login.value.extra["token"], secret)
    assert _error(lambda: _reset(world, newer, answer=login_answer)).code is (
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    )


# --- the login lock never keeps the owner out (CONTRACT sections 8 and 14) --------------------------


def _lock_by_guessing_at_login(world: FakeWorld, name: str = "alice") -> None:
    for n in range(10):
        assert not _logs_in(world, name, f"a guess {n}")
    with pytest.raises(RateLimitedError):
        auth.login(
            world.deps,
            LoginBody.model_validate({"username": name, "password": PASSWORD}),
            session_name="x",
            now=world.clock.now(),
        )
    assert _user(world, name).auth_failures == 10


def _signed_in(world: FakeWorld, issued: Any) -> Caller:
    assert isinstance(issued, IssuedSession)
    parsed = parse_session_token(issued.token)
    assert parsed is not None
    caller = authenticate(world.deps, parsed, world.clock.now())
    assert caller is not None
    return caller


@pytest.mark.parametrize("kind", ["totp", "backup"])
def test_a_locked_owner_recovers_with_a_second_factor_and_is_signed_in_with_the_lock_cleared(
    world: FakeWorld, kind: str
) -> None:
    old_session = _register(world)
    secret = _with_totp(world, "alice")
    _lock_by_guessing_at_login(world)
    token = _token(world)
    required = _challenged(world, token)  # the lock refuses no part of a recovery
    world.clock.advance(30)
    answer = (
        _totp_answer(world, required.extra["token"], secret)
        if kind == "totp"
        else {"token": required.extra["token"], "type": "backup", "code": BACKUP_CODE}
    )

    issued = _reset(world, token, answer=answer)

    caller = _signed_in(world, issued)
    assert caller.user.id == _user(world).id
    assert caller.session.permission_flags is None  # a normal session
    assert caller.session.exp == int(world.clock.now()) + 24 * 3600
    assert caller.session.display_name == "laptop"
    assert issued.to_public() == {"token": issued.token, "exp": caller.session.exp, "device": issued.device}
    assert issued.device is not None  # the browser that reset is known from now on
    assert _user(world).auth_failures == 0
    parsed = parse_session_token(old_session)
    assert parsed is not None
    assert authenticate(world.deps, parsed, world.clock.now()) is None  # every other session revoked
    with pytest.raises(ChallengeRequiredError):  # login is open again at once: challenged
        auth.login(
            world.deps,
            LoginBody.model_validate({"username": "alice", "password": NEW_PASSWORD}),
            session_name="x",
            now=world.clock.now(),
        )


def test_a_locked_owner_without_a_factor_recovers_and_logs_in_at_once(world: FakeWorld) -> None:
    _register(world)
    _lock_by_guessing_at_login(world)

    issued = _reset(world, _token(world))

    assert _signed_in(world, issued).user.username == "alice"
    assert _logs_in(world, "alice", NEW_PASSWORD)


def test_wrong_answers_at_recovery_neither_meet_nor_feed_the_login_lock(world: FakeWorld) -> None:
    _register(world)
    secret = _with_totp(world, "alice")
    token = _token(world)
    required = _challenged(world, token)
    wrong = {
        **_totp_answer(world, required.extra["token"], secret),
        "code": totp_reference.wrong_code(secret, world.clock.now()),
    }
    for _ in range(3):
        refused = _error(lambda: _reset(world, token, answer=wrong))
        assert refused.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert _user(world).auth_failures == 0
    _lock_by_guessing_at_login(world)
    locked_wrong = _error(lambda: _reset(world, token, answer=wrong))
    assert locked_wrong.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR  # never 429


def test_a_recovery_token_is_void_after_ten_wrong_answers(world: FakeWorld) -> None:
    # Whoever holds the mailbox could otherwise ask for new challenges forever: the token bounds
    # the guesses (and the account gets at most 3 tokens a day).
    _register(world)
    secret = _with_totp(world, "alice")
    token = _token(world)
    for _ in range(2):
        required = _challenged(world, token)
        wrong = {
            **_totp_answer(world, required.extra["token"], secret),
            "code": totp_reference.wrong_code(secret, world.clock.now()),
        }
        for _ in range(5):
            refused = _error(lambda w=wrong: _reset(world, token, answer=w))
            assert refused.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR

    assert _error(lambda: _reset(world, token)).code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR
    assert _user(world).auth_failures == 0
    fresh = _token(world)  # a new link works again
    required = _challenged(world, fresh)
    world.clock.advance(30)
    _signed_in(world, _reset(world, fresh, answer=_totp_answer(world, required.extra["token"], secret)))
