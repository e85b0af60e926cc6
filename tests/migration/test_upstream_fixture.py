"""The upstream fixture is a real PostgreSQL database holding rows made with upstream's real algorithms."""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import bcrypt
import jwt
import psycopg
import pytest
from cryptography import x509
from webauthn import verify_authentication_response

from tests.migration.postgres import PostgresServer
from tests.migration.upstream import Upstream, UpstreamSigner
from tests.passkey_authenticator import SoftwareAuthenticator, b64url

pytestmark = pytest.mark.waits  # PostgreSQL servers started and stopped

EXPECTED_COLUMNS = {
    "Users": {
        "id": "character varying",
        "username": "character varying",
        "email": "character varying",
        "password": "character varying",
        "staff": "boolean",
        "domain": "character varying",
        "subdomain": "character varying",
        "verifiedAt": "timestamp with time zone",
        "bannedAt": "timestamp with time zone",
        "twoFactorBackupCodes": "ARRAY",
        "twoFactorBackupCodeUsedAt": "timestamp with time zone",
        "createdAt": "timestamp with time zone",
        "updatedAt": "timestamp with time zone",
    },
    "SecondFactors": {
        "id": "character varying",
        "user": "character varying",
        "type": "character varying",
        "name": "character varying",
        "secret": "character varying",
        "keyId": "character varying",
        "publicKey": "bytea",
        "counter": "integer",
        "deviceType": "character varying",
        "transports": "ARRAY",
        "usedAt": "timestamp with time zone",
        "createdAt": "timestamp with time zone",
        "updatedAt": "timestamp with time zone",
    },
    "Sessions": {
        "id": "character varying",
        "user": "character varying",
        "exp": "timestamp with time zone",
        "name": "character varying",
        "permissionFlags": "integer",
        "usedAt": "timestamp with time zone",
        "createdAt": "timestamp with time zone",
        "updatedAt": "timestamp with time zone",
    },
    "Domains": {
        "id": "character varying",
        "subdomains": "boolean",
        "createdAt": "timestamp with time zone",
        "updatedAt": "timestamp with time zone",
    },
}


def one(upstream: Upstream, query: str, *params: Any) -> tuple[Any, ...]:
    """The single row a query returns."""
    row: tuple[Any, ...] | None = upstream.connection.execute(query, params).fetchone()
    assert row is not None, query
    return row


def test_the_four_upstream_tables_exist_with_sequelizes_column_names_and_types(upstream: Upstream) -> None:
    rows = upstream.connection.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'public'"
    ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        found.setdefault(table, {})[column] = data_type
    assert found == EXPECTED_COLUMNS


def test_sessions_are_keyed_by_iat_and_user_and_factors_go_with_their_user(upstream: Upstream) -> None:
    [primary_key] = one(
        upstream,
        "SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = '\"Sessions\"'::regclass AND i.indisprimary",
    )
    assert primary_key == ["id", "user"]
    user = upstream.add_user("doomed")
    upstream.add_totp(user)
    upstream.connection.execute('DELETE FROM "Users" WHERE id = %s', (user.id,))
    assert one(upstream, 'SELECT count(*) FROM "SecondFactors"') == (0,)


def test_a_users_bcrypt_hash_verifies_the_right_password_and_not_a_wrong_one(upstream: Upstream) -> None:
    user = upstream.add_user("alice", password="hunter2 but longer")

    [stored, email, staff, verified_at, banned_at] = one(
        upstream,
        'SELECT password, email, staff, "verifiedAt", "bannedAt" FROM "Users" WHERE id = %s',
        user.id,
    )
    assert stored == user.hash
    assert stored.startswith("$2b$04$")
    assert bcrypt.checkpw(b"hunter2 but longer", stored.encode())
    assert not bcrypt.checkpw(b"hunter2", stored.encode())
    assert (email, staff, verified_at, banned_at) == ("alice@example.com", False, user.created_at, None)


def test_a_password_longer_than_72_bytes_is_hashed_by_its_first_72_bytes_as_bcrypt_does(
    upstream: Upstream,
) -> None:
    password = "é" * 40  # 80 UTF-8 bytes
    user = upstream.add_user("long", password=password, cost=5)

    assert user.hash.startswith("$2b$05$")
    assert bcrypt.checkpw(password.encode()[:72], user.hash.encode())


def test_user_ids_are_unique_millisecond_snowflakes_and_timestamps_are_utc_milliseconds(
    upstream: Upstream,
) -> None:
    before = int(time.time() * 1000)
    users = [upstream.add_user(f"user{i}") for i in range(20)]

    ids = [user.id for user in users]
    assert len(set(ids)) == 20
    assert all(re.fullmatch(r"[1-9]\d+", user_id) for user_id in ids)
    assert all(abs((int(user_id) >> 22) - before) < 60_000 for user_id in ids)
    [created_at] = one(upstream, 'SELECT "createdAt" FROM "Users" WHERE id = %s', ids[0])
    assert created_at == users[0].created_at
    assert users[0].created_at.utcoffset() == timedelta(0)
    assert users[0].created_at.microsecond % 1000 == 0


def test_staff_banned_and_unverified_users_are_stored_as_such(upstream: Upstream) -> None:
    upstream.add_domain("files.test", subdomains=False)
    user = upstream.add_user(
        "mallory", staff=True, banned=True, verified=False, domain="files.test", subdomain="mal"
    )

    row = one(
        upstream,
        'SELECT u.staff, u."bannedAt" IS NOT NULL, u."verifiedAt", u.domain, u.subdomain, d.subdomains '
        'FROM "Users" u JOIN "Domains" d ON d.id = u.domain WHERE u.id = %s',
        user.id,
    )
    assert row == (True, True, None, "files.test", "mal", False)


def test_backup_codes_are_stored_as_sha512_hex_digests_of_20_hex_character_codes(upstream: Upstream) -> None:
    user = upstream.add_user("bob")
    codes = upstream.add_backup_codes(user)

    [digests] = one(upstream, 'SELECT "twoFactorBackupCodes" FROM "Users" WHERE id = %s', user.id)
    assert len(codes) == 10
    assert all(re.fullmatch(r"[0-9a-f]{20}", code) for code in codes)
    assert digests == [hashlib.sha512(code.encode()).hexdigest() for code in codes]


def test_a_totp_factor_stores_a_secret_as_otplib_makes_it_16_base32_characters_of_an_80_bit_key(
    upstream: Upstream,
) -> None:
    user = upstream.add_user("carol")
    factor_id, secret = upstream.add_totp(user)
    others = [upstream.add_totp(user, name=f"Phone {n}")[1] for n in range(20)]

    row = one(upstream, 'SELECT "user", type, name, secret FROM "SecondFactors" WHERE id = %s', factor_id)
    assert row == (user.id, "totp", "Phone", secret)
    for made in (secret, *others):
        assert re.fullmatch(r"[A-Z2-7]{16}", made)
        key = base64.b32decode(made)
        assert len(key) == 10
        # otplib's thirty-two plugin encodes the bytes read back as ASCII: every high bit is clear.
        assert max(key) < 0x80
    assert len({secret, *others}) == 21


def test_a_session_jwt_verifies_with_the_certificates_public_key_and_its_row_is_keyed_by_iat(
    upstream: Upstream, signer: UpstreamSigner
) -> None:
    user = upstream.add_user("dave")
    token, iat = upstream.add_session(user, signer, permission_flags=3)

    public_key = x509.load_pem_x509_certificate(signer.certificate_pem.encode()).public_key()
    claims = jwt.decode(token, public_key, algorithms=["ES256"], issuer="localhost")  # type: ignore[arg-type]
    assert claims == {"sub": user.id, "iat": iat, "exp": iat + 7 * 24 * 3600, "iss": "localhost"}
    row = one(upstream, 'SELECT id, exp, name, "permissionFlags" FROM "Sessions" WHERE "user" = %s', user.id)
    assert row == (str(iat), datetime.fromtimestamp(claims["exp"], UTC), "Firefox on Linux", 3)


def test_a_users_sessions_get_distinct_iats_and_another_key_does_not_verify_them(
    upstream: Upstream, signer: UpstreamSigner
) -> None:
    user = upstream.add_user("erin")
    tokens = [upstream.add_session(user, signer) for _ in range(3)]

    assert len({iat for _, iat in tokens}) == 3
    stranger = UpstreamSigner().certificate.public_key()
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tokens[0][0], stranger, algorithms=["ES256"])  # type: ignore[arg-type]


def test_tokens_are_signed_as_upstreams_are_with_s_left_high_about_half_the_time() -> None:
    """jose 6.1.0 on Node's WebCrypto (upstream's signer) leaves S as OpenSSL makes it: 520 of 1,000
    tokens high-S when measured (docs/security.md). So must the fixture's, or no test would hold a
    token as clients hold them. Out of 200, fewer than 50 of either kind is a chance below 1e-12."""
    signer = UpstreamSigner()
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551  # P-256's n
    tokens = [signer.token("1700000000000", 1_764_000_000 + i, 1_764_600_000) for i in range(200)]

    high = sum(
        int.from_bytes(base64.urlsafe_b64decode(t.split(".")[2] + "==")[32:]) > order // 2 for t in tokens
    )

    assert jwt.get_unverified_header(tokens[0]) == {"alg": "ES256", "typ": "JWT"}
    assert 50 <= high <= 150


def test_a_webauthn_factor_stores_the_authenticators_cose_key_which_verifies_its_assertions(
    upstream: Upstream,
) -> None:
    user = upstream.add_user("frank")
    factor_id, authenticator = upstream.add_webauthn(user, authenticator=SoftwareAuthenticator(sign_count=5))

    row = one(
        upstream,
        'SELECT "keyId", "publicKey", counter, "deviceType", transports, type FROM "SecondFactors" '
        "WHERE id = %s",
        factor_id,
    )
    key_id, public_key, counter, device_type, transports, kind = row
    assert public_key == authenticator.cose_public_key()
    assert key_id == b64url(authenticator.credential_id)
    assert (counter, device_type, transports, kind) == (5, "singleDevice", ["usb"], "webauthn")
    challenge = b"upstream-challenge"
    assertion = authenticator.get(
        {"challenge": b64url(challenge), "rpId": "localhost"}, origin="http://localhost:8080"
    )
    verified = verify_authentication_response(
        credential=assertion,
        expected_challenge=challenge,
        expected_rp_id="localhost",
        expected_origin="http://localhost:8080",
        credential_public_key=public_key,
        credential_current_sign_count=counter,
    )
    assert verified.new_sign_count == 6
    assert assertion["response"]["userHandle"] == b64url(user.id.encode())


def test_bulk_users_inserts_2000_rows_in_a_few_seconds(upstream: Upstream) -> None:
    started = time.perf_counter()
    upstream.bulk_users(2000)
    elapsed = time.perf_counter() - started

    assert one(upstream, 'SELECT count(*), count(DISTINCT id), count(DISTINCT password) FROM "Users"') == (
        2000,
        2000,
        1,
    )
    assert elapsed < 5, f"bulk_users(2000) took {elapsed:.1f}s"


def test_the_database_is_reachable_at_its_url_from_another_connection(upstream: Upstream) -> None:
    user = upstream.add_user("grace")

    with psycopg.connect(upstream.url) as other:
        assert other.execute('SELECT username FROM "Users" WHERE id = %s', (user.id,)).fetchone() == (
            "grace",
        )


def test_each_test_gets_an_empty_database(upstream: Upstream) -> None:
    assert one(upstream, 'SELECT count(*) FROM "Users"') == (0,)
    assert upstream.url.startswith("postgresql://nimbus@127.0.0.1:")


def test_servers_started_at_the_same_time_get_their_own_ports_and_directories() -> None:
    servers = [PostgresServer(), PostgresServer()]
    threads = [threading.Thread(target=server.start) for server in servers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert servers[0].port is not None
        assert servers[0].port != servers[1].port
        assert servers[0].base != servers[1].base
        for server in servers:
            with psycopg.connect(server.url("postgres")) as connection:
                assert connection.execute("SHOW fsync").fetchone() == ("off",)
        directories = [server.base for server in servers]
    finally:
        for server in servers:
            server.stop()
    assert all(directory is not None and not directory.exists() for directory in directories)
