"""CounterStore, TokenStore (mailed links), DomainStore, Outbox and Transactor contracts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError
from nimbus_core.domain.models import Email, User
from nimbus_core.domain.ports import CounterWindowMovedError, RecoveryRequestGoneError, WriteOp
from nimbus_core.domain.secret_kinds import EMAIL_VERIFICATION
from tests.contract.builders import LATER, NOW, STAMP, a_token, a_user, tag
from tests.contract.conftest import PAGE, Stores


def _user(stores: Stores) -> User:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    return user


def _refused(stores: Stores, ops: Sequence[WriteOp], code: ErrorCode) -> None:
    with pytest.raises(NimbusError) as refused:
        stores.tx.commit(ops)
    assert refused.value.code is code


# --- counters --------------------------------------------------------------------------------------


def test_counter_counts_up_to_the_limit_then_refuses(stores: Stores) -> None:
    key = f"login#ip#{tag()}"

    states = [stores.counters.hit(key, limit=3, window=300, now=NOW + i) for i in range(5)]

    assert [(s.allowed, s.count, s.remaining()) for s in states] == [
        (True, 1, 2),
        (True, 2, 1),
        (True, 3, 0),
        (False, 3, 0),
        (False, 3, 0),
    ]
    assert {s.reset_at for s in states} == {int(NOW) + 300}


def test_counters_are_independent_by_key(stores: Stores) -> None:
    first, second = f"a#{tag()}", f"b#{tag()}"
    stores.counters.hit(first, limit=1, window=300, now=NOW)

    state = stores.counters.hit(second, limit=1, window=300, now=NOW)

    assert (state.allowed, state.count) == (True, 1)


def test_release_gives_one_hit_back_within_the_window(stores: Stores) -> None:
    key = f"register#ip#{tag()}"
    hit = stores.counters.hit(key, limit=1, window=300, now=NOW)
    stores.counters.release(key, reset_at=hit.reset_at)

    again = stores.counters.hit(key, limit=1, window=300, now=NOW + 1)

    assert (again.allowed, again.count, again.reset_at) == (True, 1, hit.reset_at)


def test_release_for_another_window_gives_nothing_back(stores: Stores) -> None:
    key = f"register#ip#{tag()}"
    hit = stores.counters.hit(key, limit=1, window=300, now=NOW)
    stores.counters.release(key, reset_at=hit.reset_at - 300)

    again = stores.counters.hit(key, limit=1, window=300, now=NOW + 1)

    assert (again.allowed, again.count) == (False, 1)


def test_a_release_in_a_transaction_gives_back_only_within_the_window(stores: Stores) -> None:
    key, moved = f"login#ip#{tag()}", f"login#ip#{tag()}"
    hit = stores.counters.hit(key, limit=1, window=300, now=NOW)
    other = stores.counters.hit(moved, limit=1, window=300, now=NOW)

    stores.tx.commit([stores.counters.release_op(key, reset_at=hit.reset_at)])
    with pytest.raises(CounterWindowMovedError):
        stores.tx.commit([stores.counters.release_op(moved, reset_at=other.reset_at - 300)])

    assert stores.counters.hit(key, limit=1, window=300, now=NOW + 1).allowed
    assert not stores.counters.hit(moved, limit=1, window=300, now=NOW + 1).allowed


def test_release_never_goes_below_zero_nor_creates_a_counter(stores: Stores) -> None:
    key = f"register#ip#{tag()}"
    stores.counters.release(key, reset_at=int(NOW) + 300)
    hit = stores.counters.hit(key, limit=2, window=300, now=NOW)
    stores.counters.release(key, reset_at=hit.reset_at)
    stores.counters.release(key, reset_at=hit.reset_at)

    states = [stores.counters.hit(key, limit=2, window=300, now=NOW + 1) for _ in range(3)]

    assert [(s.allowed, s.count) for s in states] == [(True, 1), (True, 2), (False, 2)]


def test_an_expired_window_restarts_at_the_next_hit(stores: Stores) -> None:
    key = f"login#ip#{tag()}"
    for _ in range(3):
        stores.counters.hit(key, limit=3, window=300, now=NOW)

    restarted = stores.counters.hit(key, limit=3, window=300, now=NOW + 300)
    following = stores.counters.hit(key, limit=3, window=300, now=NOW + 301)

    assert (restarted.allowed, restarted.count, restarted.reset_at) == (True, 1, int(NOW) + 600)
    assert (following.allowed, following.count, following.reset_at) == (True, 2, int(NOW) + 600)


# --- tokens ----------------------------------------------------------------------------------------


def test_token_get_with_user_returns_both_in_one_read(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token)])

    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, user.id) == (token, user)
    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, a_token(user).hash, user.id) == (None, user)
    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, a_user().id) == (token, None)


def test_putting_an_existing_token_is_a_bug_and_writes_nothing(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token)])

    with pytest.raises(DependencyError):
        stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token.changed(email="other@example.com"))])

    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, user.id)[0] == token


def test_consume_is_single_use(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token)])

    stores.tx.commit([stores.tokens.take_op(EMAIL_VERIFICATION, token.hash)])
    _refused(
        stores,
        [stores.tokens.take_op(EMAIL_VERIFICATION, token.hash)],
        ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR,
    )

    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, user.id) == (None, user)


def test_a_used_token_cancels_the_change_it_came_with(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token)])
    stores.tx.commit([stores.tokens.take_op(EMAIL_VERIFICATION, token.hash)])
    verified = user.changed(verified_at=LATER, updated_at=LATER)

    _refused(
        stores,
        [*stores.users.change_ops(user, verified), stores.tokens.take_op(EMAIL_VERIFICATION, token.hash)],
        ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR,
    )

    assert stores.users.get(user.id) == user


def test_token_delete_removes_it_and_is_idempotent(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    stores.tx.commit([stores.tokens.put_op(EMAIL_VERIFICATION, token)])

    stores.tx.commit([stores.tokens.drop_op(EMAIL_VERIFICATION, token.hash)])
    stores.tx.commit([stores.tokens.drop_op(EMAIL_VERIFICATION, token.hash)])

    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, user.id)[0] is None


# --- domains ---------------------------------------------------------------------------------------


def test_domains_are_listed_sorted_by_name_across_pages(stores: Stores) -> None:
    fresh = tag()
    names = [f"{fresh}-{i:02d}.example" for i in range(PAGE + 3)]
    for name in reversed(names):
        assert stores.domains.put(name, subdomains=False, now=STAMP)

    listed = [d.id for d in stores.domains.list()]

    assert listed == sorted(listed)
    assert [n for n in listed if n.startswith(fresh)] == names


def test_domain_put_reports_new_then_updated_and_keeps_its_creation_time(stores: Stores) -> None:
    name = f"{tag()}.example"

    assert stores.domains.put(name, subdomains=False, now=STAMP) is True
    assert stores.domains.put(name, subdomains=True, now=LATER) is False

    domain = stores.domains.get(name)
    assert domain is not None
    assert domain.to_public() == {"id": name, "subdomains": True, "createdAt": STAMP, "updatedAt": LATER}


def test_domain_get_of_an_unknown_domain_is_none(stores: Stores) -> None:
    assert stores.domains.get(f"{tag()}.example") is None


def test_domain_delete_reports_whether_it_was_offered(stores: Stores) -> None:
    name = f"{tag()}.example"
    stores.domains.put(name, subdomains=True, now=STAMP)

    assert stores.domains.delete(name) is True
    assert stores.domains.delete(name) is False
    assert stores.domains.get(name) is None
    assert name not in [d.id for d in stores.domains.list()]


# --- outbox and transactions -----------------------------------------------------------------------


def _email(to: str) -> Email:
    return Email(to=to, subject="Verify your email address", text="text", html="<p>html</p>")


def test_enqueue_in_a_committed_transaction_queues_the_email(stores: Stores) -> None:
    to = f"mail.{tag()}@example.com"

    stores.tx.commit([stores.outbox.enqueue_op(_email(to), now=NOW, kind="verify-email", user_id="U1")])
    stores.tx.commit([stores.outbox.enqueue_op(_email(to), now=NOW, kind="verify-email", user_id="U1")])

    assert stores.probe.outbox_to(to) == ["verify-email", "verify-email"]


def test_enqueue_in_a_cancelled_transaction_writes_nothing(stores: Stores) -> None:
    taken = _user(stores)
    newcomer = a_user(username=taken.username)
    ops = [
        stores.outbox.enqueue_op(_email(newcomer.email), now=NOW, kind="verify-email", user_id="U1"),
        *stores.users.create_ops(newcomer),
    ]

    _refused(stores, ops, ErrorCode.USER_EXISTS_ERROR)

    assert stores.probe.outbox_to(newcomer.email) == []
    assert stores.users.get(newcomer.id) is None


def test_a_recovery_request_is_removed_once_and_a_second_removal_is_refused_with_gone(stores: Stores) -> None:
    to = f"mail.{tag()}@example.com"
    request = stores.outbox.queue_recovery("Alice@Example.com", now=NOW)
    assert (request.login_name, request.created_at) == ("Alice@Example.com", STAMP)
    assert request.expires_at > NOW

    mail = stores.outbox.enqueue_op(_email(to), now=NOW, kind="recover-password", user_id="U1")
    stores.tx.commit([stores.outbox.recovery_done_op(request.id), mail])
    again = stores.outbox.enqueue_op(_email(to), now=NOW, kind="recover-password", user_id="U1")
    with pytest.raises(RecoveryRequestGoneError):
        stores.tx.commit([stores.outbox.recovery_done_op(request.id), again])

    assert stores.probe.outbox_to(to) == ["recover-password"]  # the second handling wrote nothing


def test_committing_no_ops_does_nothing(stores: Stores) -> None:
    stores.tx.commit([])


def test_two_operations_on_one_item_in_a_transaction_are_refused_and_write_nothing(stores: Stores) -> None:
    user = _user(stores)
    token = a_token(user)
    to = f"mail.{tag()}@example.com"
    ops = [
        stores.outbox.enqueue_op(_email(to), now=NOW, kind="verify-email", user_id="U1"),
        stores.tokens.put_op(EMAIL_VERIFICATION, token),
        stores.tokens.drop_op(EMAIL_VERIFICATION, token.hash),
    ]

    with pytest.raises(DependencyError):
        stores.tx.commit(ops)

    assert stores.tokens.read_with_user(EMAIL_VERIFICATION, token.hash, user.id)[0] is None
    assert stores.probe.outbox_to(to) == []


def test_a_user_change_and_a_login_condition_on_the_same_user_cannot_share_a_transaction(
    stores: Stores,
) -> None:
    user = _user(stores)
    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)
    check = stores.users.credentials_unchanged_op(user, new_password_hash=None, now=NOW, failure_limit=3)

    with pytest.raises(DependencyError):
        stores.tx.commit([*stores.users.change_ops(user, renamed), check])

    assert stores.users.get(user.id) == user
