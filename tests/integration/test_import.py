"""``nimbus import`` (CONTRACT section 15): a real PostgreSQL database holding an upstream deployment,
made with the real algorithms (tests/migration), imported into the stack on moto; then the old
password, second factors, backup codes and session tokens used through the API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from nimbus_core.adapters import clients, container
from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.user_items import list_partition
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.errors import DependencyError
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions import passwords
from nimbus_tools.migrate.importer import Report, Stores, run_import
from nimbus_tools.migrate.source import UpstreamSource
from tests import totp_reference
from tests.integration.conftest import ORIGIN, PARAMS, Api, Stack
from tests.migration.upstream import Upstream, UpstreamSigner, bcrypt_hash
from tests.passkey_authenticator import SoftwareAuthenticator

PASSWORD = "correct horse"


@pytest.fixture
def signer(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[UpstreamSigner]:
    """Upstream's token key, its certificate given to the deployment (the same rp id as upstream)."""
    key = UpstreamSigner(rp_id=PARAMS["WebAuthnRpId"])
    monkeypatch.setenv("UPSTREAM_JWT_CERTIFICATE", key.certificate_pem)
    get_settings.cache_clear()
    container.reset()
    yield key
    get_settings.cache_clear()
    container.reset()


class _StopsAfter(DynamoSessions):
    """The sessions table, failing after ``writes`` imported sessions: a run cut off part way."""

    def __init__(self, writes: int, *args: Any) -> None:
        super().__init__(*args)
        self.left = writes

    def _spend(self, count: int) -> None:
        if self.left < count:
            raise DependencyError("BatchWriteItem (imported sessions) failed: the machine went away")
        self.left -= count

    def import_new_sessions(self, sessions: Any) -> None:
        listed = list(sessions)
        self._spend(len(listed))
        super().import_new_sessions(listed)

    def import_session(self, session: Any) -> bool:
        self._spend(1)
        return super().import_session(session)


def _import(stack: Stack, source: Upstream, *, stop_after: int | None = None, **options: Any) -> Report:
    client = stack.dynamodb  # the operator tool's client: boto3 with every operation's model
    stores = Stores.on(client, stack.provisioned.tables, stack.sealer)
    if stop_after is not None:
        tables = (stack.table("SessionsTable"), stack.table("UsersTable"), stack.table("TokensTable"))
        stores = replace(stores, sessions=_StopsAfter(stop_after, client, *tables))
    with UpstreamSource(source.url) as reader:
        # One writer: moto in process is not safe for concurrent transactions (DynamoDB is).
        return run_import(reader, stores, **{"workers": 1, **options})


def _items(stack: Stack) -> list[str]:
    """Every item of the tables an import writes, as text, in a stable order."""
    tables = ("UsersTable", "SessionsTable", "DomainsTable")
    return sorted(str(sorted(from_item(i).items())) for t in tables for i in stack.items(t))


def _user(stack: Stack, user_id: str) -> dict[str, Any]:
    return next(i for i in map(from_item, stack.items("UsersTable")) if i.get("id") == user_id)


def test_an_account_logs_in_with_its_upstream_password_which_is_then_argon2(
    api: Api,
    stack: Stack,
    upstream: Upstream,
) -> None:
    upstream.add_domain("example.com")
    alice = upstream.add_user("Alice", staff=True, subdomain="alice")

    report = _import(stack, upstream)

    assert (report.imported["users"], report.imported["domains"], report.skipped) == (1, 1, [])
    stored = _user(stack, alice.id)
    assert (stored["username"], stored["email"], stored["staff"], stored["subdomain"]) == (
        "Alice", alice.email, True, "alice"
    )  # fmt: skip
    assert stored["passwordHash"] == alice.hash
    assert api.login("alice", PASSWORD).status == 201
    assert passwords.verify_password(_user(stack, alice.id)["passwordHash"], PASSWORD)
    assert _user(stack, alice.id)["passwordHash"].startswith("$argon2id$")
    assert api.login("alice", "wrong password", ip="203.0.113.9").body["code"] == "INVALID_PASSWORD_ERROR"


def test_old_session_tokens_keep_their_scopes_and_a_revoked_one_stays_revoked_after_a_second_run(
    api: Api,
    stack: Stack,
    upstream: Upstream,
    signer: UpstreamSigner,
) -> None:
    bob = upstream.add_user("bob")
    normal, _ = upstream.add_session(bob, signer)
    scoped, _ = upstream.add_session(bob, signer, permission_flags=4)  # ACCOUNT_READ only
    _import(stack, upstream)

    me = api.call("GET", "/users/me", token=normal)
    assert (me.status, me.body["id"]) == (200, bob.id)
    assert api.call("GET", "/users/me", token=scoped).status == 200
    assert api.call("GET", "/users/me/sessions", token=scoped).status == 403
    assert api.call("GET", "/users/me/sessions", token=normal).body["count"] == 2
    assert api.call("DELETE", "/users/me/sessions/me", token=normal).status == 200

    again = _import(stack, upstream)

    assert (again.imported["users"], again.unchanged["users"], again.imported["sessions"]) == (0, 1, 0)
    assert (again.unchanged["sessions"], again.revoked_sessions) == (1, 1)
    assert "revoked in Nimbus since their import, not brought back: 1" in again.render()
    assert api.call("GET", "/users/me", token=normal).status == 401
    assert api.call("GET", "/users/me", token=scoped).status == 200


def test_totp_and_upstream_backup_codes_answer_the_login_challenge(
    api: Api,
    stack: Stack,
    upstream: Upstream,
) -> None:
    carol = upstream.add_user("carol")
    _, secret = upstream.add_totp(carol)
    codes = upstream.add_backup_codes(carol)
    _import(stack, upstream)

    # Sealed on the way in, as an enrolment seals: no table or index holds it in the clear.
    stored = str(stack.items("UsersTable"))
    assert secret not in stored
    assert secret.lower() not in stored
    sealed = [v["S"] for i in stack.items("UsersTable") for k, v in i.items() if k.startswith("totpSecret#")]
    assert len(sealed) == 1
    assert sealed[0].startswith("kms1.")
    first = api.login("carol", PASSWORD)
    assert (first.body["code"], first.body["types"]) == (
        "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR",
        ["totp", "backup"],
    )
    assert len(secret) == 16  # upstream's own: an 80-bit key
    code = totp_reference.totp(secret, datetime.now(UTC).timestamp())
    answer = {"token": first.body["token"], "type": "totp", "code": code}
    assert api.call("POST", "/login", {"2fa": answer}, ip="203.0.113.20").status == 201

    second = api.login("carol", PASSWORD, ip="203.0.113.21")
    backup = {"token": second.body["token"], "type": "backup", "code": codes[0]}
    assert api.call("POST", "/login", {"2fa": backup}, ip="203.0.113.22").status == 201
    third = api.login("carol", PASSWORD, ip="203.0.113.23")
    replay = {"token": third.body["token"], "type": "backup", "code": codes[0]}
    assert api.call("POST", "/login", {"2fa": replay}, ip="203.0.113.24").status == 401


def test_a_second_run_changes_nothing(
    api: Api, stack: Stack, upstream: Upstream, signer: UpstreamSigner
) -> None:
    upstream.add_domain("example.com")
    for name in ("dave", "erin", "frank"):
        user = upstream.add_user(name)
        upstream.add_totp(user)
        upstream.add_session(user, signer)
    first = _import(stack, upstream)
    before = _items(stack)

    second = _import(stack, upstream)

    assert (first.imported["users"], first.imported["sessions"], first.imported["factors"]) == (3, 3, 3)
    assert (second.imported["users"], second.unchanged["users"], second.imported["sessions"]) == (0, 3, 0)
    assert second.unchanged["domains"] == 1
    assert (second.unchanged["factors"], second.unchanged["sessions"]) == (3, 3)  # already there
    dry = _import(stack, upstream, dry_run=True)
    assert (dry.unchanged["users"], dry.unchanged["factors"], dry.unchanged["sessions"]) == (3, 3, 3)
    assert _items(stack) == before


def test_a_client_finds_an_imported_session_under_upstreams_id_which_two_users_may_share(
    api: Api, stack: Stack, upstream: Upstream, signer: UpstreamSigner
) -> None:
    iat = int(datetime.now(UTC).timestamp()) - 3600
    bob, carol = upstream.add_user("bob"), upstream.add_user("carol")
    bobs, _ = upstream.add_session(bob, signer, iat=iat)
    carols, _ = upstream.add_session(carol, signer, iat=iat)  # logged in the same second
    _import(stack, upstream)

    for token in (bobs, carols):
        found = api.call("GET", f"/users/me/sessions/{iat}", token=token)
        assert (found.status, found.body["id"]) == (200, str(iat))
    assert api.call("DELETE", f"/users/me/sessions/{iat}", token=bobs).status == 200
    assert api.call("GET", "/users/me", token=bobs).status == 401
    assert api.call("GET", "/users/me", token=carols).status == 200


def test_an_interrupted_run_resumes_where_it_stopped(
    api: Api, stack: Stack, upstream: Upstream, signer: UpstreamSigner
) -> None:
    tokens = []
    for n in range(6):
        user = upstream.add_user(f"user{n}")
        tokens.append(upstream.add_session(user, signer)[0])
    with pytest.raises(DependencyError):
        _import(stack, upstream, workers=1, page_size=1, stop_after=2)
    pending = [i for i in map(from_item, stack.items("UsersTable")) if "importPending" in i]
    assert len(pending) == 1  # created, but its session was cut off: marked, to be finished
    assert len(_user_ids(stack)) == 3  # the three after it were never reached

    resumed = _import(stack, upstream)

    assert resumed.skipped == []
    assert resumed.imported["users"] + resumed.unchanged["users"] == 6
    # Two accounts were done, one pending without its session, three never reached.
    assert (resumed.imported["sessions"], resumed.unchanged["sessions"]) == (4, 2)
    assert all(api.call("GET", "/users/me", token=t).status == 200 for t in tokens)
    count = DynamoUsers(clients.dynamodb(), stack.table("UsersTable")).newest_page(limit=0, offset=0)[0]
    assert count == 6  # each account counted once
    assert not any("importPending" in i for i in map(from_item, stack.items("UsersTable")))


def test_collisions_and_broken_rows_are_skipped_and_listed_never_guessed(
    api: Api,
    stack: Stack,
    upstream: Upstream,
) -> None:
    assert api.register("nimbususer", email="taken@example.com").status == 201
    twins = [upstream.add_user("Twin"), upstream.add_user("twin")]
    shared = [
        upstream.add_user("one", email="same@example.com"),
        upstream.add_user("two", email="SAME@example.com"),
    ]
    native_name = upstream.add_user("NimbusUser", email="fresh@example.com")
    native_address = upstream.add_user("fresh", email="Taken@Example.com")
    bad_name = upstream.add_user("has space")
    fine = upstream.add_user("fine")
    upstream.connection.execute('UPDATE "Users" SET password = %s WHERE id = %s', ("plain text", fine.id))
    kept = upstream.add_user("kept")

    dry = _import(stack, upstream, dry_run=True)
    assert _user_ids(stack) == {_only_user(stack)}  # nothing written
    report = _import(stack, upstream)

    reasons = {s["id"]: s["reason"] for s in report.skipped}
    assert {s["id"] for s in dry.skipped} == set(reasons)
    assert set(reasons) == {u.id for u in (*twins, *shared, native_name, native_address, bad_name, fine)}
    assert all("collides" in reasons[u.id] for u in (*twins, *shared))
    assert "username is taken" in reasons[native_name.id]
    assert "email is taken" in reasons[native_address.id]
    assert "breaks the rule" in reasons[bad_name.id]
    assert "not a bcrypt hash" in reasons[fine.id]
    assert report.imported["users"] == 1
    assert api.login("kept", PASSWORD).status == 201
    assert kept.id in _user_ids(stack)


def _user_ids(stack: Stack) -> set[str]:
    return {
        str(i["id"]) for i in map(from_item, stack.items("UsersTable")) if str(i["pk"]).startswith("USER#")
    }


def _only_user(stack: Stack) -> str:
    (user_id,) = _user_ids(stack)
    return user_id


def test_imported_accounts_list_by_creation_time_among_the_others_and_are_counted(
    api: Api, stack: Stack, upstream: Upstream
) -> None:
    assert api.register("native").status == 201  # created now
    older = upstream.add_user("older", created_at=datetime(2021, 5, 1, tzinfo=UTC))
    newer = upstream.add_user("newer", created_at=datetime(2024, 5, 1, tzinfo=UTC))
    _import(stack, upstream)

    count, page = DynamoUsers(stack.dynamodb, stack.table("UsersTable")).newest_page(limit=50, offset=0)

    assert count == 3
    assert [u.username for u in page] == ["native", "newer", "older"]
    assert (page[1].id, page[2].id) == (newer.id, older.id)
    # Written in the list shards, as a registration is (none in the partition before them).
    assert [_user(stack, u.id)["listPartition"] for u in (newer, older)] == [
        list_partition(newer.id),
        list_partition(older.id),
    ]


def test_an_upstream_security_key_answers_the_login_challenge_and_its_counter_is_kept(
    api: Api, stack: Stack, upstream: Upstream
) -> None:
    dora = upstream.add_user("dora")
    factor_id, key = upstream.add_webauthn(dora, authenticator=SoftwareAuthenticator(sign_count=41))
    key.rp_id = PARAMS["WebAuthnRpId"]  # registered upstream under the rp id Nimbus now shares
    _import(stack, upstream)

    first = api.login("dora", PASSWORD)
    assert first.body["types"] == ["webauthn"]
    response = key.get(first.body["challenge"], origin=ORIGIN)
    answered = api.call(
        "POST", "/login", {"2fa": {"token": first.body["token"], "type": "webauthn", "response": response}}
    )

    assert answered.status == 201, answered.body
    assert _user(stack, dora.id)["secondFactors"][factor_id]["signCount"] > 41
    replayed = api.login("dora", PASSWORD, ip="203.0.113.40")
    stale = key.get(replayed.body["challenge"], origin=ORIGIN, sign_count=41)  # a cloned key's count
    refused = api.call(
        "POST", "/login", {"2fa": {"token": replayed.body["token"], "type": "webauthn", "response": stale}}
    )
    assert refused.body["code"] == "INVALID_SECOND_FACTOR_RESPONSE_ERROR"


def test_an_upstream_security_key_stays_a_second_factor_and_does_not_sign_in_alone(
    api: Api, stack: Stack, upstream: Upstream
) -> None:
    erin = upstream.add_user("erin")
    _, key = upstream.add_webauthn(erin, authenticator=SoftwareAuthenticator())
    key.rp_id = PARAMS["WebAuthnRpId"]
    key.user_handle = erin.id.encode()  # upstream's userID: the user id as UTF-8, ours after import
    _import(stack, upstream)
    challenge = api.call("POST", "/login/passkey", {}, ip="203.0.113.41").body
    answer = {"token": challenge["token"], "response": key.get(challenge["challenge"], origin=ORIGIN)}

    refused = api.call("POST", "/login/passkey", answer, ip="203.0.113.41")

    assert (refused.status, refused.body["code"]) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert [f.get("passkey", False) for f in _user(stack, erin.id)["secondFactors"].values()] == [False]
    assert api.login("erin", PASSWORD).body["types"] == ["webauthn"]  # still the password's second factor


def test_an_account_deleted_in_nimbus_is_never_imported_again(
    api: Api, stack: Stack, upstream: Upstream, signer: UpstreamSigner
) -> None:
    gone = upstream.add_user("gone")
    token, _ = upstream.add_session(gone, signer)
    _import(stack, upstream)
    assert api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token).status == 200

    again = _import(stack, upstream)

    assert again.imported.get("users", 0) == 0
    assert [s["reason"] for s in again.skipped] == [
        "deleted in Nimbus since it was imported: not brought back"
    ]
    assert api.call("GET", "/users/me", token=token).status == 401
    assert api.login("gone", PASSWORD).body["code"] == "INVALID_USER_ERROR"


def test_an_account_changed_upstream_after_its_import_is_listed_and_left_as_imported(
    api: Api, stack: Stack, upstream: Upstream
) -> None:
    moved = upstream.add_user("moved")
    _import(stack, upstream)
    upstream.connection.execute(
        'UPDATE "Users" SET password = %s, "updatedAt" = now() + interval \'1 second\' WHERE id = %s',
        (bcrypt_hash("changed upstream", 4), moved.id),
    )

    again = _import(stack, upstream)

    assert again.changed == [{"id": moved.id, "username": "moved"}]
    assert "changed upstream since their import" in again.render()
    assert api.login("moved", PASSWORD).status == 201  # the import never overwrites an account


def test_a_security_key_two_upstream_accounts_enrolled_is_imported_for_the_first_and_the_second_is_listed(
    api: Api, stack: Stack, upstream: Upstream
) -> None:
    """Upstream let one credential id be enrolled on two accounts; Nimbus stores an id once, so the
    second account is listed as skipped, never imported holding a key another account holds."""
    first, second = upstream.add_user("first"), upstream.add_user("second")
    _, key = upstream.add_webauthn(first, authenticator=SoftwareAuthenticator())
    upstream.add_webauthn(second, authenticator=SoftwareAuthenticator(credential_id=key.credential_id))

    report = _import(stack, upstream)

    assert report.imported["users"] == 1
    [skipped] = report.skipped
    assert skipped["id"] == second.id
    assert "security key" in skipped["reason"]
    assert f"taken by account {first.id}" in skipped["reason"]
    assert api.login("first", PASSWORD).body["types"] == ["webauthn"]
