"""A login's request walks the second-factor code once: it enters ``factors/challenges.py`` by one
call and leaves it, never bouncing back in from the modules it calls (a kind's strategy, WebAuthn).

Each request runs through the real function's app on the fakes, with a profile hook that records
every call into ``challenges.py`` made from a frame outside it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pyotp
import pytest

from auth_api import service as auth
from auth_api.models import RegisterBody
from auth_api.routes import routes as auth_routes
from factors_api import service as factors
from nimbus_core.accounts import notices
from nimbus_core.factors import challenges
from nimbus_core.http.app import create_app
from tests.fakes import SETTINGS, FakeWorld
from tests.passkey_authenticator import SoftwareAuthenticator
from tests.races import read

PASSWORD = "correct horse"
ORIGIN = SETTINGS.relying_party().origins[0]

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


def _entries_into_challenges[T](action: Callable[[], T]) -> tuple[T, list[str]]:
    """What ``action`` returns, and the functions of ``challenges.py`` it entered from outside it,
    in order (a call from inside the module, or a generator it drives, is no entry)."""
    module = challenges.__file__
    entered: list[str] = []

    def hook(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == module:
            caller = frame.f_back
            if caller is None or caller.f_code.co_filename != module:
                entered.append(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        result = action()
    finally:
        sys.setprofile(previous)
    return result, entered


class _Client:
    """The auth function's app on the fakes, called as API Gateway calls it."""

    def __init__(self, world: FakeWorld) -> None:
        self.app = create_app(auth_routes, deps=lambda: world.deps)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        event = {
            "version": "2.0",
            "rawPath": path,
            "rawQueryString": "",
            "headers": {"content-type": "application/json", "user-agent": "Mozilla/5.0"},
            "isBase64Encoded": False,
            "body": json.dumps(body),
            "requestContext": {
                "http": {"method": "POST", "path": path, "sourceIp": "203.0.113.9"},
                "stage": "$default",
            },
        }
        result = self.app.resolve(event)
        return result["statusCode"], json.loads(result["body"])


def _enrolled(world: FakeWorld) -> tuple[str, SoftwareAuthenticator]:
    """A user ``walker`` with an authenticator app and a passkey: the app's seed, and the passkey."""
    body = RegisterBody.model_validate(
        {"username": "walker", "email": "walker@example.com", "password": PASSWORD}
    )
    token = auth.register(world.deps, body, session_name="first", now=world.clock.now()).token
    now, staff = world.clock.now(), notices.STAFF
    app = factors.start_totp(world.deps, read(world, token), now)
    code = pyotp.TOTP(app["secret"]).at(now)
    factors.confirm_totp(
        world.deps, read(world, token), token=app["token"], name="Phone", code=code, now=now, actor=staff
    )
    key = SoftwareAuthenticator()
    options = factors.start_webauthn(world.deps, read(world, token), now, passkey=True)
    factors.confirm_webauthn(
        world.deps,
        read(world, token),
        token=options["token"],
        name="Laptop",
        response=key.create(options, origin=ORIGIN),
        now=now,
        actor=staff,
    )
    world.clock.advance(60)  # past the step of the code that enrolled the app
    return app["secret"], key


def test_a_password_login_with_a_second_factor_enters_the_challenge_once_per_request(
    world: FakeWorld,
) -> None:
    seed, _ = _enrolled(world)
    client = _Client(world)

    (status, asked), asking = _entries_into_challenges(
        lambda: client.post("/login", {"username": "walker", "password": PASSWORD})
    )
    assert (status, asked["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    two_factor = {"token": asked["token"], "type": "totp", "code": pyotp.TOTP(seed).at(world.clock.now())}
    (status, _), answering = _entries_into_challenges(lambda: client.post("/login", {"2fa": two_factor}))

    assert status == 201
    # Asked: the rules raise the challenge; the HTTP layer commits the writes it carries as it
    # answers the 401 (with the rate limit's hit given back), without going back in.
    assert asking == ["require"]
    assert answering == ["answer"]


def test_a_passkey_sign_in_enters_the_challenge_once_per_request(world: FakeWorld) -> None:
    _, key = _enrolled(world)
    client = _Client(world)

    (status, challenge), issuing = _entries_into_challenges(lambda: client.post("/login/passkey", {}))
    assert status == 200
    response = key.get(challenge["challenge"], origin=ORIGIN)
    (status, _), answering = _entries_into_challenges(
        lambda: client.post("/login/passkey", {"token": challenge["token"], "response": response})
    )

    assert status == 201
    assert len(issuing) == 1
    assert len(answering) == 1


def test_the_hook_sees_each_call_from_outside_and_none_from_inside(world: FakeWorld) -> None:
    """The control: two calls from here are two entries; ``require``'s own inner calls are none."""
    _enrolled(world)
    (user,) = world.db.users.values()
    binding = challenges.Binding("POST /login")

    _, entered = _entries_into_challenges(
        lambda: (
            binding.login,
            binding.login,
            challenges.require(world.deps, user, binding, world.clock.now()),
        )
    )

    assert entered == ["login", "login", "require"]
