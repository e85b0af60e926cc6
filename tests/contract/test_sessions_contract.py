"""SessionStore contract: the session+user read, writes inside transactions, use, listing, bulk delete."""

from __future__ import annotations

import time

import pytest

from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError
from nimbus_core.domain.models import Session, User
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
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


def test_moving_a_session_to_a_generation_keeps_what_was_counted_on_it_meanwhile(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)
    # A failed reverification counted after ``session`` was read, before the move commits.
    stores.sessions.count_reverify_failure(user.id, session.id, limit=5, window=900, now=NOW)

    stores.tx.commit([stores.sessions.move_to_generation_op(session, 1)])

    stored = stores.sessions.get_with_user(user.id, session.id)[0]
    assert stored is not None
    assert (stored.generation, stored.reverify_failures) == (1, 1)
    assert stored.changed(generation=0, reverify_failures=0, reverify_failures_reset_at=0) == session


def test_moving_a_missing_session_is_invalid_session_and_writes_nothing(stores: Stores) -> None:
    user = _user(stores)
    gone = a_session(user)

    with pytest.raises(NimbusError) as refused:
        stores.tx.commit([stores.sessions.move_to_generation_op(gone, 1)])

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


# ------------------------------------------------------------------------------------ live sessions


def test_live_lists_only_current_unexpired_sessions_newest_first_across_pages(stores: Stores) -> None:
    user, other = _user(stores), _user(stores)
    current = [a_session(user) for _ in range(2 * PAGE + 3)]  # ids are time-ordered: creation order
    expired = a_session(user, exp=int(NOW))  # exp == now is already over
    revoked = a_session(user).changed(generation=user.session_generation - 1)
    _put(stores, *current, expired, revoked, a_session(other))

    g = user.session_generation
    count, live = stores.sessions.live_page(user.id, generation=g, now=NOW, limit=50, offset=0)
    _, page = stores.sessions.live_page(user.id, generation=g, now=NOW, limit=3, offset=PAGE)

    assert count == len(current) == stores.sessions.count_live(user.id, generation=g, now=NOW)
    assert [s.id for s in live] == [s.id for s in reversed(current)]
    assert live[0] == current[-1]
    assert page == live[PAGE : PAGE + 3]


def test_imported_upstream_sessions_list_among_nimbus_ones_by_their_creation_time(stores: Stores) -> None:
    """An imported session keeps upstream's id, its token's ``iat`` in decimal (CONTRACT 15): it
    lists where its creation second puts it, not where its digits sort among Nimbus's ids."""
    user = _user(stores)
    made = [a_session(user), a_session(user)]  # ids made now
    second = int(time.time())
    older, newer = (
        a_session(user).changed(id=str(iat), created_at=iso(iat)) for iat in (second - 86400, second + 60)
    )
    _put(stores, older, *made, newer)

    _, live = stores.sessions.live_page(
        user.id, generation=user.session_generation, now=NOW, limit=50, offset=0
    )

    assert [s.id for s in live] == [newer.id, made[1].id, made[0].id, older.id]


def test_two_users_may_hold_an_imported_session_of_the_same_id(stores: Stores) -> None:
    """Upstream keys sessions by (iat, user): two users who logged in the same second share an id."""
    user, other = _user(stores), _user(stores)
    mine, theirs = (a_session(u).changed(id="1764000000") for u in (user, other))
    _put(stores, mine, theirs)

    assert stores.sessions.get_with_user(user.id, "1764000000") == (mine, user)
    assert stores.sessions.get_with_user(other.id, "1764000000") == (theirs, other)


def test_live_of_another_generation_sees_none_of_the_old_ones(stores: Stores) -> None:
    user = _user(stores)
    _put(stores, a_session(user), a_session(user))

    g = user.session_generation + 1
    assert stores.sessions.live_page(user.id, generation=g, now=NOW, limit=50, offset=0) == (0, [])
    assert stores.sessions.count_live(user.id, generation=g, now=NOW) == 0


def test_list_ids_below_a_generation_names_only_older_sessions(stores: Stores) -> None:
    user = _user(stores)
    old = [a_session(user).changed(generation=g) for g in (0, 1, 1)]
    kept = [a_session(user).changed(generation=2), a_session(user).changed(generation=3)]
    _put(stores, *old, *kept)

    assert sorted(stores.sessions.list_ids(user.id, below_generation=2)) == sorted(s.id for s in old)


def test_get_and_get_many_read_stored_sessions_and_skip_unknown_ids(stores: Stores) -> None:
    user = _user(stores)
    first, second, expired = a_session(user), a_session(user), a_session(user, exp=int(NOW) - 5)
    _put(stores, first, second, expired)

    assert stores.sessions.get(user.id, first.id) == first
    assert stores.sessions.get(user.id, new_id()) is None
    found = stores.sessions.get_many(user.id, [second.id, new_id(), expired.id, second.id])
    assert sorted(s.id for s in found) == sorted([second.id, expired.id])
    assert stores.sessions.get_many(user.id, []) == []


def test_rename_changes_a_live_session_and_returns_it(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    _put(stores, session)

    renamed = stores.sessions.rename(
        user.id, session.id, "Laptop ünïcode 💻", LATER, generation=user.session_generation, now=NOW
    )

    assert renamed == session.changed(name="Laptop ünïcode 💻", updated_at=LATER)
    assert stores.sessions.get(user.id, session.id) == renamed


def test_rename_of_a_revoked_expired_or_missing_session_writes_nothing(stores: Stores) -> None:
    user = _user(stores)
    expired = a_session(user, exp=int(NOW))
    revoked = a_session(user).changed(generation=user.session_generation + 5)
    _put(stores, expired)
    _put(stores, revoked)

    g = user.session_generation

    assert stores.sessions.rename(user.id, expired.id, "x", LATER, generation=g, now=NOW) is None
    # The user's generation moved on past this one: revoked, whatever the session's own number.
    assert stores.sessions.rename(user.id, revoked.id, "x", LATER, generation=g, now=NOW) is None
    assert stores.sessions.rename(user.id, new_id(), "x", LATER, generation=g, now=NOW) is None
    assert stores.sessions.get(user.id, expired.id) == expired
    assert stores.sessions.get(user.id, revoked.id) == revoked


def test_delete_live_deletes_once_and_refuses_dead_sessions(stores: Stores) -> None:
    user = _user(stores)
    live, expired = a_session(user), a_session(user, exp=int(NOW))
    _put(stores, live, expired)
    g = user.session_generation

    assert stores.sessions.delete_live(user.id, live.id, generation=g, now=NOW) is True
    assert stores.sessions.delete_live(user.id, live.id, generation=g, now=NOW) is False
    assert stores.sessions.delete_live(user.id, expired.id, generation=g, now=NOW) is False
    assert stores.sessions.delete_live(user.id, new_id(), generation=g, now=NOW) is False
    assert stores.sessions.get(user.id, live.id) is None
    assert stores.sessions.get(user.id, expired.id) == expired


def test_get_with_users_reads_a_second_user_in_the_same_request(stores: Stores) -> None:
    user, other = _user(stores), _user(stores)
    session = a_session(user)
    _put(stores, session)

    assert stores.sessions.get_with_users(user.id, session.id, other.id) == (session, user, other)
    assert stores.sessions.get_with_users(user.id, session.id, user.id) == (session, user, user)
    assert stores.sessions.get_with_users(user.id, session.id, new_id()) == (session, user, None)
    assert stores.sessions.get_with_users(user.id, new_id(), other.id) == (None, user, other)
