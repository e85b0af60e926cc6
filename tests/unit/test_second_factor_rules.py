"""Second-factor rules on the fakes, in milliseconds: the challenge's bindings, attempts and
replay guards, enrolment and removal, and the round trips each costs."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import pyotp
import pytest

from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from factors_api import service as factors
from nimbus_core.accounts import notices
from nimbus_core.domain.errors import ChallengeRequiredError, ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.pending_answer import PendingAnswer
from nimbus_core.factors import answers, otp
from nimbus_core.factors.reverify import reverify
from nimbus_core.http.steps.challenge import store_challenge
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.tokens import parse_session_token
from tests import totp_reference
from tests.fakes import FakeWorld

PASSWORD = "correct horse"
RENAME = "PUT /users/me/username"


# argon2id at its smallest parameters (tests/unit/conftest.py): the rules are the same, the tests fast.
pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _caller(world: FakeWorld, token: str, challenge_token: str | None = None) -> Caller:
    """Authenticate as the guard does (reading the answered challenge with the session)."""
    parsed = parse_session_token(token)
    assert parsed is not None
    answered = answers.answered_hash({"token": challenge_token}) if challenge_token else None
    caller = authenticate(world.deps, parsed, world.clock.now(), challenge_hash=answered)
    assert caller is not None
    return caller


@dataclass(frozen=True)
class Enrolled:
    """A user with a TOTP factor: its name, session token, backup codes and TOTP seed."""

    name: str
    token: str
    codes: list[str]
    secret: str

    def code(self, at: float) -> str:
        """The TOTP code at ``at``."""
        return str(pyotp.TOTP(self.secret).at(at))


def _enrolled(world: FakeWorld) -> Enrolled:
    """A user with a TOTP factor enrolled through the service."""
    name = f"u{new_id()[-8:].lower()}"
    body = RegisterBody.model_validate(
        {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
    )
    token = auth.register(world.deps, body, session_name="first", now=world.clock.now()).token
    setup = factors.start_totp(world.deps, _caller(world, token), world.clock.now())
    code = pyotp.TOTP(setup["secret"]).at(world.clock.now())
    _, codes = factors.confirm_totp(
        world.deps,
        _caller(world, token),
        token=setup["token"],
        name="Phone",
        code=code,
        now=world.clock.now(),
        actor=notices.STAFF,
    )
    assert codes is not None
    world.db.calls.clear()
    return Enrolled(name, token, codes, setup["secret"])


def _error(action: object) -> NimbusError:
    with pytest.raises(NimbusError) as raised:
        action()  # type: ignore[operator]
    return raised.value


def _challenge(world: FakeWorld, token: str, endpoint: str = RENAME) -> ChallengeRequiredError:
    with pytest.raises(ChallengeRequiredError) as raised:
        reverify(
            world.deps, _caller(world, token), {"password": PASSWORD}, world.clock.now(), endpoint=endpoint
        )
    store_challenge(world.deps, raised.value)  # as the guard does when it answers the 401
    return raised.value


def _answer(
    world: FakeWorld,
    token: str,
    challenge_token: str,
    code: str,
    *,
    kind: str = "totp",
    endpoint: str = RENAME,
) -> None:
    body = {"2fa": {"token": challenge_token, "type": kind, "code": code}}
    caller = _caller(world, token, challenge_token)
    answer_ops = reverify(world.deps, caller, body, world.clock.now(), endpoint=endpoint)
    # What the guard does with an answer: the change's first transaction carries it.
    user = caller.user
    PendingAnswer(answer_ops).commit(
        world.deps.tx, world.deps.users.change_ops(user, user.changed(username=f"r{new_id()[-8:].lower()}"))
    )


def test_a_challenge_names_the_enrolled_kinds_and_is_stored_only_hashed(world: FakeWorld) -> None:
    token = _enrolled(world).token

    challenge = _challenge(world, token)

    body = challenge.body()
    assert body["types"] == ["totp", "backup"]
    assert body["exp"] == int(world.clock.now()) + 300
    secret = body["token"].split(".")[1]
    assert secret not in str(world.db.challenges)


def test_the_answer_is_read_with_the_session_and_recorded_with_the_change(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    token = enrolled.token
    challenge = _challenge(world, token).body()["token"]
    world.clock.advance(30)
    calls = len(world.db.calls)

    _answer(world, token, challenge, enrolled.code(world.clock.now()))

    assert world.db.calls[calls:] == ["sessions.get_with_challenge", "commit"]


def test_a_challenge_does_not_travel_to_another_endpoint_or_user(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    token, stranger = enrolled.token, _enrolled(world).token
    challenge = _challenge(world, token).body()["token"]
    code = enrolled.code(world.clock.now() + 30)
    world.clock.advance(30)

    elsewhere = _error(lambda: _answer(world, token, challenge, code, endpoint="DELETE /users/me"))
    foreign = _error(lambda: _answer(world, stranger, challenge, code))

    assert elsewhere.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert foreign.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR


def _login_challenge(world: FakeWorld, name: str) -> str:
    with pytest.raises(ChallengeRequiredError) as raised:
        auth.login(
            world.deps,
            LoginBody.model_validate({"username": name, "password": PASSWORD}),
            session_name="x",
            now=world.clock.now(),
        )
    store_challenge(world.deps, raised.value)  # as the guard does when it answers the 401
    return str(raised.value.body()["token"])


def _login_answer(world: FakeWorld, challenge: str, code: str) -> NimbusError:
    body = LoginBody.model_validate({"2fa": {"token": challenge, "type": "totp", "code": code}})
    return _error(lambda: auth.login(world.deps, body, session_name="x", now=world.clock.now()))


def test_wrong_login_answers_die_at_five_and_lock_the_account_after_ten(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    right = enrolled.code(world.clock.now())
    wrong = totp_reference.wrong_code(enrolled.secret, world.clock.now())
    outcomes = []
    for _ in range(2):
        challenge = _login_challenge(world, enrolled.name)
        outcomes += [_login_answer(world, challenge, wrong).code.name for _ in range(5)]
        dead = _login_answer(world, challenge, right)  # the 5th wrong answer killed it
        assert dead.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR

    assert outcomes == ["INVALID_SECOND_FACTOR_RESPONSE_ERROR"] * 10
    with pytest.raises(RateLimitedError) as locked:
        _login_challenge(world, enrolled.name)  # even the right password: the login is locked
    assert locked.value.account_lock
    # The login lock holds logins only: the signed-in owner still reverifies (CONTRACT section 8).
    assert isinstance(_challenge(world, enrolled.token), ChallengeRequiredError)


def test_wrong_reverification_answers_limit_the_session_at_five_not_the_account(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    token = enrolled.token
    right = enrolled.code(world.clock.now())
    wrong = totp_reference.wrong_code(enrolled.secret, world.clock.now())
    challenge = _challenge(world, token).body()["token"]

    outcomes = [_error(lambda: _answer(world, token, challenge, wrong)).code.name for _ in range(5)]
    limited = _error(lambda: _answer(world, token, challenge, right))

    assert outcomes == ["INVALID_SECOND_FACTOR_RESPONSE_ERROR"] * 5
    assert isinstance(limited, RateLimitedError)
    assert _caller(world, token).user.auth_failures == 0


def test_a_backup_code_is_single_use(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    token, codes = enrolled.token, enrolled.codes

    _answer(world, token, _challenge(world, token).body()["token"], codes[3], kind="backup")
    again = _error(
        lambda: _answer(world, token, _challenge(world, token).body()["token"], codes[3], kind="backup")
    )

    assert again.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert _caller(world, token).user.two_factor_backup_code_used_at is not None


def test_login_answers_with_the_session_in_one_transaction(world: FakeWorld) -> None:
    enrolled = _enrolled(world)
    name = enrolled.name
    first = _error(
        lambda: auth.login(
            world.deps,
            LoginBody.model_validate({"username": name, "password": PASSWORD}),
            session_name="x",
            now=world.clock.now(),
        )
    )
    assert isinstance(first, ChallengeRequiredError)
    store_challenge(world.deps, first)  # as the guard does when it answers the 401
    world.clock.advance(30)
    answer = {
        "token": first.body()["token"],
        "type": "totp",
        "code": enrolled.code(world.clock.now()),
    }
    calls = len(world.db.calls)

    issued = auth.login(
        world.deps, LoginBody.model_validate({"2fa": answer}), session_name="x", now=world.clock.now()
    )

    assert first.code is ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR
    assert world.db.calls[calls:] == ["tokens.read_with_user", "commit"]
    assert _caller(world, issued.token).user.username == name


def test_removing_the_last_factor_ends_the_challenges(world: FakeWorld) -> None:
    token = _enrolled(world).token
    user = _caller(world, token).user

    assert (
        factors.remove_factors(
            world.deps, user, [*user.second_factors, new_id()], actor=notices.STAFF, now=world.clock.now()
        )
        == 1
    )

    after = _caller(world, token).user
    assert (after.second_factors, after.backup_codes) == ({}, {})
    reverify(world.deps, _caller(world, token), {"password": PASSWORD}, world.clock.now(), endpoint=RENAME)


def test_a_challenge_is_stored_with_the_limits_give_back_in_one_transaction(world: FakeWorld) -> None:
    token = _enrolled(world).token
    counters = world.deps.counters
    state = counters.hit("login#ip#192.0.2.1", limit=4, window=300, now=world.clock.now())
    with pytest.raises(ChallengeRequiredError) as raised:
        reverify(
            world.deps, _caller(world, token), {"password": PASSWORD}, world.clock.now(), endpoint=RENAME
        )
    calls = len(world.db.calls)

    store_challenge(
        world.deps, raised.value, give_back=counters.release_op("login#ip#192.0.2.1", reset_at=state.reset_at)
    )

    assert world.db.calls[calls:] == ["commit"]
    assert world.db.counters["login#ip#192.0.2.1"][0] == 0
    assert len(world.db.challenges) == 1


def test_a_challenge_is_stored_alone_when_the_limits_window_moved_on(world: FakeWorld) -> None:
    token = _enrolled(world).token
    counters = world.deps.counters
    state = counters.hit("login#ip#192.0.2.2", limit=4, window=300, now=world.clock.now())
    with pytest.raises(ChallengeRequiredError) as raised:
        reverify(
            world.deps, _caller(world, token), {"password": PASSWORD}, world.clock.now(), endpoint=RENAME
        )
    world.db.counters["login#ip#192.0.2.2"] = (1, state.reset_at + 300)  # a new window began meanwhile

    store_challenge(
        world.deps, raised.value, give_back=counters.release_op("login#ip#192.0.2.2", reset_at=state.reset_at)
    )

    assert world.db.counters["login#ip#192.0.2.2"] == (1, state.reset_at + 300)  # nothing given back there
    assert len(world.db.challenges) == 1


# --- backup codes imported from upstream (CONTRACT section 15) ---------------------------------


def _with_upstream_codes(world: FakeWorld, token: str) -> list[str]:
    """Replace the user's codes by a set as upstream stored them: SHA-512 hex digests of 20-hex codes."""
    codes = [secrets.token_hex(10) for _ in range(10)]
    keys = [otp.legacy_backup_code_key(hashlib.sha512(c.encode()).hexdigest()) for c in codes]
    world.deps.tx.commit([world.deps.users.set_backup_codes_op(_caller(world, token).user, keys)])
    return codes


def _backup(world: FakeWorld, token: str, code: str) -> None:
    _answer(world, token, _challenge(world, token).body()["token"], code, kind="backup")


def test_an_upstream_backup_code_answers_once_whatever_its_case_or_grouping(world: FakeWorld) -> None:
    token = _enrolled(world).token
    codes = _with_upstream_codes(world, token)

    _backup(world, token, f"{codes[0][:10].upper()}-{codes[0][10:].upper()}")
    again = _error(lambda: _backup(world, token, codes[0]))
    _backup(world, token, codes[1])

    assert again.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert len(_caller(world, token).user.backup_codes) == 8


def test_a_stored_digest_or_an_unknown_hex_code_is_no_answer(world: FakeWorld) -> None:
    token = _enrolled(world).token
    codes = _with_upstream_codes(world, token)
    digest = hashlib.sha512(codes[0].encode()).hexdigest()

    for typed in (digest, otp.legacy_backup_code_key(digest), secrets.token_hex(10), codes[0][:19]):
        refused = _error(lambda t=typed: _backup(world, token, t))
        assert refused.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR

    assert len(_caller(world, token).user.backup_codes) == 10


def test_a_new_set_of_codes_ends_the_upstream_ones(world: FakeWorld) -> None:
    token = _enrolled(world).token
    old = _with_upstream_codes(world, token)

    new = factors.regenerate_backup_codes(
        world.deps, _caller(world, token), actor=notices.STAFF, now=world.clock.now()
    )

    assert (
        _error(lambda: _backup(world, token, old[0])).code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    )
    _backup(world, token, new[0])
