"""The TOTP strategy's own check: a code is accepted only for a time step after the factor's last
used one. The stored write's condition refuses a replay too; these prove the strategy refuses it
before any write is built (a check that said ``>=`` would hand a replay to the database)."""

from __future__ import annotations

import pyotp
import pytest

from auth_api import service as auth
from auth_api.models import RegisterBody
from factors_api import service as factors
from nimbus_core.accounts import notices
from nimbus_core.domain.models import Challenge, User
from nimbus_core.factors.answers import Answer
from nimbus_core.factors.otp import TOTP_PERIOD
from nimbus_core.factors.totp import TOTP
from tests.fakes import FakeWorld
from tests.races import read

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")

CHALLENGE = Challenge(hash="h", user_id="u", endpoint="POST /login", created_at="2026-11-28T00:00:00Z", exp=0)


def _enrolled(world: FakeWorld) -> tuple[str, User]:
    """A user with an authenticator app confirmed at this step: the app's seed and the user."""
    body = RegisterBody.model_validate(
        {"username": "timer", "email": "timer@example.com", "password": "pw pw pw"}
    )
    token = auth.register(world.deps, body, session_name="first", now=world.clock.now()).token
    now = world.clock.now()
    app = factors.start_totp(world.deps, read(world, token), now)
    code = pyotp.TOTP(app["secret"]).at(now)
    factors.confirm_totp(
        world.deps,
        read(world, token),
        token=app["token"],
        name="Phone",
        code=code,
        now=now,
        actor=notices.STAFF,
    )
    return app["secret"], read(world, token).user


def _answer(user: User, code: str) -> Answer:
    return Answer(user_id=user.id, secret="s", type="totp", code=code, response=None)


def test_the_code_of_the_step_that_was_last_used_is_refused_by_the_strategy(world: FakeWorld) -> None:
    seed, user = _enrolled(world)
    now = world.clock.now()  # the step the enrolment used

    assert TOTP.verified(world.deps, user, _answer(user, pyotp.TOTP(seed).at(now)), CHALLENGE, now) is None


def test_the_code_of_a_later_step_moves_the_factors_last_step(world: FakeWorld) -> None:
    seed, user = _enrolled(world)
    later = world.clock.now() + TOTP_PERIOD

    writes = TOTP.verified(world.deps, user, _answer(user, pyotp.TOTP(seed).at(later)), CHALLENGE, later)

    assert writes is not None
    assert len(writes) == 1
