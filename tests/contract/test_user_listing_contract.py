"""UserStore listing contract: GET /users reads one page newest first and an exact count that the
transactions creating and deleting users keep (no Scan); ``get_many`` reads a bulk deletion's users.
Also the Outbox's removal of a deleted user's stored mail."""

from __future__ import annotations

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Email, User
from tests.contract.builders import NOW, a_user, tag
from tests.contract.conftest import Stores


def _create(stores: Stores, user: User) -> User:
    stores.tx.commit(stores.users.create_ops(user))
    return user


def _count(stores: Stores) -> int:
    return stores.users.newest_page(limit=0, offset=0)[0]


def test_the_count_moves_with_each_creation_and_deletion(stores: Stores) -> None:
    before = _count(stores)
    users = [_create(stores, a_user()) for _ in range(3)]
    assert _count(stores) == before + 3

    stores.tx.commit(stores.users.delete_ops(users[0]))

    assert _count(stores) == before + 2


def test_a_refused_creation_is_not_counted(stores: Stores) -> None:
    taken = _create(stores, a_user())
    before = _count(stores)

    with pytest.raises(NimbusError):
        stores.tx.commit(stores.users.create_ops(a_user(username=taken.username)))

    assert _count(stores) == before


def test_a_user_deleted_twice_is_counted_once(stores: Stores) -> None:
    user = _create(stores, a_user())
    before = _count(stores)
    stores.tx.commit(stores.users.delete_ops(user))

    with pytest.raises(NimbusError) as gone:
        stores.tx.commit(stores.users.delete_ops(user))

    assert gone.value.code is ErrorCode.INVALID_SESSION_ERROR
    assert _count(stores) == before - 1


def test_the_page_is_newest_first_with_offset_and_limit(stores: Stores) -> None:
    users = [_create(stores, a_user()) for _ in range(4)]  # ids are time-ordered
    newest = list(reversed(users))

    count, page = stores.users.newest_page(limit=2, offset=1)
    _, first = stores.users.newest_page(limit=4, offset=0)

    assert count >= 4
    assert [u.id for u in first] == [u.id for u in newest]
    assert page == newest[1:3]


def test_a_deleted_user_leaves_the_page(stores: Stores) -> None:
    users = [_create(stores, a_user()) for _ in range(2)]
    stores.tx.commit(stores.users.delete_ops(users[1]))

    _, page = stores.users.newest_page(limit=1, offset=0)

    assert page == [users[0]]


def test_a_page_beyond_the_end_is_empty_but_counted(stores: Stores) -> None:
    _create(stores, a_user())
    count = _count(stores)

    assert stores.users.newest_page(limit=50, offset=count) == (count, [])
    # Any offset a client can send: past DynamoDB's 32-bit Limit, past a 64-bit integer.
    for offset in (2**31, 2**63 - 1, 10**23):
        assert stores.users.newest_page(limit=50, offset=offset) == (count, [])


def test_pages_run_newest_first_across_the_list_shards_without_the_deleted(stores: Stores) -> None:
    users = [_create(stores, a_user()) for _ in range(12)]  # ids are time-ordered, shards by id
    stores.tx.commit(stores.users.delete_ops(users[9]))
    stores.tx.commit(stores.users.delete_ops(users[2]))
    newest = [u for u in reversed(users) if u not in (users[9], users[2])]
    count = _count(stores)

    pages = [stores.users.newest_page(limit=min(3, 10 - i), offset=i) for i in range(0, 10, 3)]

    assert [c for c, _ in pages] == [count] * 4
    assert [u.id for _, page in pages for u in page] == [u.id for u in newest]


def test_users_stored_before_the_list_shards_are_listed_counted_and_deleted(stores: Stores) -> None:
    old, older = a_user(), a_user()  # made in this order: ``older`` sorts after ``old``
    before = _count(stores)
    stores.probe.store_unsharded(old)
    stores.probe.store_unsharded(older)
    new = _create(stores, a_user())

    count, page = stores.users.newest_page(limit=3, offset=0)

    assert count == before + 3
    assert page == [new, older, old]

    stores.tx.commit(stores.users.delete_ops(older))
    count, page = stores.users.newest_page(limit=2, offset=0)

    assert count == before + 2  # the deletion counts in a shard of today: the sum stays exact
    assert page == [new, old]


def test_get_many_reads_the_users_that_exist(stores: Stores) -> None:
    users = [_create(stores, a_user()) for _ in range(3)]
    gone = a_user()

    found = stores.users.get_many([users[2].id, gone.id, users[0].id, users[0].id])

    assert sorted(found, key=lambda u: u.id) == [users[0], users[2]]
    assert stores.users.get_many([]) == []


def _email(to: str) -> Email:
    return Email(to=to, subject="s", text="t", html="<p>h</p>")


def test_discarding_a_users_mail_removes_only_theirs(stores: Stores) -> None:
    mine, theirs = f"mine.{tag()}@example.com", f"theirs.{tag()}@example.com"
    me, other = a_user(), a_user()
    stores.tx.commit([stores.outbox.enqueue_op(_email(mine), now=NOW, kind="verify-email", user_id=me.id)])
    stores.tx.commit([stores.outbox.enqueue_op(_email(mine), now=NOW, kind="ban", user_id=me.id)])
    stores.tx.commit([stores.outbox.enqueue_op(_email(theirs), now=NOW, kind="ban", user_id=other.id)])

    assert stores.outbox.discard_for(me.id) == 2
    assert stores.outbox.discard_for(me.id) == 0

    assert stores.probe.outbox_to(mine) == []
    assert stores.probe.outbox_to(theirs) == ["ban"]
