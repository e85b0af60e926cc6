"""SnapStart: the hooks every function registers, run as the Lambda runtime runs them around a
snapshot, re-seed what restored instances must not share, and the function still answers."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from typing import Any

import pytest
from snapshot_restore_py import get_after_restore, get_before_snapshot

from nimbus_core.adapters import clients, container, snapstart
from nimbus_core.platform import ids
from tests.integration.conftest import Api, Stack

HANDLERS = (
    "auth_api.handler",
    "accounts_api.handler",
    "sessions_api.handler",
    "factors_api.handler",
    "staff_api.handler",
    "admin_api.handler",
    "mail_api.handler",
    "sweep_api.handler",
    "recovery_api.handler",
)


def _run(hooks: list[Any]) -> None:
    """What the runtime does with the library's registries: call each hook with its arguments."""
    for func, args, kwargs in hooks:
        func(*args, **kwargs)


def _registered(hooks: list[Any], func: Callable[[], None]) -> int:
    return sum(1 for registered, _args, _kwargs in hooks if registered is func)


def test_every_function_registers_the_hooks_once_per_process() -> None:
    for module in HANDLERS:
        importlib.import_module(module)

    assert _registered(get_before_snapshot(), snapstart.before_snapshot) == 1
    assert _registered(get_after_restore(), snapstart.after_restore) == 1


@pytest.mark.new_sdk_sessions
def test_a_restore_gives_new_clients_credentials_and_deps_but_keeps_botocore_s_data(
    api: Api, stack: Stack
) -> None:
    importlib.import_module("accounts_api.handler")
    _run(get_before_snapshot())
    deps, dynamodb, session = container.production_deps(), clients.dynamodb(), clients.session()
    credentials, loader = session.get_credentials(), clients.data_loader()

    _run(get_after_restore())

    assert container.production_deps() is not deps
    assert clients.dynamodb() is not dynamodb
    assert clients.session() is not session
    assert clients.session().get_credentials() is not credentials
    assert clients.data_loader() is loader
    assert clients.session().get_component("data_loader") is loader


def test_a_restored_function_answers_with_its_new_clients(api: Api, stack: Stack) -> None:
    registered = api.register(username="before_snapshot")
    assert registered.status == 201, registered.body
    _run(get_before_snapshot())
    _run(get_after_restore())

    me = api.call("GET", "/users/me", headers={"authorization": registered.body["token"]})

    assert me.status == 200, me.body
    assert me.body["username"] == "before_snapshot"


def test_a_restore_restarts_the_id_generator_s_monotonic_state(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot_ms, restored_ms = 1_900_000_000_000, 1_800_000_000_000
    monkeypatch.setattr("time.time_ns", lambda: snapshot_ms * 1_000_000)
    ids.new_id()
    # A clock behind the snapshot's: without a re-seed, the next id would follow the snapshot's last
    # one (its time prefix) instead of carrying this instance's own time.
    monkeypatch.setattr("time.time_ns", lambda: restored_ms * 1_000_000)

    _run(get_after_restore())

    assert ids.new_id()[:10] == _time_prefix(restored_ms)


def test_a_restore_reseeds_python_s_random_so_instances_do_not_back_off_in_lockstep() -> None:
    random.seed(7)
    snapshot_sequence = [random.random() for _ in range(3)]
    random.seed(7)  # the state every instance restored from this snapshot would start with

    _run(get_after_restore())

    assert [random.random() for _ in range(3)] != snapshot_sequence


def _time_prefix(ms: int) -> str:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(ms >> (5 * i)) & 31] for i in reversed(range(10)))
