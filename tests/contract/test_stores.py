"""The fakes behave like the DynamoDB adapters: one suite, run against both."""

from __future__ import annotations

import pytest

from nimbus_core.errors import ErrorCode, NimbusError
from nimbus_core.ids import new_id
from nimbus_core.mail_templates import Email
from nimbus_core.models import Session, User, VerificationToken
from tests.contract.conftest import Stores
from tests.samples import sample_user

STAMP = "2027-01-15T08:00:00.250Z"


def _user(username: str | None = None, email: str | None = None) -> User:
    name = username or f"u{new_id()[-12:].lower()}"
    return sample_user(new_id(), name, email=email or f"{name}.{new_id()[-8:].lower()}@example.com")


def _created(stores: Stores, user: User | None = None) -> User:
    made = user or _user()
    stores.tx.commit(stores.users.create_ops(made))
    return made


def _session(user: User, *, generation: int = 0) -> Session:
    return Session(
        user_id=user.id,
        id=new_id(),
        secret_hash="h" * 64,
        name="laptop",
        exp=2_000_000_000,
        created_at=STAMP,
        updated_at=STAMP,
        used_at=STAMP,
        generation=generation,
    )


def _fails(stores: Stores, ops: list, code: ErrorCode) -> None:  # type: ignore[type-arg]
    with pytest.raises(NimbusError) as raised:
        stores.tx.commit(ops)
    assert raised.value.code is code


# ---------------------------------------------------------------------------------------------- users


def test_a_created_user_is_found_by_id_username_and_email_in_any_case(stores: Stores) -> None:
    user = _created(stores, _user(email="Mixed.Case@Example.com"))
    assert stores.users.get(user.id) == user
    assert stores.users.find_by_username(user.username.upper()) == user
    assert stores.users.find_by_email("mixed.case@EXAMPLE.COM") == user
    assert stores.users.get(new_id()) is None
    assert stores.users.find_by_username("nobody_at_all") is None


def test_a_taken_username_or_email_in_any_case_cancels_the_whole_creation(stores: Stores) -> None:
    first = _created(stores)
    same_name = _user(username=first.username.upper())
    same_email = _user(email=first.email.upper())
    _fails(stores, stores.users.create_ops(same_name), ErrorCode.USER_EXISTS_ERROR)
    _fails(stores, stores.users.create_ops(same_email), ErrorCode.USER_EXISTS_ERROR)
    assert stores.users.get(same_name.id) is None
    assert stores.users.find_by_email(same_name.email) is None  # its own email claim was not written


def test_emails_collide_after_case_folding(stores: Stores) -> None:
    local = f"s{new_id()[-8:].lower()}"
    _created(stores, _user(email=f"{local}STRASSE@example.com"))
    _fails(
        stores,
        stores.users.create_ops(_user(email=f"{local}straße@example.com")),
        ErrorCode.USER_EXISTS_ERROR,
    )


def test_a_username_change_frees_the_old_name_and_claims_the_new(stores: Stores) -> None:
    user = _created(stores)
    renamed = user.changed(username=f"r{new_id()[-10:].lower()}", updated_at="2027-01-16T00:00:00.000Z")
    stores.tx.commit(stores.users.change_ops(user, renamed))
    assert stores.users.get(user.id) == renamed
    assert stores.users.find_by_username(renamed.username) == renamed
    assert stores.users.find_by_username(user.username) is None
    stores.tx.commit(stores.users.create_ops(_user(username=user.username)))  # the old name is free


def test_a_change_to_a_taken_name_changes_nothing(stores: Stores) -> None:
    taken = _created(stores)
    user = _created(stores)
    wanted = user.changed(username=taken.username.swapcase())
    _fails(stores, stores.users.change_ops(user, wanted), ErrorCode.USER_EXISTS_ERROR)
    assert stores.users.get(user.id) == user
    assert stores.users.find_by_username(user.username) == user


def test_a_change_relying_on_a_stale_password_or_a_deleted_user_is_refused(stores: Stores) -> None:
    user = _created(stores)
    first = user.changed(password_hash="first-new-hash")
    stores.tx.commit(stores.users.change_ops(user, first))
    _fails(
        stores,
        stores.users.change_ops(user, user.changed(password_hash="other")),
        ErrorCode.INVALID_PASSWORD_ERROR,
    )
    stores.tx.commit(stores.users.delete_ops(first))
    _fails(
        stores,
        stores.users.change_ops(first, first.changed(domain="x.example")),
        ErrorCode.INVALID_SESSION_ERROR,
    )


def test_a_change_writes_only_what_changed_so_a_concurrent_ban_survives(stores: Stores) -> None:
    user = _created(stores)
    banned = user.changed(banned_at=STAMP, ban_reason="spam")
    stores.tx.commit(stores.users.change_ops(user, banned))
    stores.tx.commit(
        stores.users.change_ops(user, user.changed(domain="other.example"))
    )  # read before the ban
    stored = stores.users.get(user.id)
    assert stored is not None
    assert (stored.banned_at, stored.domain) == (STAMP, "other.example")


def test_deleting_a_user_frees_both_claims(stores: Stores) -> None:
    user = _created(stores)
    stores.tx.commit(stores.users.delete_ops(user))
    assert stores.users.get(user.id) is None
    again = _user(username=user.username, email=user.email)
    stores.tx.commit(stores.users.create_ops(again))
    assert stores.users.find_by_email(user.email) == again


def test_the_login_condition_refuses_a_banned_or_changed_user_and_can_store_a_rehash(stores: Stores) -> None:
    user = _created(stores)
    stores.tx.commit(
        [stores.users.credentials_unchanged_op(user, new_password_hash="rehashed", now=1.0, failure_limit=10)]
    )
    rehashed = stores.users.get(user.id)
    assert rehashed is not None
    assert rehashed.password_hash == "rehashed"
    op = stores.users.credentials_unchanged_op(user, new_password_hash=None, now=1.0, failure_limit=10)
    _fails(stores, [op], ErrorCode.INVALID_PASSWORD_ERROR)  # the hash we verified is gone
    stores.tx.commit(stores.users.change_ops(rehashed, rehashed.changed(banned_at=STAMP)))
    banned_op = stores.users.credentials_unchanged_op(
        rehashed, new_password_hash=None, now=1.0, failure_limit=10
    )
    _fails(stores, [banned_op], ErrorCode.INVALID_PASSWORD_ERROR)


def test_failed_answers_are_counted_on_the_account_until_the_limit(stores: Stores) -> None:
    user = _created(stores)
    states = [stores.users.count_auth_failure(user.id, limit=3, window=900, now=1000.0) for _ in range(4)]
    assert [(s.allowed, s.count) for s in states if s] == [(True, 1), (True, 2), (True, 3), (False, 3)]
    later = stores.users.count_auth_failure(user.id, limit=3, window=900, now=1000.0 + 900)
    assert later is not None
    assert (later.allowed, later.count) == (True, 1)  # a new window
    locked = stores.users.get(user.id)
    assert locked is not None
    assert locked.auth_failures == 1
    assert stores.users.count_auth_failure(new_id(), limit=3, window=900, now=1000.0) is None


# ------------------------------------------------------------------------------------------- sessions


def test_a_session_is_read_with_its_user_in_one_call(stores: Stores) -> None:
    user = _created(stores)
    session = _session(user)
    stores.tx.commit([stores.sessions.put_op(session)])
    assert stores.sessions.get_with_user(user.id, session.id) == (session, user)
    assert stores.sessions.get_with_user(user.id, new_id()) == (None, user)
    assert stores.sessions.get_with_user(new_id(), session.id) == (None, None)


def test_replacing_a_revoked_session_is_refused(stores: Stores) -> None:
    user = _created(stores)
    session = _session(user)
    stores.tx.commit([stores.sessions.put_op(session)])
    stores.tx.commit([stores.sessions.replace_op(session.changed(generation=1))])
    assert stores.sessions.get_with_user(user.id, session.id)[0] == session.changed(generation=1)
    stores.tx.commit([stores.sessions.delete_op(user.id, session.id)])
    stores.tx.commit([stores.sessions.delete_op(user.id, session.id)])  # idempotent
    _fails(stores, [stores.sessions.replace_op(session)], ErrorCode.INVALID_SESSION_ERROR)


def test_touch_records_use_and_ignores_a_revoked_session(stores: Stores) -> None:
    user = _created(stores)
    session = _session(user)
    stores.tx.commit([stores.sessions.put_op(session)])
    stores.sessions.touch(session, "2027-02-01T00:00:00.000Z")
    found = stores.sessions.get_with_user(user.id, session.id)[0]
    assert found is not None
    assert found.used_at == "2027-02-01T00:00:00.000Z"
    stores.tx.commit([stores.sessions.delete_op(user.id, session.id)])
    stores.sessions.touch(session, "2027-03-01T00:00:00.000Z")
    assert stores.sessions.get_with_user(user.id, session.id)[0] is None


def test_many_sessions_are_listed_and_deleted_in_batches(stores: Stores) -> None:
    user = _created(stores)
    sessions = [_session(user) for _ in range(60)]
    for start in range(0, 60, 20):
        stores.tx.commit([stores.sessions.put_op(s) for s in sessions[start : start + 20]])
    assert sorted(stores.sessions.list_ids(user.id)) == sorted(s.id for s in sessions)
    stores.sessions.delete_many(user.id, [s.id for s in sessions[:55]])
    stores.sessions.delete_many(user.id, [s.id for s in sessions[:55]])  # safe to retry
    assert sorted(stores.sessions.list_ids(user.id)) == sorted(s.id for s in sessions[55:])


# ------------------------------------------------------------------------------------------- counters


def test_counters_allow_exactly_the_limit_per_window_and_give_hits_back(stores: Stores) -> None:
    key = f"test#{new_id()}"
    states = [stores.counters.hit(key, limit=2, window=60, now=100.0) for _ in range(3)]
    assert [(s.allowed, s.count, s.reset_at) for s in states] == [
        (True, 1, 160),
        (True, 2, 160),
        (False, 2, 160),
    ]
    stores.counters.release(key, reset_at=160)
    assert stores.counters.hit(key, limit=2, window=60, now=101.0).allowed
    stores.counters.release(key, reset_at=999)  # another window: ignored
    assert not stores.counters.hit(key, limit=2, window=60, now=102.0).allowed
    fresh = stores.counters.hit(key, limit=2, window=60, now=160.0)
    assert (fresh.allowed, fresh.count, fresh.reset_at) == (True, 1, 220)


# --------------------------------------------------------------------------------------------- tokens


def test_a_verification_token_is_read_with_its_user_and_consumed_once(stores: Stores) -> None:
    user = _created(stores)
    token = VerificationToken(
        hash=new_id(), user_id=user.id, email=user.email, created_at=STAMP, exp=2_000_000_000
    )
    stores.tx.commit([stores.tokens.put_op(token)])
    assert stores.tokens.get_with_user(token.hash, user.id) == (token, user)
    stores.tx.commit([stores.tokens.consume_op(token.hash)])
    assert stores.tokens.get_with_user(token.hash, user.id) == (None, user)
    _fails(stores, [stores.tokens.consume_op(token.hash)], ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR)
    stores.tx.commit([stores.tokens.delete_op(token.hash)])  # absent: fine


# -------------------------------------------------------------------------------------------- domains


def test_domains_are_listed_by_name_and_checked_inside_a_write(stores: Stores) -> None:
    suffix = new_id()[-6:].lower()
    a, b = f"a{suffix}.example", f"b{suffix}.example"
    assert stores.domains.put(b, subdomains=False, now=STAMP) is True
    assert stores.domains.put(a, subdomains=True, now=STAMP) is True
    assert stores.domains.put(b, subdomains=False, now="2027-02-01T00:00:00.000Z") is False
    names = [d.id for d in stores.domains.list()]
    assert names == sorted(names)
    assert {a, b} <= set(names)
    got = stores.domains.get(b)
    assert got is not None
    assert (got.created_at, got.updated_at) == (STAMP, "2027-02-01T00:00:00.000Z")
    user = _created(stores)
    stores.tx.commit(
        [
            stores.domains.offered_op(a, with_subdomain=True),
            *stores.users.change_ops(user, user.changed(domain=a)),
        ]
    )
    _fails(stores, [stores.domains.offered_op(b, with_subdomain=True)], ErrorCode.SUBDOMAIN_NOT_ALLOWED_ERROR)
    _fails(
        stores,
        [stores.domains.offered_op(f"none{suffix}.example", with_subdomain=False)],
        ErrorCode.INVALID_DOMAIN_ERROR,
    )
    assert stores.domains.delete(b) is True
    assert stores.domains.delete(b) is False
    assert stores.domains.get(b) is None


# --------------------------------------------------------------------------------------------- outbox


def test_an_email_is_queued_only_when_its_transaction_commits(stores: Stores) -> None:
    before = stores.outbox_size()
    taken = _created(stores)
    email = Email(to="x@example.com", subject="s", text="t", html="<p>t</p>")
    clash = _user(username=taken.username)
    _fails(
        stores,
        [*stores.users.create_ops(clash), stores.outbox.enqueue_op(email, now=1.0, kind="verify-email")],
        ErrorCode.USER_EXISTS_ERROR,
    )
    assert stores.outbox_size() == before
    stores.tx.commit([stores.outbox.enqueue_op(email, now=1.0, kind="verify-email")])
    assert stores.outbox_size() == before + 1
