"""Records map to and from DynamoDB items by their fields' camelCase names, nested records included."""

from __future__ import annotations

import dataclasses

import pytest

from nimbus_core.adapters.items import read_record, record_item, stored_name, stored_values
from nimbus_core.adapters.sessions import session_item
from nimbus_core.adapters.users import user_item
from nimbus_core.domain.models import (
    Challenge,
    Domain,
    PendingFactor,
    SecondFactor,
    Session,
    User,
    VerificationToken,
)
from tests.samples import STAMP, sample_user

RECORDS = (SecondFactor, User, Session, VerificationToken, Challenge, PendingFactor, Domain)


def _user_with_factors() -> User:
    totp = SecondFactor(
        id="f1", type="totp", name="Phone", created_at=STAMP, updated_at=STAMP, secret="SEED", last_step=7
    )
    key = SecondFactor(
        id="f2",
        type="webauthn",
        name="Key",
        created_at=STAMP,
        updated_at=STAMP,
        credential_id="c",
        public_key="p",
    )
    return sample_user("u1", "alice").changed(
        second_factors={"f1": totp, "f2": key},
        backup_codes={"h1": True},
        verified_at=STAMP,
        auth_failures=2,
        auth_failures_reset_at=1_900_000_000,
    )


def test_a_user_with_its_factors_round_trips_through_its_item() -> None:
    user = _user_with_factors()
    assert read_record(User, user_item(user)) == user


def test_stored_names_are_the_fields_in_camel_case() -> None:
    assert stored_name("password_hash") == "passwordHash"
    assert stored_name("two_factor_backup_code_used_at") == "twoFactorBackupCodeUsedAt"
    assert stored_name("id") == "id"


def test_none_fields_are_not_stored_so_conditions_can_test_their_absence() -> None:
    item = user_item(sample_user("u1", "alice"))
    assert "bannedAt" not in item
    assert "verifiedAt" not in item
    factor = stored_values(_user_with_factors())["secondFactors"]["f1"]
    assert "credentialId" not in factor
    assert factor["lastStep"] == 7


def test_nested_records_are_stored_as_maps_under_their_ids() -> None:
    item = user_item(_user_with_factors())
    assert item["secondFactors"]["M"]["f2"]["M"]["credentialId"] == {"S": "c"}
    assert item["backupCodes"] == {"M": {"h1": {"BOOL": True}}}


def test_key_and_unknown_attributes_are_ignored_and_absent_fields_take_their_defaults() -> None:
    item = {
        "pk": {"S": "DOMAIN#files.test"},
        "someday": {"S": "a later version's attribute"},
        "id": {"S": "files.test"},
        "createdAt": {"S": STAMP},
        "updatedAt": {"S": STAMP},
    }
    assert read_record(Domain, item) == Domain(id="files.test", created_at=STAMP, updated_at=STAMP)


def test_excluded_fields_and_extra_keys_shape_a_session_item() -> None:
    session = Session(
        user_id="u1", id="s1", secret_hash="h", exp=10, created_at=STAMP, updated_at=STAMP, used_at=STAMP
    )
    item = session_item(session)
    assert "id" not in item
    assert item["sessionId"] == {"S": "s1"}
    # A session that never failed a reverification stores no count: absent attributes read as 0.
    uncounted = frozenset({"id", "exp", "reverify_failures", "reverify_failures_reset_at"})
    assert record_item(session, exclude=uncounted).keys() == item.keys() - {"sessionId", "expiresAt", "exp"}
    counted = session.changed(reverify_failures=2, reverify_failures_reset_at=900)
    assert session_item(counted).keys() == item.keys() | {"reverifyFailures", "reverifyFailuresResetAt"}
    for stored in (session, counted):
        as_stored = session_item(stored)
        assert read_record(Session, {**as_stored, "id": as_stored["sessionId"]}) == stored


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_records_are_frozen_and_take_keywords_only(record: type) -> None:
    params = dataclasses.fields(record)
    assert all(field.kw_only for field in params)
    assert record.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_changed_gives_a_copy_and_leaves_the_original() -> None:
    user = sample_user("u1", "alice")
    renamed = user.changed(username="bob")
    assert (user.username, renamed.username, renamed.id) == ("alice", "bob", "u1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        user.username = "eve"  # type: ignore[misc]
