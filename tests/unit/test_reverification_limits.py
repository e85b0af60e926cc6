"""Reverification from a signed-in session and the login lock (CONTRACT section 8), on the fakes.

The login lock holds logins only: a signed-in owner (or staff member) whose account someone locked
by guessing at login still reverifies with the right password and second factor. Wrong passwords
and second-factor answers from a session are limited per session instead (5 per 15 minutes, then
429 with Retry-After only), and never feed the login lock.
"""

from __future__ import annotations

import threading

import pyotp
import pytest

from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.errors import ChallengeRequiredError, ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.factors import answers, otp
from nimbus_core.factors.reverify import reverify
from nimbus_core.http.steps.challenge import store_challenge
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.tokens import parse_session_token
from tests import totp_reference
from tests.fakes import FakeWorld

PASSWORD = "correct horse"
CHANGE = "PUT /users/me/password"
WINDOW = 15 * 60

# argon2id at its smallest parameters (tests/unit/conftest.py): the rules are the same, the tests fast.
pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _register(world: FakeWorld, name: str = "alice") -> str:
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="laptop", now=world.clock.now()).token


def _login(world: FakeWorld, password: str = PASSWORD, name: str = "alice") -> str:
    body = LoginBody.model_validate({"username": name, "password": password})
    return auth.login(world.deps, body, session_name="phone", now=world.clock.now()).token


def _user(world: FakeWorld, name: str = "alice") -> User:
    user = world.deps.users.find_by_username(name)
    assert user is not None
    return user


def _caller(world: FakeWorld, token: str, challenge_token: str | None = None) -> Caller:
    """Authenticate as the guard does (reading an answered challenge with the session)."""
    parsed = parse_session_token(token)
    assert parsed is not None
    answered = answers.answered_hash({"token": challenge_token}) if challenge_token else None
    caller = authenticate(world.deps, parsed, world.clock.now(), challenge_hash=answered)
    assert caller is not None
    return caller


def _lock_by_guessing_at_login(world: FakeWorld, name: str = "alice") -> None:
    for n in range(10):
        with pytest.raises(NimbusError) as wrong:
            _login(world, f"a guess {n}", name)
        assert wrong.value.code is ErrorCode.INVALID_PASSWORD_ERROR
    with pytest.raises(RateLimitedError):
        _login(world, PASSWORD, name)  # locked: even the right password is refused at login
    assert _user(world, name).auth_failures == 10


def _with_totp(world: FakeWorld, name: str = "alice") -> str:
    """Give ``name`` a TOTP factor directly in the store; its seed."""
    user = _user(world, name)
    stamp = world.clock.iso()
    secret = otp.new_totp_secret()
    factor = SecondFactor(
        id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret=secret
    )
    world.db.users[user.id] = user.changed(second_factors={factor.id: factor})
    return secret


def _reverify(world: FakeWorld, token: str, body: dict[str, object]) -> object:
    """What reverification answers: its answer ops, or the error it raised."""
    challenge = body.get("2fa")
    challenge_token = challenge.get("token") if isinstance(challenge, dict) else None
    caller = _caller(world, token, challenge_token if isinstance(challenge_token, str) else None)
    try:
        return reverify(world.deps, caller, body, world.clock.now(), endpoint=CHANGE)
    except NimbusError as refused:
        return refused


def _wrong_code(secret: str, at: float) -> str:
    return totp_reference.wrong_code(secret, at)


def test_a_locked_account_still_reverifies_with_the_right_password(world: FakeWorld) -> None:
    token = _register(world)
    _lock_by_guessing_at_login(world)

    assert _reverify(world, token, {"password": PASSWORD}) == []
    assert _user(world).auth_failures == 10  # reverifying neither clears nor feeds the login lock


def test_a_locked_account_with_a_factor_reverifies_with_the_password_then_the_code(world: FakeWorld) -> None:
    token = _register(world)
    secret = _with_totp(world)
    _lock_by_guessing_at_login(world)

    required = _reverify(world, token, {"password": PASSWORD})
    assert isinstance(required, ChallengeRequiredError)
    store_challenge(world.deps, required)  # as the guard does when it answers the 401
    world.clock.advance(30)
    answer = {
        "token": required.extra["token"],
        "type": "totp",
        "code": pyotp.TOTP(secret).at(world.clock.now()),
    }
    ops = _reverify(world, token, {"2fa": answer})

    assert isinstance(ops, list)
    assert ops  # the answer's writes, for the change to carry


def test_five_wrong_passwords_limit_the_session_and_not_the_account(world: FakeWorld) -> None:
    token = _register(world)
    other = _login(world)

    outcomes = [_reverify(world, token, {"password": f"wrong {n}"}) for n in range(5)]
    sixth = _reverify(world, token, {"password": PASSWORD})  # even the right one

    assert [getattr(o, "code", None) for o in outcomes] == [ErrorCode.INVALID_PASSWORD_ERROR] * 5
    assert isinstance(sixth, RateLimitedError)
    assert (sixth.status, sixth.retry_after) == (429, WINDOW)
    assert sixth.account_lock  # its own Retry-After, never the endpoint window's RateLimit-* headers
    assert _user(world).auth_failures == 0  # the login lock is not fed
    assert _reverify(world, other, {"password": PASSWORD}) == []  # another session is not limited
    assert _login(world)  # nor is login


def test_the_session_limit_ends_with_its_window(world: FakeWorld) -> None:
    token = _register(world)
    for n in range(5):
        _reverify(world, token, {"password": f"wrong {n}"})

    world.clock.advance(WINDOW - 1)
    still = _reverify(world, token, {"password": PASSWORD})
    world.clock.advance(1)

    assert isinstance(still, RateLimitedError)
    assert still.retry_after == 1
    assert _reverify(world, token, {"password": PASSWORD}) == []


def test_wrong_second_factor_answers_count_on_the_session_and_not_the_account(world: FakeWorld) -> None:
    token = _register(world)
    secret = _with_totp(world)
    outcomes = []
    for _ in range(5):
        required = _reverify(world, token, {"password": PASSWORD})
        assert isinstance(required, ChallengeRequiredError)
        store_challenge(world.deps, required)
        wrong = {
            "token": required.extra["token"],
            "type": "totp",
            "code": _wrong_code(secret, world.clock.now()),
        }
        outcomes.append(_reverify(world, token, {"2fa": wrong}))

    sixth = _reverify(world, token, {"password": PASSWORD})

    assert [getattr(o, "code", None) for o in outcomes] == [
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    ] * 5
    assert isinstance(sixth, RateLimitedError)
    assert _user(world).auth_failures == 0


def test_concurrent_wrong_passwords_from_one_session_give_exactly_five_401_and_the_rest_429(
    world: FakeWorld,
) -> None:
    token = _register(world)
    # Every request authenticated before any counts: all of them see a session with no failures.
    callers = [_caller(world, token) for _ in range(10)]
    outcomes: list[str] = []
    start = threading.Barrier(len(callers))

    def attempt(caller: Caller) -> None:
        start.wait()
        try:
            reverify(world.deps, caller, {"password": "a wrong one"}, world.clock.now(), endpoint=CHANGE)
        except NimbusError as refused:
            outcomes.append(str(refused.status))

    threads = [threading.Thread(target=attempt, args=(caller,)) for caller in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["401"] * 5 + ["429"] * 5
    assert _user(world).auth_failures == 0


def test_revoking_every_other_session_keeps_the_failures_counted_on_the_callers_since_its_read(
    world: FakeWorld,
) -> None:
    from sessions_api import service as sessions

    token = _register(world)
    caller = _caller(world, token)  # the read "revoke all but mine" works from
    for _ in range(4):  # wrong reverifications counted on the session meanwhile
        with pytest.raises(NimbusError):
            reverify(
                world.deps, _caller(world, token), {"password": "wrong"}, world.clock.now(), endpoint=CHANGE
            )

    sessions.revoke_all_sessions(
        world.deps,
        sessions.Owner.me(caller, Actor.user("203.0.113.9", caller.session)),
        keep_current=True,
        now=world.clock.now(),
    )
    with pytest.raises(NimbusError):
        reverify(world.deps, _caller(world, token), {"password": "wrong"}, world.clock.now(), endpoint=CHANGE)

    with pytest.raises(RateLimitedError):  # the 6th: the four before the revocation still count
        reverify(world.deps, _caller(world, token), {"password": "wrong"}, world.clock.now(), endpoint=CHANGE)
