"""A challenge answer committed with the change it authorises (Transactor.commit_joined): the two
often write the same user item, which DynamoDB allows only once per transaction, so the adapter
merges such writes; fakes and DynamoDB must end in the same state and raise the same errors."""

from __future__ import annotations

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Challenge, SecondFactor, User
from nimbus_core.domain.secret_kinds import CHALLENGE
from nimbus_core.platform.ids import new_id
from tests.contract.builders import LATER, NOW, STAMP, a_session, a_user
from tests.contract.conftest import Stores


def _enrolled(stores: Stores) -> tuple[User, SecondFactor]:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    factor = SecondFactor(
        id=new_id(),
        type="totp",
        name="Phone",
        created_at=STAMP,
        updated_at=STAMP,
        secret="JBSWY3DPEHPK3PXP" * 2,
    )
    stores.tx.commit([stores.users.add_factor_op(user, factor, max_factors=10, backup_codes=["a" * 64])])
    stored = stores.users.get(user.id)
    assert stored is not None
    return stored, factor


def _challenge(stores: Stores, user: User) -> Challenge:
    challenge = Challenge(
        hash=new_id().lower() * 2,
        user_id=user.id,
        endpoint="PUT /users/me/username",
        created_at=STAMP,
        exp=int(NOW) + 300,
    )
    stores.tx.commit([stores.tokens.put_op(CHALLENGE, challenge)])
    return challenge


def _stored(stores: Stores, user: User) -> User:
    found = stores.users.get(user.id)
    assert found is not None
    return found


def test_an_answer_and_a_change_of_the_same_user_land_together(stores: Stores) -> None:
    user, factor = _enrolled(stores)
    challenge = _challenge(stores, user)
    renamed = user.changed(username=f"n{new_id()[-10:].lower()}", updated_at=LATER)
    answer = [
        stores.tokens.take_op(CHALLENGE, challenge.hash, max_attempts=5),
        stores.users.use_totp_step_op(user, factor.id, 7, STAMP),
    ]

    stores.tx.commit_joined(answer, stores.users.change_ops(user, renamed))

    after = _stored(stores, user)
    assert after.username == renamed.username
    assert after.second_factors[factor.id].last_step == 7
    assert stores.tokens.read_with_user(CHALLENGE, challenge.hash, user.id)[0] is None
    assert stores.users.find_by_username(renamed.username) is not None


def test_a_spent_answer_stops_the_change(stores: Stores) -> None:
    user, factor = _enrolled(stores)
    stores.tx.commit([stores.users.use_totp_step_op(user, factor.id, 7, STAMP)])  # step 7 used meanwhile
    renamed = user.changed(username=f"n{new_id()[-10:].lower()}")

    with pytest.raises(NimbusError) as refused:
        stores.tx.commit_joined(
            [stores.users.use_totp_step_op(user, factor.id, 7, STAMP)], stores.users.change_ops(user, renamed)
        )

    assert refused.value.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert _stored(stores, user).username == user.username
    assert stores.users.find_by_username(renamed.username) is None


def test_a_refused_change_leaves_the_answer_unspent_when_they_share_no_item(stores: Stores) -> None:
    user, _ = _enrolled(stores)
    taken = a_user()
    stores.tx.commit(stores.users.create_ops(taken))
    challenge = _challenge(stores, user)
    clash = user.changed(username=taken.username)

    with pytest.raises(NimbusError) as refused:
        stores.tx.commit_joined(
            [stores.tokens.take_op(CHALLENGE, challenge.hash, max_attempts=5)],
            stores.users.change_ops(user, clash),
        )

    assert refused.value.code is ErrorCode.USER_EXISTS_ERROR
    assert stores.tokens.read_with_user(CHALLENGE, challenge.hash, user.id)[0] is not None


def test_an_answer_with_the_deletion_of_its_user(stores: Stores) -> None:
    user, factor = _enrolled(stores)
    session = a_session(user)
    stores.tx.commit([stores.sessions.put_op(session)])

    stores.tx.commit_joined(
        [stores.users.use_totp_step_op(user, factor.id, 9, STAMP)],
        [*stores.users.delete_ops(user), stores.sessions.delete_op(user.id, session.id)],
    )

    assert stores.users.get(user.id) is None


def test_an_answer_with_the_removal_of_the_factor_it_used(stores: Stores) -> None:
    user, factor = _enrolled(stores)

    stores.tx.commit_joined(
        [stores.users.use_totp_step_op(user, factor.id, 9, STAMP)],
        [stores.users.remove_factors_op(user, [factor.id])],
    )

    after = _stored(stores, user)
    assert after.second_factors == {}
    assert after.backup_codes == {}


def test_a_backup_code_answer_with_a_new_set_of_codes(stores: Stores) -> None:
    user, _ = _enrolled(stores)

    stores.tx.commit_joined(
        [stores.users.use_backup_code_op(user, "a" * 64, LATER)],
        [stores.users.set_backup_codes_op(user, ["b" * 64, "c" * 64])],
    )

    after = _stored(stores, user)
    assert set(after.backup_codes) == {"b" * 64, "c" * 64}
    assert after.two_factor_backup_code_used_at == LATER
