"""SessionStore contract: the session+user read, writes inside transactions, use, listing, bulk delete."""

from __future__ import annotations

import pytest

from nimbus_core.errors import DependencyError, ErrorCode, NimbusError
from nimbus_core.ids import new_id
from nimbus_core.models import Session, User
from tests.contract.builders import LATER, NOW, a_session, a_user
from tests.contract.conftest import PAGE, Stores


def _user(stores: Stores) -> User:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    return user


def _put(stores: Stores, *sessions: Session) -> None:
    stores.tx.commit([stores.sessions.put_op(s) for s in sessions])


def test_get_with_user_returns_the_session_and_its_user_together(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)

    assert stores.sessions.get_with_user(user.id, session.id) == (session, user)
    assert stores.sessions.get_with_user(user.id, new_id()) == (None, user)


def test_get_with_user_of_a_deleted_user_has_no_user(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)
    stores.tx.commit(stores.users.delete_ops(user))

    assert stores.sessions.get_with_user(user.id, session.id) == (session, None)


def test_session_ids_are_per_user(stores: Stores) -> None:
    user, other = _user(stores), _user(stores)
    session = a_session(user)
    _put(stores, session)

    assert stores.sessions.get_with_user(other.id, session.id) == (None, other)


def test_putting_an_existing_session_id_is_a_bug_and_writes_nothing(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)

    with pytest.raises(DependencyError):
        _put(stores, session.changed(name="Other"))

    assert stores.sessions.get_with_user(user.id, session.id)[0] == session


def test_replace_overwrites_an_existing_session(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)
    replaced = session.changed(generation=1, name="Renamed", updated_at=LATER)

    stores.tx.commit([stores.sessions.replace_op(replaced)])

    assert stores.sessions.get_with_user(user.id, session.id)[0] == replaced


def test_replace_of_a_missing_session_is_invalid_session_and_writes_nothing(stores: Stores) -> None:
    user = _user(stores)
    gone = a_session(user)

    with pytest.raises(NimbusError) as refused:
        stores.tx.commit([stores.sessions.replace_op(gone)])

    assert refused.value.code is ErrorCode.INVALID_SESSION_ERROR
    assert stores.sessions.get_with_user(user.id, gone.id)[0] is None


def test_session_delete_is_idempotent(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)

    stores.tx.commit([stores.sessions.delete_op(user.id, session.id)])
    stores.tx.commit([stores.sessions.delete_op(user.id, session.id)])

    assert stores.sessions.get_with_user(user.id, session.id)[0] is None


def test_touch_records_use_and_never_recreates_a_deleted_session(stores: Stores) -> None:
    user = _user(stores)
    session, deleted = a_session(user), a_session(user)
    _put(stores, session)

    stores.sessions.touch(session, LATER)
    stores.sessions.touch(deleted, LATER)

    assert stores.sessions.get_with_user(user.id, session.id)[0] == session.changed(used_at=LATER)
    assert stores.sessions.get_with_user(user.id, deleted.id)[0] is None


def test_list_ids_returns_every_stored_session_across_pages(stores: Stores) -> None:
    user, other = _user(stores), _user(stores)
    sessions = [a_session(user) for _ in range(4 * PAGE + 2)]  # 30: more than a batch and than a page
    expired = a_session(user, exp=int(NOW) - 1)  # TTL deletes lazily: still stored, still listed
    _put(stores, *sessions, expired, a_session(other))

    listed = stores.sessions.list_ids(user.id)

    assert sorted(listed) == sorted([s.id for s in sessions] + [expired.id])
    assert len(listed) == len(set(listed)) == 31


def test_list_ids_of_a_user_without_sessions_is_empty(stores: Stores) -> None:
    assert stores.sessions.list_ids(new_id()) == []


def test_delete_many_removes_more_than_one_batch_and_is_safe_to_retry(stores: Stores) -> None:
    user = _user(stores)
    sessions = [a_session(user) for _ in range(30)]
    _put(stores, *sessions)
    doomed = [s.id for s in sessions[:27]]
    unknown = [new_id(), new_id()]

    stores.sessions.delete_many(user.id, iter(doomed + unknown))
    stores.sessions.delete_many(user.id, doomed)

    assert sorted(stores.sessions.list_ids(user.id)) == sorted(s.id for s in sessions[27:])


def test_delete_many_tolerates_a_repeated_id(stores: Stores) -> None:
    user = _user(stores)
    kept, doomed = a_session(user), a_session(user)
    _put(stores, kept, doomed)

    stores.sessions.delete_many(user.id, [doomed.id, doomed.id])

    assert stores.sessions.list_ids(user.id) == [kept.id]


def test_delete_many_of_nothing_does_nothing(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)

    stores.sessions.delete_many(user.id, [])

    assert stores.sessions.list_ids(user.id) == [session.id]
