"""Upstream rows as Nimbus records (CONTRACT section 15): what carries over, and every row refused
with its reason rather than guessed. Pure mapping: no database, no AWS."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from nimbus_core.factors.otp import legacy_backup_code_key
from nimbus_core.sessions.upstream_tokens import UPSTREAM_SECRET_HASH
from nimbus_tools.migrate.importer import source_collisions
from nimbus_tools.migrate.records import RefusedError, account
from nimbus_tools.migrate.source import UpstreamAccount, UpstreamFactor, UpstreamSession

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
BCRYPT = "$2b$04$" + "a" * 53
DIGEST = hashlib.sha512(b"0123456789abcdef0123").hexdigest()


def _row(**changes: object) -> UpstreamAccount:
    row = UpstreamAccount(
        id="7531328677439602700",
        username="Alice",
        email="Alice@Example.COM",
        password=BCRYPT,
        staff=False,
        domain="example.com",
        subdomain=None,
        verified_at=NOW - timedelta(days=9),
        banned_at=None,
        backup_codes=[DIGEST],
        backup_code_used_at=None,
        created_at=NOW - timedelta(days=10),
        updated_at=NOW - timedelta(days=1),
        factors=[_totp()],
        sessions=[],
    )
    return replace(row, **changes)  # type: ignore[arg-type]


def _totp(**changes: object) -> UpstreamFactor:
    factor = UpstreamFactor(
        id="7531328677439602701",
        type="totp",
        name="Phone",
        secret="jbswy3dpehpk3pxp",
        key_id=None,
        public_key=None,
        counter=None,
        used_at=None,
        created_at=NOW,
        updated_at=NOW,
    )
    return replace(factor, **changes)  # type: ignore[arg-type]


def _session(**changes: object) -> UpstreamSession:
    session = UpstreamSession(
        id="1764000000",
        exp=NOW + timedelta(days=3),
        name="ShareX",
        permission_flags=4,
        used_at=None,
        created_at=NOW - timedelta(days=2),
        updated_at=NOW - timedelta(days=2),
    )
    return replace(session, **changes)  # type: ignore[arg-type]


def test_an_account_keeps_its_id_names_address_times_factors_and_backup_digests() -> None:
    user = account(_row(), now=NOW.timestamp()).user

    assert (user.id, user.username, user.password_hash) == ("7531328677439602700", "Alice", BCRYPT)
    assert user.email == "Alice@example.com"  # normalised as register normalises: the same address
    assert (user.created_at, user.verified_at) == ("2026-11-15T12:00:00.000Z", "2026-11-16T12:00:00.000Z")
    assert user.second_factors["7531328677439602701"].secret == "JBSWY3DPEHPK3PXP"
    assert user.backup_codes == {legacy_backup_code_key(DIGEST): True}


def test_only_live_sessions_with_known_scopes_are_kept_under_upstreams_own_id() -> None:
    sessions = [
        _session(),
        _session(id="1764000001", exp=NOW - timedelta(seconds=1)),  # expired
        _session(id="1764000002", permission_flags=1 << 30),  # scopes Nimbus does not know
        _session(id="not-an-iat"),
        _session(id="01764000003"),  # no token's iat is written so: its token names "1764000003"
        _session(id="\u0661\u0667\u0666\u0664"),  # decimal to str.isdecimal, never an iat
    ]

    moved = account(_row(sessions=sessions), now=NOW.timestamp())
    kept = moved.sessions

    assert [s.id for s in kept] == ["1764000000"]  # the id a client that kept it asks for
    assert set(moved.dropped) == {"1764000002", "not-an-iat", "01764000003", "\u0661\u0667\u0666\u0664"}
    assert "not scopes Nimbus knows" in moved.dropped["1764000002"]
    assert (kept[0].secret_hash, kept[0].permission_flags, kept[0].name) == (
        UPSTREAM_SECRET_HASH,
        4,
        "ShareX",
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"id": "u-1"}, "is not an id"),
        ({"username": "has space"}, "breaks the rule"),
        ({"username": "x" * 65}, "breaks the rule"),
        ({"email": "not an address"}, "is not valid"),
        ({"password": "$argon2id$v=19$m=1,t=1,p=1$x$y"}, "not a bcrypt hash"),
        ({"password": "plain"}, "not a bcrypt hash"),
        ({"backup_codes": ["abc"]}, "not a SHA-512 hex digest"),
        ({"factors": [_totp(secret=None)]}, "no usable secret"),
        ({"factors": [_totp(secret="not base32!")]}, "no usable secret"),
        ({"factors": [_totp(type="webauthn")]}, "no credential id or public key"),
        ({"factors": [_totp(type="sms")]}, "unknown type"),
        ({"factors": [_totp(id="f-1")]}, "not an id"),
    ],
)
def test_a_row_that_breaks_a_rule_is_refused_with_its_reason(changes: dict[str, object], reason: str) -> None:
    with pytest.raises(RefusedError, match=reason):
        account(_row(**changes), now=NOW.timestamp())


def test_backup_codes_without_a_factor_are_not_carried_over() -> None:
    assert account(_row(factors=[]), now=NOW.timestamp()).user.backup_codes == {}


def test_every_party_to_a_collision_in_the_source_is_named_and_nobody_else() -> None:
    names = [
        ("1", "Twin", "a@example.com"),
        ("2", "twin", "b@example.com"),
        ("3", "solo", "STRASSE@example.com"),
        ("4", "other", "straße@example.com"),
        ("5", "fine", "fine@example.com"),
    ]

    found = source_collisions(names)

    assert set(found) == {"1", "2", "3", "4"}
    assert "username collides with account(s) 2" in found["1"]
    assert "address collides with account(s) 3" in found["4"]
