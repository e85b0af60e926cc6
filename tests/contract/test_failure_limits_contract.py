"""The stores behind the failure limits (CONTRACT section 8), on fakes and moto alike: a session's
own reverification count, a recovery token's wrong answers, and the login condition a signed-in
session's rehash rides on without the login lock."""

from __future__ import annotations

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import RecoveryToken, User
from nimbus_core.domain.secret_kinds import RECOVERY
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.tokens import hash_secret
from tests.contract.builders import NOW, a_session, a_user
from tests.contract.conftest import Stores


def _user(stores: Stores) -> User:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    return user


# --- a session's reverification failures -----------------------------------------------------------


def test_reverify_failures_count_on_the_session_up_to_the_limit_then_refuse(stores: Stores) -> None:
    user = _user(stores)
    session, other = a_session(user), a_session(user)
    stores.tx.commit([stores.sessions.put_op(session), stores.sessions.put_op(other)])

    states = [
        stores.sessions.count_reverify_failure(user.id, session.id, limit=3, window=900, now=NOW + i)
        for i in range(4)
    ]

    assert [(s.allowed, s.count) for s in states if s] == [(True, 1), (True, 2), (True, 3), (False, 3)]
    assert {s.reset_at for s in states if s} == {int(NOW) + 900}
    stored, read_user = stores.sessions.get_with_user(user.id, session.id)
    assert stored == session.changed(reverify_failures=3, reverify_failures_reset_at=int(NOW) + 900)
    assert read_user == user  # the login lock is another count, untouched
    assert stores.sessions.get_with_user(user.id, other.id)[0] == other  # and so is every other session


def test_a_session_window_restarts_when_it_ends(stores: Stores) -> None:
    user = _user(stores)
    session = a_session(user)
    stores.tx.commit([stores.sessions.put_op(session)])
    for _ in range(3):
        stores.sessions.count_reverify_failure(user.id, session.id, limit=3, window=900, now=NOW)

    state = stores.sessions.count_reverify_failure(user.id, session.id, limit=3, window=900, now=NOW + 900)

    assert state is not None
    assert (state.allowed, state.count, state.reset_at) == (True, 1, int(NOW) + 1800)


def test_counting_on_a_session_that_is_gone_creates_nothing(stores: Stores) -> None:
    user = _user(stores)
    missing = new_id()

    assert stores.sessions.count_reverify_failure(user.id, missing, limit=3, window=900, now=NOW) is None
    assert stores.sessions.get_with_user(user.id, missing) == (None, user)


# --- a recovery token's wrong answers ---------------------------------------------------------------


def _recovery_token(stores: Stores, user: User) -> RecoveryToken:
    token = RecoveryToken(
        hash=hash_secret(new_id()),
        user_id=user.id,
        email=user.email,
        password_digest=hash_secret(user.password_hash),
        created_at=iso(NOW),
        exp=int(NOW) + 1800,
    )
    stores.tx.commit([stores.tokens.put_op(RECOVERY, token)])
    return token


def test_wrong_answers_count_on_a_recovery_token_up_to_the_limit(stores: Stores) -> None:
    user = _user(stores)
    token = _recovery_token(stores, user)

    counts = [stores.tokens.count_wrong_answer(RECOVERY, token.hash, limit=3) for _ in range(4)]

    assert counts == [1, 2, 3, None]
    assert stores.tokens.read_recovery(token.hash, user.id)[0] == token.changed(attempts=3)
    assert stores.tokens.count_wrong_answer(RECOVERY, hash_secret(new_id()), limit=3) is None  # unknown


def test_a_recovery_token_at_its_limit_cannot_be_spent(stores: Stores) -> None:
    user = _user(stores)
    spent, voided = _recovery_token(stores, user), _recovery_token(stores, user)
    stores.tokens.count_wrong_answer(RECOVERY, spent.hash, limit=3)
    for _ in range(3):
        stores.tokens.count_wrong_answer(RECOVERY, voided.hash, limit=3)

    stores.tx.commit([stores.tokens.take_op(RECOVERY, spent.hash, max_attempts=3)])
    with pytest.raises(NimbusError) as refused:
        stores.tx.commit([stores.tokens.take_op(RECOVERY, voided.hash, max_attempts=3)])

    assert refused.value.code is ErrorCode.INVALID_RECOVERY_TOKEN_ERROR
    assert stores.tokens.read_recovery(spent.hash, user.id)[0] is None
    assert stores.tokens.read_recovery(voided.hash, user.id)[0] is not None


# --- the rehash of a signed-in session ------------------------------------------------------------


def test_without_a_failure_limit_the_credentials_condition_ignores_the_login_lock(stores: Stores) -> None:
    user = _user(stores)
    for _ in range(3):
        stores.users.count_auth_failure(user.id, limit=3, window=900, now=NOW)

    op = stores.users.credentials_unchanged_op(
        user, new_password_hash="hash-argon", now=NOW, failure_limit=None
    )
    stores.tx.commit([op])

    stored = stores.users.get(user.id)
    assert stored is not None
    assert (stored.password_hash, stored.auth_failures) == ("hash-argon", 3)
