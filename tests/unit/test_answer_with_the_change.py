"""Every reverified endpoint records a second-factor answer with the change it allows, on the fakes.

The guard hands the answer's writes to the route (``request.answer``) and the route to its service,
which commits the change through it: the challenge is used up in the change's own transaction (one
round trip, all or nothing). A route that did not hand it on would still see the answer recorded,
by the guard, after the change, in a transaction of its own: these tests tell the two apart. The
admin routes change SSM, which no transaction carries: their answer is recorded before the write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from accounts_api.routes import routes as account_routes
from admin_api.routes import routes as admin_routes
from factors_api.routes import routes as factor_routes
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.domain.secret_kinds import CHALLENGE
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.platform.ids import new_id
from sessions_api.routes import routes as session_routes
from staff_api.routes import routes as staff_routes
from tests import totp_reference
from tests.fakes import FakeWorld, fake_world
from tests.races import PASSWORD, call, read, register, staff_member

ROUTERS = (account_routes, session_routes, factor_routes, staff_routes, admin_routes)
SEED = "JBSWY3DPEHPK3PXP"  # the caller's app; 80 bits, as upstream's otplib made them
OTHER_SEED = "KRSXG5CTMVRXEZLU"
SSM = "ssm"


@dataclass(frozen=True)
class World:
    """A staff member (``token``) with two TOTP factors (``own_factor`` is the one they do not
    answer with), and another user, ``target``, with one factor (``target_factor``)."""

    fakes: FakeWorld
    token: str
    own_factor: str
    target: str
    target_factor: str

    def user(self, user_id: str) -> User:
        user = self.fakes.deps.users.get(user_id)
        assert user is not None
        return user

    def change(self, user_id: str, **fields: Any) -> None:
        user = self.user(user_id)
        self.fakes.tx.commit(self.fakes.deps.users.change_ops(user, user.changed(**fields)))


def _factor(world: FakeWorld, seed: str) -> SecondFactor:
    stamp = world.clock.iso()
    return SecondFactor(
        id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret=seed
    )


def _world() -> World:
    fakes = fake_world()
    token, _ = staff_member(fakes)
    answering, spare = _factor(fakes, SEED), _factor(fakes, OTHER_SEED)
    staff = read(fakes, token).user
    fakes.tx.commit(
        fakes.deps.users.change_ops(
            staff, staff.changed(second_factors={answering.id: answering, spare.id: spare})
        )
    )
    target_token = register(fakes, "alice").token
    target = read(fakes, target_token).user
    phone = _factor(fakes, OTHER_SEED)
    fakes.tx.commit(fakes.deps.users.change_ops(target, target.changed(second_factors={phone.id: phone})))
    return World(fakes, token, spare.id, target.id, phone.id)


@dataclass(frozen=True)
class Case:
    """One reverified endpoint: its router, method and path pattern, its body and path parameters
    (from the world: the target user by default), and how to put the target in a state the change
    applies to."""

    routes: EndpointRouter
    method: str
    pattern: str
    body: Callable[[World], dict[str, Any]] = lambda _w: {}
    params: Callable[[World], dict[str, str]] = lambda w: {"id": w.target, "uid": w.target}
    prepare: Callable[[World], None] = lambda _w: None

    @property
    def id(self) -> str:
        return f"{self.method} {self.pattern}"

    def path(self, world: World) -> str:
        path = self.pattern
        for name, value in self.params(world).items():
            path = path.replace(f"<{name}>", value)
        return path


_PASSWORD = {"newPassword": "another horse", "confirmNewPassword": "another horse"}
_RENAME = {"username": "renamed"}
_ADDRESS = {"email": "new@example.com"}

CASES = [
    Case(account_routes, "PUT", "/users/me/username", lambda w: _RENAME),
    Case(account_routes, "PUT", "/users/me/email", lambda w: _ADDRESS),
    Case(account_routes, "PUT", "/users/me/password", lambda w: _PASSWORD),
    Case(account_routes, "DELETE", "/users/me"),
    Case(session_routes, "POST", "/users/me/sessions", lambda w: {"name": "k", "permissionFlags": 4}),
    Case(factor_routes, "POST", "/users/me/2fa/totp"),
    Case(factor_routes, "POST", "/users/me/2fa/webauthn"),
    Case(factor_routes, "POST", "/users/me/2fa/backup"),
    Case(factor_routes, "DELETE", "/users/me/2fa/<id>", params=lambda w: {"id": w.own_factor}),
    Case(factor_routes, "DELETE", "/users/me/2fa", lambda w: {"ids": [w.own_factor]}),
    Case(factor_routes, "DELETE", "/users/me/2fa/all"),
    Case(
        factor_routes,
        "DELETE",
        "/users/<uid>/2fa/<id>",
        params=lambda w: {"uid": w.target, "id": w.target_factor},
    ),
    Case(factor_routes, "DELETE", "/users/<uid>/2fa", lambda w: {"ids": [w.target_factor]}),
    Case(factor_routes, "DELETE", "/users/<uid>/2fa/all"),
    Case(staff_routes, "PUT", "/users/<id>/username", lambda w: _RENAME),
    Case(staff_routes, "PUT", "/users/<id>/email", lambda w: _ADDRESS),
    Case(staff_routes, "PUT", "/users/<id>/password", lambda w: _PASSWORD),
    Case(staff_routes, "PUT", "/users/<id>/verify"),
    Case(
        staff_routes,
        "DELETE",
        "/users/<id>/verify",
        prepare=lambda w: w.change(w.target, verified_at=w.fakes.clock.iso()),
    ),
    Case(staff_routes, "PUT", "/users/<id>/staff"),
    Case(staff_routes, "DELETE", "/users/<id>/staff", prepare=lambda w: w.change(w.target, staff=True)),
    Case(staff_routes, "PUT", "/users/<id>/ban", lambda w: {"reason": "spam"}),
    Case(
        staff_routes,
        "DELETE",
        "/users/<id>/ban",
        prepare=lambda w: w.change(w.target, banned_at=w.fakes.clock.iso(), ban_reason="spam"),
    ),
    Case(staff_routes, "DELETE", "/users/<id>"),
    Case(staff_routes, "DELETE", "/users", lambda w: {"ids": [w.target]}),
    Case(admin_routes, "PUT", "/killswitches/<id>", params=lambda w: {"id": "1"}),
    Case(admin_routes, "DELETE", "/killswitches/<id>", params=lambda w: {"id": "1"}),
    Case(admin_routes, "DELETE", "/killswitches"),
    Case(admin_routes, "PATCH", "/loglevel", lambda w: {"name": "DEBUG"}),
]


def _watch(world: World, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What the request writes from now on, in order: each transaction as the set of items it
    names, and ``SSM`` for each runtime-configuration write."""
    log: list[object] = []
    tx, config = world.fakes.tx, world.fakes.config
    commit, commit_joined = tx.commit, tx.commit_joined

    def logged_commit(ops: Any) -> None:
        log.append({item for op in ops for item in op.items})
        commit(ops)

    def logged_joined(first: Any, then: Any) -> None:
        log.append({item for op in [*first, *then] for item in op.items})
        commit_joined(first, then)

    def ssm[**A, R](write: Callable[A, R]) -> Callable[A, R]:
        def logged(*args: A.args, **kwargs: A.kwargs) -> R:
            log.append(SSM)
            return write(*args, **kwargs)

        return logged

    monkeypatch.setattr(tx, "commit", logged_commit)
    monkeypatch.setattr(tx, "commit_joined", logged_joined)
    monkeypatch.setattr(config, "write_killswitches", ssm(config.write_killswitches))
    monkeypatch.setattr(config, "write_log_level", ssm(config.write_log_level))
    return log


def _answered(world: World, case: Case, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Reverify with the password, answer the challenge with the app's code: what the answering
    request wrote, in order."""
    case.prepare(world)
    path, body = case.path(world), case.body(world)
    status, challenge = call(
        world.fakes, world.token, case.method, path, {**body, "password": PASSWORD}, routes=case.routes
    )
    assert (status, challenge.get("code")) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"), challenge
    code = totp_reference.totp(SEED, world.fakes.clock.now())
    answer = {"token": challenge["token"], "type": "totp", "code": code}
    log = _watch(world, monkeypatch)
    status, reply = call(
        world.fakes, world.token, case.method, path, {**body, "2fa": answer}, routes=case.routes
    )
    assert status in (200, 201), reply
    return log


@pytest.mark.parametrize("case", [c for c in CASES if c.routes is not admin_routes], ids=lambda c: c.id)
def test_a_reverified_change_uses_its_challenge_up_in_its_own_transaction(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world()

    log = _answered(world, case, monkeypatch)

    first = log[0]
    assert isinstance(first, set)
    assert any(kind == CHALLENGE.name for kind, *_ in first), log  # the answer, in the first write
    assert any(kind != CHALLENGE.name for kind, *_ in first), log  # with the change
    assert not any(
        kind == CHALLENGE.name for entry in log[1:] if isinstance(entry, set) for kind, *_ in entry
    )


@pytest.mark.parametrize("case", [c for c in CASES if c.routes is admin_routes], ids=lambda c: c.id)
def test_a_reverified_configuration_change_records_its_answer_before_the_ssm_write(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world()

    log = _answered(world, case, monkeypatch)

    answer, change = log
    assert change == SSM
    assert isinstance(answer, set)
    assert {kind for kind, *_ in answer} >= {CHALLENGE.name}


def test_the_cases_are_every_reverified_endpoint() -> None:
    reverified = {f"{e.method} {e.path}" for routes in ROUTERS for e in routes.endpoints if e.policy.reverify}
    assert sorted(c.id for c in CASES) == sorted(reverified)
