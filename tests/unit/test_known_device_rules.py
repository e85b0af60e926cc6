"""Known devices on the fakes (CONTRACT section 8): the limit on a device's wrong answers holds
under concurrency, and the login lock it lifts is its own account's alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from auth_api import service as auth
from auth_api.models import LoginBody
from nimbus_core.domain.errors import ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES, DEVICE_AUTH_FAILURES
from nimbus_core.sessions.tokens import hash_secret
from tests.fakes import FakeWorld
from tests.races import PASSWORD, register

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _login(world: FakeWorld, password: str, device: str | None, username: str = "alice") -> str:
    """The answer's code (or "ok")."""
    body = LoginBody.model_validate({"username": username, "password": password, "device": device})
    try:
        auth.login(world.deps, body, session_name="phone", now=world.clock.now())
    except RateLimitedError:
        return "429"
    except NimbusError as refused:
        return refused.code.name
    return "ok"


def test_concurrent_wrong_passwords_with_one_device_count_past_its_limit_on_the_account(
    world: FakeWorld,
) -> None:
    device = register(world).device
    assert device is not None
    attempts = DEVICE_AUTH_FAILURES.limit + 4

    with ThreadPoolExecutor(max_workers=attempts) as pool:
        answers = list(pool.map(lambda n: _login(world, f"guess {n}", device), range(attempts)))

    assert answers == [ErrorCode.INVALID_PASSWORD_ERROR.name] * attempts
    stored = world.db.devices[hash_secret(device)]
    assert stored.failures == DEVICE_AUTH_FAILURES.limit
    assert world.db.users[stored.user_id].auth_failures == attempts - DEVICE_AUTH_FAILURES.limit


def test_a_device_lifts_only_its_own_accounts_lock(world: FakeWorld) -> None:
    alices = register(world).device
    register(world, "bob")
    for n in range(ACCOUNT_AUTH_FAILURES.limit):
        assert _login(world, f"guess {n}", None, "bob") == ErrorCode.INVALID_PASSWORD_ERROR.name

    assert _login(world, PASSWORD, alices, "bob") == "429"
    assert _login(world, PASSWORD, alices, "alice") == "ok"
