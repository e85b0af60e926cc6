"""The session sweeper's rules on the fakes: which stored sessions go, which stay, and what a fault
mid-way leaves for the retry; and its handler's answer to a stream batch."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import pytest

from nimbus_core.adapters.users import user_id_from_key
from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.models import Session, User
from nimbus_core.platform import metrics
from nimbus_core.sessions.session_issuer import revoke_all
from nimbus_tools.local.inprocess import LambdaContextStub
from sweep_api import handler
from sweep_api.service import Sweeper, Swept, sweep_user
from tests.contract.builders import a_session, a_user
from tests.fakes import FakeDb, FakeSessions, FakeWorld


def stored_user(world: FakeWorld, user: User | None = None) -> User:
    user = user or a_user()
    world.tx.commit(world.deps.users.create_ops(user))
    return user


def stored_sessions(world: FakeWorld, user: User, count: int) -> list[Session]:
    """``count`` sessions of ``user``'s current generation, stored."""
    sessions = [a_session(user) for _ in range(count)]
    for session in sessions:
        world.tx.commit([world.deps.sessions.put_op(session)])
    return sessions


def bump(world: FakeWorld, user: User) -> User:
    """Revoke every session of ``user`` (the next generation), as revoke-all and bans do."""
    revoked = revoke_all(user)
    world.tx.commit(world.deps.users.change_ops(user, revoked))
    return revoked


def stored_ids(world: FakeWorld, user_id: str) -> set[str]:
    return {sid for (uid, sid) in world.db.sessions if uid == user_id}


# --- the rules ------------------------------------------------------------------------------------


def test_sessions_of_older_generations_are_deleted_and_the_current_generation_is_kept(
    world: FakeWorld,
) -> None:
    user = stored_user(world)
    first = stored_sessions(world, user, 30)
    user = bump(world, user)
    second = stored_sessions(world, user, 4)
    user = bump(world, user)
    current = stored_sessions(world, user, 3)

    swept = sweep_user(world.deps, user.id)

    assert swept == Swept(user_id=user.id, user_exists=True, generation=2, deleted=34)
    assert stored_ids(world, user.id) == {s.id for s in current}
    assert not {s.id for s in first + second} & set(world.db.sessions)


def test_a_user_whose_sessions_are_all_current_writes_nothing(world: FakeWorld) -> None:
    user = stored_user(world)
    kept = stored_sessions(world, user, 5)
    world.db.calls.clear()

    swept = sweep_user(world.deps, user.id)

    assert swept.deleted == 0
    assert stored_ids(world, user.id) == {s.id for s in kept}
    assert world.db.calls == ["users.get", "sessions.list_ids"]  # no delete call at all


def test_a_deleted_user_loses_every_stored_session_whatever_its_generation(world: FakeWorld) -> None:
    user = stored_user(world)
    stored_sessions(world, user, 3)
    user = bump(world, user)
    stored_sessions(world, user, 2)
    world.tx.commit(world.deps.users.delete_ops(user))  # sessions left behind, as after a fault

    swept = sweep_user(world.deps, user.id)

    assert swept == Swept(user_id=user.id, user_exists=False, generation=None, deleted=5)
    assert stored_ids(world, user.id) == set()


def test_other_users_sessions_are_never_touched(world: FakeWorld) -> None:
    user, other = stored_user(world), stored_user(world)
    stored_sessions(world, user, 3)
    theirs = stored_sessions(world, other, 3)
    bump(world, user)
    world.tx.commit(world.deps.users.delete_ops(world.db.users[other.id]))  # gone, but not swept yet

    sweep_user(world.deps, user.id)

    assert stored_ids(world, user.id) == set()
    assert stored_ids(world, other.id) == {s.id for s in theirs}


def test_sweeping_again_is_harmless(world: FakeWorld) -> None:
    user = stored_user(world)
    stored_sessions(world, user, 10)
    user = bump(world, user)
    current = stored_sessions(world, user, 2)

    assert sweep_user(world.deps, user.id).deleted == 10
    assert sweep_user(world.deps, user.id).deleted == 0

    assert stored_ids(world, user.id) == {s.id for s in current}


def test_an_unknown_user_with_nothing_stored_is_a_no_op(world: FakeWorld) -> None:
    assert sweep_user(world.deps, "01UNKNOWNUSER0000000000000") == Swept(
        "01UNKNOWNUSER0000000000000", user_exists=False, generation=None, deleted=0
    )


class FlakySessions(FakeSessions):
    """Fails once, mid-way through a deletion (of ``only_for``'s sessions, if given), after removing
    ``deleted_before_failing`` of the sessions asked for."""

    def __init__(self, db: FakeDb, *, deleted_before_failing: int = 0, only_for: str | None = None) -> None:
        super().__init__(db)
        self.deleted_before_failing = deleted_before_failing
        self.only_for = only_for
        self.failed = False

    def delete_many(self, user_id: str, session_ids: Iterable[str]) -> None:
        ids = list(session_ids)
        if not self.failed and self.only_for in (None, user_id):
            self.failed = True
            super().delete_many(user_id, ids[: self.deleted_before_failing])
            raise DependencyError("BatchWriteItem failed: injected")
        super().delete_many(user_id, ids)


def test_a_fault_mid_way_raises_and_a_retry_finishes_the_job(world: FakeWorld) -> None:
    user = stored_user(world)
    stored_sessions(world, user, 60)
    user = bump(world, user)
    current = stored_sessions(world, user, 2)
    flaky = FlakySessions(world.db, deleted_before_failing=25)
    deps = dataclasses.replace(world.deps, sessions=flaky)

    with pytest.raises(DependencyError):
        sweep_user(deps, user.id)
    assert len(stored_ids(world, user.id)) == 60 - 25 + 2  # the first batch went, the rest stayed

    assert sweep_user(deps, user.id).deleted == 35  # the retry lists what is left and deletes it
    assert stored_ids(world, user.id) == {s.id for s in current}


def test_a_sweeper_sweeps_each_user_once_after_success_and_again_after_a_failure(world: FakeWorld) -> None:
    user = stored_user(world)
    stored_sessions(world, user, 3)
    user = bump(world, user)
    flaky = FlakySessions(world.db, deleted_before_failing=1)
    sweeper = Sweeper(dataclasses.replace(world.deps, sessions=flaky))

    with pytest.raises(DependencyError):
        sweeper.sweep(user.id)
    first = sweeper.sweep(user.id)  # not remembered as done: swept again
    world.db.calls.clear()
    again = sweeper.sweep(user.id)

    assert first.deleted == 2
    assert again is first
    assert world.db.calls == []  # a later record of the same user in the batch costs nothing


def test_the_number_of_swept_sessions_is_counted(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[tuple[metrics.Event, int]] = []
    monkeypatch.setattr(metrics, "count", lambda event, value=1: counted.append((event, value)))
    user = stored_user(world)
    stored_sessions(world, user, 7)
    bump(world, user)

    sweep_user(world.deps, user.id)
    sweep_user(world.deps, user.id)  # nothing stale: nothing counted

    assert counted == [(metrics.Event.SESSIONS_SWEPT, 7)]


# --- the handler ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "user_id"),
    [
        ({"pk": {"S": "USER#01ABC"}}, "01ABC"),
        ({"pk": {"S": "USERNAME#alice"}}, None),
        ({"pk": {"S": "EMAIL#alice@example.com"}}, None),
        ({"pk": {"S": "USER#"}}, None),
        ({"pk": {"N": "1"}}, None),
        ({"pk": "USER#01ABC"}, None),
        ({}, None),
    ],
)
def test_only_a_user_items_key_names_a_user(keys: dict[str, Any], user_id: str | None) -> None:
    assert user_id_from_key(keys) == user_id


def record(pk: str, sequence: str, event: str = "MODIFY") -> dict[str, Any]:
    """A users-table stream record as Lambda delivers it (keys only)."""
    return {
        "eventID": f"e{sequence}",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/users/stream/x",
        "dynamodb": {"Keys": {"pk": {"S": pk}}, "SequenceNumber": sequence, "StreamViewType": "KEYS_ONLY"},
    }


def run_handler(
    monkeypatch: pytest.MonkeyPatch, world: FakeWorld, records: list[dict[str, Any]], **ports: Any
) -> Any:
    deps = dataclasses.replace(world.deps, **ports)
    monkeypatch.setattr(handler, "production_deps", lambda: deps)
    return handler.lambda_handler({"Records": records}, LambdaContextStub("SweepFunction"))  # type: ignore[arg-type]


def test_the_handler_sweeps_changed_and_removed_users_and_ignores_claims_and_inserts(
    monkeypatch: pytest.MonkeyPatch, world: FakeWorld
) -> None:
    changed, removed, inserted = stored_user(world), stored_user(world), stored_user(world)
    for user in (changed, removed, inserted):
        stored_sessions(world, user, 2)
    bump(world, changed)
    world.tx.commit(world.deps.users.delete_ops(removed))
    bump(world, inserted)  # stale sessions, but its record is an INSERT: not this function's

    answer = run_handler(
        monkeypatch,
        world,
        [
            record(f"USER#{changed.id}", "10"),
            record(f"USERNAME#{changed.username.lower()}", "11", "REMOVE"),
            record(f"EMAIL#{changed.email}", "12", "INSERT"),
            record(f"USER#{removed.id}", "13", "REMOVE"),
            record(f"USER#{inserted.id}", "14", "INSERT"),
        ],
    )

    assert answer == {"batchItemFailures": []}
    assert stored_ids(world, changed.id) == set()
    assert stored_ids(world, removed.id) == set()
    assert len(stored_ids(world, inserted.id)) == 2


def test_the_handler_reports_the_record_whose_sweep_failed_and_its_retry_completes(
    monkeypatch: pytest.MonkeyPatch, world: FakeWorld
) -> None:
    calm, broken = stored_user(world), stored_user(world)
    stored_sessions(world, calm, 3)
    stored_sessions(world, broken, 30)
    bump(world, calm)
    bump(world, broken)
    flaky = FlakySessions(world.db, deleted_before_failing=25, only_for=broken.id)
    batch = [record(f"USER#{calm.id}", "100"), record(f"USER#{broken.id}", "200")]

    answer = run_handler(monkeypatch, world, batch, sessions=flaky)

    assert answer == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    assert stored_ids(world, calm.id) == set()
    assert len(stored_ids(world, broken.id)) == 5  # one batch of 25 went before the fault
    assert run_handler(monkeypatch, world, batch[1:], sessions=flaky) == {"batchItemFailures": []}
    assert stored_ids(world, broken.id) == set()


def test_the_handler_sweeps_a_user_named_twice_in_a_batch_once(
    monkeypatch: pytest.MonkeyPatch, world: FakeWorld
) -> None:
    user = stored_user(world)
    stored_sessions(world, user, 2)
    bump(world, user)
    world.db.calls.clear()

    answer = run_handler(monkeypatch, world, [record(f"USER#{user.id}", "1"), record(f"USER#{user.id}", "2")])

    assert answer == {"batchItemFailures": []}
    assert world.db.calls == ["users.get", "sessions.list_ids", "sessions.delete_many"]
