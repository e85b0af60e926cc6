"""Second factors live in the user item: enrol, remove, replay guards, backup codes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.factors.kinds import held_kinds
from nimbus_core.platform.ids import new_id
from tests.contract.builders import LATER, STAMP, a_session, a_user
from tests.contract.conftest import Stores


def _types(user: User) -> list[str]:
    """What a challenge offers ``user`` (its ``types``), from the factors as stored."""
    return [kind.name for kind in held_kinds(user)]


def _create(stores: Stores) -> User:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    return user


def _stored(stores: Stores, user: User) -> User:
    found = stores.users.get(user.id)
    assert found is not None
    return found


def _refused(stores: Stores, ops: Sequence[WriteOp], code: ErrorCode) -> None:
    with pytest.raises(NimbusError) as refused:
        stores.tx.commit(ops)
    assert refused.value.code is code


def a_totp(name: str = "Phone") -> SecondFactor:
    return SecondFactor(
        id=new_id(), type="totp", name=name, created_at=STAMP, updated_at=STAMP, secret="JBSWY3DPEHPK3PXP" * 2
    )


def a_key(name: str = "YubiKey") -> SecondFactor:
    return SecondFactor(
        id=new_id(),
        type="webauthn",
        name=name,
        created_at=STAMP,
        updated_at=STAMP,
        credential_id="AQIDBA",
        public_key="pQECAyYgASFYIA",
        sign_count=3,
    )


def test_a_new_user_has_no_factors_and_no_backup_codes(stores: Stores) -> None:
    user = _stored(stores, _create(stores))

    assert (user.second_factors, user.backup_codes, user.second_factor_count) == ({}, {}, 0)
    assert _types(user) == []


def test_enrolled_factors_come_back_with_the_user_and_its_session(stores: Stores) -> None:
    user = _create(stores)
    totp, key = a_totp(), a_key()
    session = a_session(user)
    stores.tx.commit([stores.sessions.put_op(session)])

    stores.tx.commit([stores.users.add_factor_op(user, totp, max_factors=10)])
    stores.tx.commit([stores.users.add_factor_op(user, key, max_factors=10)])

    read = stores.sessions.get_with_user(user.id, session.id)[1]
    assert read is not None
    assert read.second_factors == {totp.id: totp, key.id: key}
    assert _types(read) == ["totp", "webauthn"]
    assert "secret" not in str(read.to_public())


def test_a_sealed_seed_is_kept_beside_its_factor_and_goes_with_it(stores: Stores) -> None:
    user = _create(stores)
    totp = a_totp().changed(secret=None)
    other = a_totp("Tablet").changed(secret=None)
    stores.tx.commit([stores.users.add_factor_op(user, totp, max_factors=10, sealed_secret="kms1.a")])
    stores.tx.commit([stores.users.add_factor_op(user, other, max_factors=10, sealed_secret="kms1.b")])

    read = _stored(stores, user)
    assert read.totp_secrets == {totp.id: "kms1.a", other.id: "kms1.b"}
    assert read.second_factors[totp.id].secret is None
    stores.tx.commit([stores.users.remove_factors_op(read, [totp.id])])
    assert _stored(stores, user).totp_secrets == {other.id: "kms1.b"}
    stores.tx.commit([stores.users.remove_factors_op(_stored(stores, user), [other.id])])
    assert _stored(stores, user).totp_secrets == {}


def test_enrolment_is_refused_beyond_the_maximum_and_for_a_deleted_user(stores: Stores) -> None:
    user = _create(stores)
    stores.tx.commit([stores.users.add_factor_op(user, a_totp(), max_factors=1)])

    _refused(
        stores, [stores.users.add_factor_op(user, a_totp(), max_factors=1)], ErrorCode.INVALID_FIELDS_ERROR
    )
    stores.tx.commit(stores.users.delete_ops(user))
    _refused(
        stores, [stores.users.add_factor_op(user, a_totp(), max_factors=9)], ErrorCode.INVALID_SESSION_ERROR
    )


def test_a_totp_step_is_accepted_once_and_never_an_older_one(stores: Stores) -> None:
    user = _create(stores)
    totp = a_totp()
    stores.tx.commit([stores.users.add_factor_op(user, totp, max_factors=10)])

    assert _stored(stores, user).second_factors[totp.id].used_at is None
    stores.tx.commit([stores.users.use_totp_step_op(user, totp.id, 1000, "2026-11-21T22:01:11.525Z")])
    assert _stored(stores, user).second_factors[totp.id].used_at == "2026-11-21T22:01:11.525Z"
    for step in (1000, 999):
        _refused(
            stores,
            [stores.users.use_totp_step_op(user, totp.id, step, STAMP)],
            ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
        )
    stores.tx.commit([stores.users.use_totp_step_op(user, totp.id, 1001, STAMP)])

    assert _stored(stores, user).second_factors[totp.id].last_step == 1001
    assert _stored(stores, user).second_factors[totp.id].used_at == STAMP  # the latest answer's
    _refused(
        stores,
        [stores.users.use_totp_step_op(user, new_id(), 5000, STAMP)],
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
    )


def test_a_signature_counter_moves_only_from_the_value_read(stores: Stores) -> None:
    user = _create(stores)
    key = a_key()
    stores.tx.commit([stores.users.add_factor_op(user, key, max_factors=10)])

    stores.tx.commit([stores.users.use_sign_count_op(user, key.id, seen=3, new=4, used_at=STAMP)])
    _refused(
        stores,
        [stores.users.use_sign_count_op(user, key.id, seen=3, new=5, used_at=STAMP)],
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
    )

    assert _stored(stores, user).second_factors[key.id].sign_count == 4
    assert _stored(stores, user).second_factors[key.id].used_at == STAMP


def test_backup_codes_are_replaced_as_a_set_and_spent_once(stores: Stores) -> None:
    user = _create(stores)
    stores.tx.commit([stores.users.add_factor_op(user, a_totp(), max_factors=10)])
    stores.tx.commit([stores.users.set_backup_codes_op(user, ["a" * 64, "b" * 64])])
    stores.tx.commit([stores.users.set_backup_codes_op(user, ["c" * 64, "d" * 64])])

    _refused(
        stores,
        [stores.users.use_backup_code_op(user, "a" * 64, LATER)],
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
    )
    stores.tx.commit([stores.users.use_backup_code_op(user, "c" * 64, LATER)])
    _refused(
        stores,
        [stores.users.use_backup_code_op(user, "c" * 64, LATER)],
        ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,
    )

    stored = _stored(stores, user)
    assert stored.backup_codes == {"d" * 64: True}
    assert stored.two_factor_backup_code_used_at == LATER
    assert _types(stored) == ["totp", "backup"]


def test_removing_factors_needs_every_one_and_the_last_takes_the_backup_codes(stores: Stores) -> None:
    user = _create(stores)
    totp, key = a_totp(), a_key()
    stores.tx.commit([stores.users.add_factor_op(user, f, max_factors=10) for f in (totp,)])
    stores.tx.commit([stores.users.add_factor_op(user, key, max_factors=10)])
    stores.tx.commit([stores.users.set_backup_codes_op(user, ["e" * 64])])
    user = _stored(stores, user)

    _refused(
        stores,
        [stores.users.remove_factors_op(user, [totp.id, new_id()])],
        ErrorCode.INVALID_SECOND_FACTOR_ERROR,
    )
    stores.tx.commit([stores.users.remove_factors_op(user, [totp.id])])
    assert set(_stored(stores, user).second_factors) == {key.id}
    assert _stored(stores, user).backup_codes == {"e" * 64: True}

    user = _stored(stores, user)
    stores.tx.commit([stores.users.remove_factors_op(user, [key.id])])
    emptied = _stored(stores, user)
    assert (emptied.second_factors, emptied.backup_codes) == ({}, {})


def test_removing_the_last_factor_is_refused_when_one_was_enrolled_meanwhile(stores: Stores) -> None:
    user = _create(stores)
    totp = a_totp()
    stores.tx.commit([stores.users.add_factor_op(user, totp, max_factors=10)])
    stores.tx.commit([stores.users.set_backup_codes_op(user, ["f" * 64])])
    stale = _stored(stores, user)
    stores.tx.commit([stores.users.add_factor_op(user, a_key(), max_factors=10)])  # enrolled meanwhile

    _refused(
        stores, [stores.users.remove_factors_op(stale, [totp.id])], ErrorCode.INVALID_SECOND_FACTOR_ERROR
    )
    assert _stored(stores, user).backup_codes == {"f" * 64: True}


def test_an_account_change_never_touches_the_factors(stores: Stores) -> None:
    user = _create(stores)
    stale = _stored(stores, user)
    totp = a_totp()
    stores.tx.commit([stores.users.add_factor_op(user, totp, max_factors=10)])  # after `stale` was read

    stores.tx.commit(stores.users.change_ops(stale, stale.changed(domain="other.test")))

    assert set(_stored(stores, user).second_factors) == {totp.id}


def test_a_factor_and_its_first_backup_codes_are_enrolled_in_one_write(stores: Stores) -> None:
    user = _create(stores)
    totp = a_totp()

    stores.tx.commit(
        [stores.users.add_factor_op(user, totp, max_factors=10, backup_codes=["g" * 64, "h" * 64])]
    )

    stored = _stored(stores, user)
    assert set(stored.second_factors) == {totp.id}
    assert stored.backup_codes == {"g" * 64: True, "h" * 64: True}
