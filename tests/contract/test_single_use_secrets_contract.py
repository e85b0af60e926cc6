"""ChallengeStore contract: second-factor challenges and pending enrolments."""

from __future__ import annotations

import pytest

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Challenge, PendingFactor, User
from nimbus_core.domain.secret_kinds import CHALLENGE, ENROLMENT
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.tokens import hash_secret
from tests.contract.builders import NOW, STAMP, a_user
from tests.contract.conftest import Stores


def _user(stores: Stores) -> User:
    user = a_user()
    stores.tx.commit(stores.users.create_ops(user))
    return user


def a_challenge(user: User, **values: object) -> Challenge:
    fields: dict[str, object] = {
        "hash": hash_secret(new_id()),
        "user_id": user.id,
        "session_id": new_id(),
        "endpoint": "PUT /users/me/username",
        "created_at": STAMP,
        "exp": int(NOW) + 300,
        **values,
    }
    return Challenge(**fields)  # type: ignore[arg-type]


def test_a_challenge_comes_back_with_its_user_in_one_read(stores: Stores) -> None:
    user = _user(stores)
    challenge = a_challenge(user, webauthn_challenge="q83vEjRWeJA")
    stores.tx.commit([stores.tokens.put_op(CHALLENGE, challenge)])

    assert stores.tokens.read_with_user(CHALLENGE, challenge.hash, user.id) == (challenge, user)
    assert stores.tokens.read_with_user(CHALLENGE, hash_secret(new_id()), user.id) == (None, user)


def test_a_challenge_is_used_once(stores: Stores) -> None:
    user = _user(stores)
    challenge = a_challenge(user)
    stores.tx.commit([stores.tokens.put_op(CHALLENGE, challenge)])

    stores.tx.commit([stores.tokens.take_op(CHALLENGE, challenge.hash, max_attempts=5)])

    with pytest.raises(NimbusError) as again:
        stores.tx.commit([stores.tokens.take_op(CHALLENGE, challenge.hash, max_attempts=5)])
    assert again.value.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert stores.tokens.read_with_user(CHALLENGE, challenge.hash, user.id)[0] is None


def test_wrong_answers_are_counted_and_the_fifth_kills_the_challenge(stores: Stores) -> None:
    user = _user(stores)
    challenge = a_challenge(user)
    stores.tx.commit([stores.tokens.put_op(CHALLENGE, challenge)])

    counts = [stores.tokens.count_wrong_answer(CHALLENGE, challenge.hash) for _ in range(5)]

    assert counts == [1, 2, 3, 4, 5]
    with pytest.raises(NimbusError) as dead:
        stores.tx.commit([stores.tokens.take_op(CHALLENGE, challenge.hash, max_attempts=5)])
    assert dead.value.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    assert stores.tokens.count_wrong_answer(CHALLENGE, hash_secret(new_id())) is None


def test_a_pending_enrolment_is_stored_read_and_used_once(stores: Stores) -> None:
    user = _user(stores)
    pending = PendingFactor(
        hash=hash_secret(new_id()),
        user_id=user.id,
        session_id=new_id(),
        type="totp",
        secret="JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP",
        created_at=STAMP,
        exp=int(NOW) + 600,
    )
    stores.tx.commit([stores.tokens.put_op(ENROLMENT, pending)])

    assert stores.tokens.read(ENROLMENT, pending.hash) == pending
    stores.tx.commit([stores.tokens.take_op(ENROLMENT, pending.hash)])
    assert stores.tokens.read(ENROLMENT, pending.hash) is None
    with pytest.raises(NimbusError) as again:
        stores.tx.commit([stores.tokens.take_op(ENROLMENT, pending.hash)])
    assert again.value.code is ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
