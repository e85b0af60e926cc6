"""UserStore contract: claims, lookups, changes, deletion, the login condition and failure counting."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import WriteOp
from tests.contract.builders import LATER, NOW, STAMP, a_session, a_user, tag
from tests.contract.conftest import Stores


def _create(stores: Stores, user: User) -> User:
    stores.tx.commit(stores.users.create_ops(user))
    return user


def _refused(stores: Stores, ops: Sequence[WriteOp], code: ErrorCode) -> None:
    with pytest.raises(NimbusError) as refused:
        stores.tx.commit(ops)
    assert refused.value.code is code


# --- create_ops ------------------------------------------------------------------------------------


def test_create_stores_the_user_and_claims_username_and_email(stores: Stores) -> None:
    fresh = tag()
    user = _create(stores, a_user(username=f"Alice_{fresh}", email=f"Alice.{fresh}@Example.com"))

    assert stores.users.get(user.id) == user
    assert stores.probe.claim_owner("username", user.username) == user.id
    assert stores.probe.claim_owner("email", user.email) == user.id


@pytest.mark.parametrize("taken", ["username", "email"])
@pytest.mark.parametrize("spelling", [str.upper, str.lower, str.swapcase])
def test_create_with_a_taken_claim_in_any_case_is_user_exists_and_writes_nothing(
    stores: Stores, taken: str, spelling: Callable[[str], str]
) -> None:
    first = _create(stores, a_user())
    second = (
        a_user(username=spelling(first.username))
        if taken == "username"
        else a_user(email=spelling(first.email))
    )

    _refused(stores, stores.users.create_ops(second), ErrorCode.USER_EXISTS_ERROR)

    assert stores.users.get(second.id) is None
    other = "email" if taken == "username" else "username"
    assert stores.probe.claim_owner(other, getattr(second, other)) is None
    assert stores.probe.claim_owner(taken, getattr(first, taken)) == first.id


def test_creating_the_same_user_id_twice_is_a_bug_not_a_user_error(stores: Stores) -> None:
    user = _create(stores, a_user())
    again = a_user().changed(id=user.id)

    with pytest.raises(DependencyError):
        stores.tx.commit(stores.users.create_ops(again))

    assert stores.users.get(user.id) == user
    assert stores.probe.claim_owner("username", again.username) is None


# --- find_by_username / find_by_email --------------------------------------------------------------


def test_find_by_username_ignores_case(stores: Stores) -> None:
    user = _create(stores, a_user())

    assert stores.users.find_by_username(user.username.upper()) == user
    assert stores.users.find_by_username(user.username.lower()) == user
    assert stores.users.find_by_username(f"nobody_{tag()}") is None


def test_find_by_email_compares_case_folded_addresses(stores: Stores) -> None:
    domain = f"{tag()}.example"
    user = _create(stores, a_user(email=f"STRASSE@{domain.upper()}"))

    assert stores.users.find_by_email(f"straße@{domain}") == user
    assert stores.users.find_by_email(f"Strasse@{domain}") == user
    assert stores.users.find_by_email(f"strasse@other-{domain}") is None


def test_email_keys_collide_after_case_folding(stores: Stores) -> None:
    domain = f"{tag()}.example"
    _create(stores, a_user(email=f"STRASSE@{domain}"))
    second = a_user(email=f"straße@{domain}")

    _refused(stores, stores.users.create_ops(second), ErrorCode.USER_EXISTS_ERROR)
    assert stores.users.get(second.id) is None


# --- change_ops ------------------------------------------------------------------------------------


def test_username_change_frees_the_old_name_and_claims_the_new(stores: Stores) -> None:
    user = _create(stores, a_user())
    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)

    stores.tx.commit(stores.users.change_ops(user, renamed))

    assert stores.users.get(user.id) == renamed
    assert stores.probe.claim_owner("username", user.username) is None
    assert stores.probe.claim_owner("username", renamed.username) == user.id
    assert stores.users.find_by_username(user.username) is None
    assert stores.users.find_by_username(renamed.username) == renamed
    newcomer = _create(stores, a_user(username=user.username.upper()))
    assert stores.users.find_by_username(user.username) == newcomer


def test_email_change_frees_the_old_address_and_claims_the_new(stores: Stores) -> None:
    user = _create(stores, a_user())
    moved = user.changed(email=f"moved.{tag()}@example.com", updated_at=LATER)

    stores.tx.commit(stores.users.change_ops(user, moved))

    assert stores.users.get(user.id) == moved
    assert stores.probe.claim_owner("email", user.email) is None
    assert stores.probe.claim_owner("email", moved.email) == user.id
    assert stores.users.find_by_email(moved.email.upper()) == moved


def test_changing_only_the_case_of_a_username_keeps_its_claim(stores: Stores) -> None:
    user = _create(stores, a_user())
    shouted = user.changed(username=user.username.upper(), updated_at=LATER)

    stores.tx.commit(stores.users.change_ops(user, shouted))

    assert stores.users.get(user.id) == shouted
    assert stores.probe.claim_owner("username", user.username) == user.id


@pytest.mark.parametrize("field", ["username", "email"])
def test_change_to_a_taken_claim_is_user_exists_and_changes_nothing(stores: Stores, field: str) -> None:
    user = _create(stores, a_user())
    other = _create(stores, a_user())
    wanted = getattr(other, field).swapcase()
    after = user.changed(**{field: wanted, "updated_at": LATER})

    _refused(stores, stores.users.change_ops(user, after), ErrorCode.USER_EXISTS_ERROR)

    assert stores.users.get(user.id) == user
    assert stores.users.get(other.id) == other
    assert stores.probe.claim_owner(field, getattr(user, field)) == user.id
    assert stores.probe.claim_owner(field, wanted) == other.id


def test_change_from_a_stale_username_is_user_changed_not_user_exists(stores: Stores) -> None:
    # The second name is free: a 409 would be a lie. The write is refused as stale, to be rebuilt.
    user = _create(stores, a_user())
    first = user.changed(username=f"First_{tag()}", updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, first))
    second = user.changed(username=f"Second_{tag()}", updated_at=LATER)

    with pytest.raises(UserChangedError):
        stores.tx.commit(stores.users.change_ops(user, second))

    assert stores.users.get(user.id) == first
    assert stores.probe.claim_owner("username", second.username) is None


def test_revoking_from_a_stale_generation_is_invalid_session(stores: Stores) -> None:
    """Two "revoke all but mine" from two sessions: the second was revoked by the first."""
    user = _create(stores, a_user())
    first = user.changed(session_generation=user.session_generation + 1, updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, first))

    second = user.changed(session_generation=user.session_generation + 1)
    _refused(stores, stores.users.change_ops(user, second), ErrorCode.INVALID_SESSION_ERROR)

    # A change that does not touch the generation is not refused for it.
    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, renamed))
    stored = stores.users.get(user.id)
    assert stored is not None
    assert stored.session_generation == first.session_generation
    assert stored.username == renamed.username


def test_change_from_a_stale_password_hash_is_invalid_password(stores: Stores) -> None:
    user = _create(stores, a_user(password_hash="hash-0"))
    stores.tx.commit(stores.users.change_ops(user, user.changed(password_hash="hash-1", updated_at=LATER)))

    stale = user.changed(password_hash="hash-2", updated_at=LATER)
    _refused(stores, stores.users.change_ops(user, stale), ErrorCode.INVALID_PASSWORD_ERROR)

    stored = stores.users.get(user.id)
    assert stored is not None
    assert stored.password_hash == "hash-1"


@pytest.mark.parametrize("change", ["username", "domain"])
def test_change_of_a_deleted_user_is_invalid_session_and_writes_nothing(stores: Stores, change: str) -> None:
    user = _create(stores, a_user())
    stores.tx.commit(stores.users.delete_ops(user))
    value = f"Renamed_{tag()}" if change == "username" else "other.test"
    after = user.changed(**{change: value, "updated_at": LATER})

    _refused(stores, stores.users.change_ops(user, after), ErrorCode.INVALID_SESSION_ERROR)

    assert stores.users.get(user.id) is None
    assert stores.probe.claim_owner("username", after.username) is None


def test_change_that_changes_nothing_writes_nothing(stores: Stores) -> None:
    user = _create(stores, a_user())
    stores.tx.commit(stores.users.delete_ops(user))

    stores.tx.commit(stores.users.change_ops(user, user))

    assert stores.users.get(user.id) is None


def test_change_writes_only_changed_attributes_so_a_concurrent_ban_survives(stores: Stores) -> None:
    user = _create(stores, a_user())
    banned = user.changed(banned_at=LATER, ban_reason="spam", updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, banned))
    stores.users.count_auth_failure(user.id, limit=10, window=900, now=NOW)

    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)  # from the pre-ban read
    stores.tx.commit(stores.users.change_ops(user, renamed))

    stored = stores.users.get(user.id)
    assert stored is not None
    assert (stored.username, stored.banned_at, stored.ban_reason) == (renamed.username, LATER, "spam")
    assert stored.auth_failures == 1


def _revoke_sessions(stores: Stores, user: User) -> User:
    """Every session of ``user`` revoked (a ban, a password set or reset, a revoke-all)."""
    revoked = user.changed(session_generation=user.session_generation + 1, updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, revoked))
    return revoked


def test_an_own_change_holding_on_its_sessions_is_stale_once_they_were_revoked(stores: Stores) -> None:
    """A rename does not touch the generation, but one made by a caller holds on the generation its
    session was read with: revoked meanwhile, it is stale (to be judged on a fresh read)."""
    user = _create(stores, a_user())
    revoked = _revoke_sessions(stores, user)
    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)

    with pytest.raises(UserChangedError):
        stores.tx.commit(
            stores.users.change_ops(user, renamed, rebuilt_when_stale=True, sessions_unrevoked=True)
        )

    assert stores.users.get(user.id) == revoked
    assert stores.probe.claim_owner("username", renamed.username) is None
    fresh = revoked.changed(username=renamed.username)
    stores.tx.commit(
        stores.users.change_ops(revoked, fresh, rebuilt_when_stale=True, sessions_unrevoked=True)
    )
    assert stores.users.get(user.id) == fresh


def test_a_change_of_another_user_holding_on_the_callers_sessions_is_stale_once_they_were_revoked(
    stores: Stores,
) -> None:
    """Staff changing another account: the write holds on the staff member's generation too."""
    caller, other = _create(stores, a_user()), _create(stores, a_user())
    revoked = _revoke_sessions(stores, caller)
    renamed = other.changed(username=f"Renamed_{tag()}", updated_at=LATER)
    ops = stores.users.change_ops(other, renamed, rebuilt_when_stale=True)

    with pytest.raises(UserChangedError):
        stores.tx.commit([*ops, stores.users.sessions_unrevoked_op(caller)])

    assert stores.users.get(other.id) == other
    assert stores.probe.claim_owner("username", renamed.username) is None
    stores.tx.commit([*ops, stores.users.sessions_unrevoked_op(revoked)])
    assert stores.users.get(other.id) == renamed
    assert stores.users.get(caller.id) == revoked  # only checked, never written


def test_a_change_holding_on_a_deleted_callers_sessions_is_stale(stores: Stores) -> None:
    caller, other = _create(stores, a_user()), _create(stores, a_user())
    stores.tx.commit(stores.users.delete_ops(caller))
    banned = other.changed(banned_at=LATER, ban_reason="spam", updated_at=LATER)

    with pytest.raises(UserChangedError):
        stores.tx.commit(
            [*stores.users.change_ops(other, banned), stores.users.sessions_unrevoked_op(caller)]
        )

    assert stores.users.get(other.id) == other


def test_change_can_clear_an_attribute(stores: Stores) -> None:
    user = _create(stores, a_user().changed(verified_at=STAMP, subdomain="mine"))

    cleared = user.changed(verified_at=None, subdomain=None, updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, cleared))

    assert stores.users.get(user.id) == cleared


# --- delete_ops ------------------------------------------------------------------------------------


def test_delete_removes_the_user_and_frees_both_claims(stores: Stores) -> None:
    user = _create(stores, a_user())

    stores.tx.commit(stores.users.delete_ops(user))

    assert stores.users.get(user.id) is None
    assert stores.users.find_by_username(user.username) is None
    assert stores.users.find_by_email(user.email) is None
    assert stores.probe.claim_owner("username", user.username) is None
    assert stores.probe.claim_owner("email", user.email) is None
    again = _create(stores, a_user(username=user.username, email=user.email))
    assert stores.users.find_by_username(user.username) == again


def test_retrying_a_delete_after_the_name_was_taken_again_is_refused_and_removes_nothing(
    stores: Stores,
) -> None:
    user = _create(stores, a_user())
    stores.tx.commit(stores.users.delete_ops(user))
    successor = _create(stores, a_user(username=user.username, email=user.email))

    with pytest.raises(NimbusError) as gone:  # the user is gone (and the claims are another's)
        stores.tx.commit(stores.users.delete_ops(user))

    assert gone.value.code is ErrorCode.INVALID_SESSION_ERROR

    assert stores.users.get(successor.id) == successor
    assert stores.probe.claim_owner("username", user.username) == successor.id
    assert stores.probe.claim_owner("email", user.email) == successor.id


@pytest.mark.parametrize("field", ["username", "email"])
def test_deleting_from_a_read_before_a_rename_is_refused_so_the_new_claim_keeps_its_user(
    stores: Stores, field: str
) -> None:
    user = _create(stores, a_user())
    new_value = f"Renamed_{tag()}" if field == "username" else f"renamed_{tag()}@example.com"
    renamed = user.changed(**{field: new_value}, updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, renamed))

    with pytest.raises(UserChangedError):
        stores.tx.commit(stores.users.delete_ops(user))  # `user` is the read from before the change

    assert stores.users.get(user.id) == renamed
    assert stores.probe.claim_owner(field, new_value) == user.id
    stores.tx.commit(stores.users.delete_ops(renamed))  # from a fresh read it works
    assert stores.probe.claim_owner(field, new_value) is None
    assert stores.probe.claim_owner(field, getattr(user, field)) is None


def test_deleting_from_a_stale_read_is_refused_so_no_claim_is_left_orphaned(stores: Stores) -> None:
    user = _create(stores, a_user())
    renamed = user.changed(username=f"Renamed_{tag()}", updated_at=LATER)
    stores.tx.commit(stores.users.change_ops(user, renamed))
    squatter = _create(stores, a_user(username=user.username))

    with pytest.raises(UserChangedError):
        stores.tx.commit(stores.users.delete_ops(user))  # `user` is the read from before the rename

    assert stores.users.get(user.id) == renamed
    assert stores.probe.claim_owner("username", renamed.username) == user.id
    assert stores.probe.claim_owner("username", user.username) == squatter.id
    stores.tx.commit(stores.users.delete_ops(renamed))  # from a fresh read it works
    assert stores.probe.claim_owner("username", renamed.username) is None


# --- credentials_unchanged_op ----------------------------------------------------------------------


def test_login_condition_holds_for_an_unchanged_user(stores: Stores) -> None:
    user = _create(stores, a_user())
    session = a_session(user)

    op = stores.users.credentials_unchanged_op(user, new_password_hash=None, now=NOW, failure_limit=3)
    stores.tx.commit([stores.sessions.put_op(session), op])

    assert stores.users.get(user.id) == user
    assert stores.sessions.get_with_user(user.id, session.id)[0] == session


def _ban(stores: Stores, user: User) -> None:
    stores.tx.commit(stores.users.change_ops(user, user.changed(banned_at=LATER, ban_reason="x")))


def _change_hash(stores: Stores, user: User) -> None:
    stores.tx.commit(stores.users.change_ops(user, user.changed(password_hash="hash-new")))


def _lock(stores: Stores, user: User) -> None:
    for _ in range(3):
        stores.users.count_auth_failure(user.id, limit=3, window=900, now=NOW)


def _delete(stores: Stores, user: User) -> None:
    stores.tx.commit(stores.users.delete_ops(user))


@pytest.mark.parametrize("rehash", [None, "hash-rehashed"])
@pytest.mark.parametrize("meanwhile", [_ban, _change_hash, _lock, _delete], ids=lambda f: f.__name__)
def test_login_condition_refuses_a_banned_locked_changed_or_deleted_user(
    stores: Stores, meanwhile: Callable[[Stores, User], None], rehash: str | None
) -> None:
    user = _create(stores, a_user())
    meanwhile(stores, user)
    before = stores.users.get(user.id)
    session = a_session(user)

    op = stores.users.credentials_unchanged_op(user, new_password_hash=rehash, now=NOW, failure_limit=3)
    _refused(stores, [stores.sessions.put_op(session), op], ErrorCode.INVALID_PASSWORD_ERROR)

    assert stores.users.get(user.id) == before
    assert stores.sessions.get_with_user(user.id, session.id)[0] is None


def test_login_condition_holds_again_once_the_lock_window_ends(stores: Stores) -> None:
    user = _create(stores, a_user())
    _lock(stores, user)

    op = stores.users.credentials_unchanged_op(user, new_password_hash=None, now=NOW + 900, failure_limit=3)
    stores.tx.commit([op])


def test_login_condition_stores_a_rehashed_password(stores: Stores) -> None:
    user = _create(stores, a_user())

    op = stores.users.credentials_unchanged_op(user, new_password_hash="hash-argon", now=NOW, failure_limit=3)
    stores.tx.commit([op])

    assert stores.users.get(user.id) == user.changed(password_hash="hash-argon")


# --- count_auth_failure ----------------------------------------------------------------------------


def test_auth_failures_count_up_to_the_limit_then_refuse(stores: Stores) -> None:
    user = _create(stores, a_user())

    states = [stores.users.count_auth_failure(user.id, limit=3, window=900, now=NOW + i) for i in range(4)]

    assert [(s.allowed, s.count) for s in states if s] == [(True, 1), (True, 2), (True, 3), (False, 3)]
    assert {s.reset_at for s in states if s} == {int(NOW) + 900}
    stored = stores.users.get(user.id)
    assert stored is not None
    assert (stored.auth_failures, stored.auth_failures_reset_at) == (3, int(NOW) + 900)


def test_auth_failure_window_restarts_when_it_ends(stores: Stores) -> None:
    user = _create(stores, a_user())
    _lock(stores, user)

    state = stores.users.count_auth_failure(user.id, limit=3, window=900, now=NOW + 900)

    assert state is not None
    assert (state.allowed, state.count, state.reset_at) == (True, 1, int(NOW) + 1800)


def test_auth_failure_of_a_missing_user_is_none_and_creates_nothing(stores: Stores) -> None:
    ghost = a_user()

    assert stores.users.count_auth_failure(ghost.id, limit=3, window=900, now=NOW) is None
    assert stores.users.get(ghost.id) is None
