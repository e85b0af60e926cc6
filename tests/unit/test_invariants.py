"""The stack invariant checker (tests/invariants.py): a stack written by the service's own rules and
adapters (on moto, tables from template.yaml) is whole, and each kind of breakage is named.

The users table's own checks are proven in tests/integration/test_user_races.py; here only that
:func:`stack_violations` includes them.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws

from accounts_api import service as accounts
from auth_api import recovery
from auth_api import service as auth
from auth_api.models import RecoverBody, RegisterBody, ResetPasswordBody
from nimbus_core.accounts import account_changes, verification
from nimbus_core.accounts.notices import Actor
from nimbus_core.adapters.activity import DynamoActivity
from nimbus_core.adapters.counters import DynamoCounters
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.items import from_item, to_item
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.adapters.sessions import DynamoSessions, session_item
from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import Challenge, PendingFactor, SecondFactor, Session, User
from nimbus_core.domain.secret_kinds import CHALLENGE, ENROLMENT
from nimbus_core.platform import ids
from nimbus_core.platform.clock import iso
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.session_issuer import new_session
from nimbus_core.sessions.tokens import SessionToken, hash_secret
from nimbus_tools.local.provision import create_tables
from nimbus_tools.migrate.importer import Stores, run_import
from nimbus_tools.migrate.source import UpstreamAccount, UpstreamSession, UpstreamSource
from nimbus_tools.template import Template, load_template
from staff_api import service as staff
from tests.fakes import FAKE_KEY, SETTINGS, FakeClock, FakeConfig, FakeKeys
from tests.invariants import RECOVERY_SECONDS, VERIFICATION_SECONDS, stack_violations
from tests.recovery_requests import ask_for_recovery

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")

PASSWORD = "correct horse"
ME = Actor(kind="user", source_ip="198.51.100.7", device="test")


@dataclasses.dataclass
class World:
    """A stack on moto written through the production adapters, and shortcuts into it."""

    client: Any
    tables: dict[str, str]
    deps: Deps

    def violations(self, now: float | None = None) -> list[str]:
        return stack_violations(self.client, self.tables, now=now)

    def register(self, name: str) -> tuple[User, Session]:
        body = RegisterBody.model_validate(
            {"username": name, "email": f"{name}@example.com", "password": PASSWORD}
        )
        issued = auth.register(self.deps, body, session_name="test", now=time.time())
        return self.user(issued.session.user_id), issued.session

    def user(self, user_id: str) -> User:
        user = self.deps.users.get(user_id)
        assert user is not None
        return user

    def items(self, logical_id: str) -> list[dict[str, Any]]:
        return [from_item(i) for i in self.client.scan(TableName=self.tables[logical_id])["Items"]]

    def put(self, logical_id: str, values: dict[str, Any]) -> None:
        self.client.put_item(TableName=self.tables[logical_id], Item=to_item(values))

    def delete(self, logical_id: str, key: dict[str, Any]) -> None:
        self.client.delete_item(TableName=self.tables[logical_id], Key=to_item(key))

    def mails(self, user: User, kind: str) -> list[dict[str, Any]]:
        mine = [m for m in self.items("OutboxTable") if m.get("userId") == user.id and m["kind"] == kind]
        return sorted(mine, key=lambda m: str(m["id"]))


@functools.cache
def _template() -> Template:
    return load_template()


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # Empty backends before and after, even inside another module's session mock (nested mocks
    # share data; that stack provisions itself again when it next finds its tables gone).
    with mock_aws() as mocked:
        mocked.reset()
        client = boto3.client("dynamodb", region_name="us-east-1")
        tables = create_tables(client, _template())
        settings = dataclasses.replace(
            SETTINGS,
            users_table=tables["UsersTable"],
            sessions_table=tables["SessionsTable"],
            tokens_table=tables["TokensTable"],
            outbox_table=tables["OutboxTable"],
            counters_table=tables["CountersTable"],
            domains_table=tables["DomainsTable"],
            activity_table=tables["ActivityTable"],
        )
        deps = Deps(
            settings=settings,
            clock=FakeClock(),
            config=FakeConfig(),
            tx=DynamoTransactor(client),
            users=DynamoUsers(client, tables["UsersTable"]),
            sessions=DynamoSessions(
                client, tables["SessionsTable"], tables["UsersTable"], tables["TokensTable"]
            ),
            counters=DynamoCounters(client, tables["CountersTable"]),
            activity=DynamoActivity(client, tables["ActivityTable"]),
            tokens=DynamoTokens(client, tables["TokensTable"], tables["UsersTable"]),
            domains=DynamoDomains(client, tables["DomainsTable"]),
            outbox=DynamoOutbox(client, tables["OutboxTable"]),
            sealer=Sealer(FakeKeys, key_id=FAKE_KEY, stage=settings.stage),
        )
        yield World(client, tables, deps)
        mocked.reset()


def _only(found: list[str], *fragments: str) -> None:
    """``found`` is exactly one finding, which says every one of ``fragments``."""
    assert len(found) == 1, found
    assert all(fragment in found[0] for fragment in fragments), found


def _link(mail: dict[str, Any]) -> str:
    """The one-time token of a mailed link (VerificationUrl/RecoveryUrl end with ``token={token}``)."""
    return str(mail["text"]).split("token=")[1].split()[0]


def _challenge(user: User, session: Session | None = None) -> Challenge:
    now = int(time.time())
    return Challenge(
        hash=hash_secret(ids.new_secret()),
        user_id=user.id,
        session_id=session.id if session else None,
        endpoint="DELETE /users/me",
        created_at=iso(now),
        exp=now + 300,
    )


def _pending_factor(user: User, session: Session) -> PendingFactor:
    now = int(time.time())
    return PendingFactor(
        hash=hash_secret(ids.new_secret()),
        user_id=user.id,
        session_id=session.id,
        type="totp",
        secret="JBSWY3DPEHPK3PXP",
        created_at=iso(now),
        exp=now + 600,
    )


# ------------------------------------------------------------------------------------------ whole


def test_a_stack_written_by_the_services_own_rules_is_whole(world: World) -> None:
    """Registrations, a resend (the first link superseded), a verified address, a recovery request,
    a scoped session, a ban, a password change keeping one session, a user's own deletion and a
    staff deletion (whose sessions, ban notice and mail the sweep has not removed yet, with a
    recovery token, a challenge and a factor setup left to their TTL): nothing is a finding."""
    now = time.time()
    alice, alice_session = world.register("alice")
    after, ops = verification.issue(world.deps, alice, now)  # a resend: the first link is superseded
    world.deps.tx.commit([*world.deps.users.change_ops(alice, after), *ops])
    ask_for_recovery(world.deps, "alice", now)

    bob, bob_session = world.register("bob")
    (mail,) = world.mails(bob, "verify-email")
    verification.verify(world.deps, _link(mail), now)
    bob = world.user(bob.id)
    scoped = new_session(bob, name="key", lifetime=3600, now=now, permission_flags=4)
    world.deps.tx.commit([world.deps.sessions.put_op(scoped.session)])
    accounts.change_password(world.deps, Caller(bob, bob_session), "battery staple", now, actor=ME)

    carol, carol_session = world.register("carol")
    staff.ban(world.deps, carol, "spam", now)

    dave, dave_session = world.register("dave")
    ask_for_recovery(world.deps, "dave", now)
    world.deps.tx.commit(
        [
            world.deps.tokens.put_op(CHALLENGE, _challenge(dave, dave_session)),
            world.deps.tokens.put_op(ENROLMENT, _pending_factor(dave, dave_session)),
        ]
    )
    accounts.delete_account(world.deps, Caller(world.user(dave.id), dave_session))

    erin, _ = world.register("erin")
    erin = staff.ban(world.deps, erin, "abuse", now)
    assert staff.delete_user(world.deps, erin)

    assert world.violations() == []
    # The deleted users' leftovers are there, as the sweep finds them: this is what was judged.
    assert {s["userId"] for s in world.items("SessionsTable")} >= {erin.id}
    assert {m["userId"] for m in world.items("OutboxTable")} >= {dave.id, erin.id}
    assert {t["userId"] for t in world.items("TokensTable")} >= {dave.id}
    assert {alice_session.id, carol_session.id} <= {s["sessionId"] for s in world.items("SessionsTable")}


def test_the_users_tables_own_checks_are_part_of_it(world: World) -> None:
    world.register("alice")
    world.put("UsersTable", {"pk": "USERNAME#ghost", "userId": "nobody"})

    _only(world.violations(), "USERNAME#ghost names user nobody, who does not exist")


def test_a_sealed_secret_left_without_its_factor_and_a_factor_without_a_secret_are_named(
    world: World,
) -> None:
    alice, _ = world.register("alice")
    factor = SecondFactor(id="f1", type="totp", name="Phone", created_at="x", updated_at="x")
    sealed = world.deps.sealer.seal("JBSWY3DPEHPK3PXP", user_id=alice.id, factor_id="f1")
    world.deps.tx.commit(
        [world.deps.users.add_factor_op(alice, factor, max_factors=10, sealed_secret=sealed)]
    )
    assert world.violations() == []
    # The factor removed as removal does (its secret with it): still whole.
    world.deps.tx.commit([world.deps.users.remove_factors_op(world.user(alice.id), ["f1"])])
    assert world.violations() == []
    # A write that forgot one of the two.
    world.deps.tx.commit([world.deps.users.add_factor_op(world.user(alice.id), factor, max_factors=10)])
    _only(world.violations(), f"user {alice.id}'s TOTP factor f1 has no secret")


# --------------------------------------------------------------------------------------- sessions


def test_a_banned_users_session_that_the_ban_did_not_revoke_is_named(world: World) -> None:
    alice, session = world.register("alice")
    # A ban written without moving the session generation (what staff_api.service.ban must not do).
    banned = alice.changed(banned_at=iso(time.time()), ban_reason="spam")
    world.deps.tx.commit(world.deps.users.change_ops(alice, banned))

    _only(world.violations(), f"session {alice.id}/{session.id}", "banned", "after an unban")


def test_an_expired_or_revoked_session_of_a_banned_user_is_not_named(world: World) -> None:
    alice, _ = world.register("alice")  # its session: revoked by the ban (an older generation)
    banned = staff.ban(world.deps, alice, "spam", time.time())
    expired = new_session(banned, name="old", lifetime=-1, now=time.time())  # current generation
    world.deps.tx.commit([world.deps.sessions.put_op(expired.session)])

    assert world.violations() == []


def test_a_session_of_a_generation_its_user_has_not_reached_is_named(world: World) -> None:
    alice, session = world.register("alice")
    ahead = dataclasses.replace(session, id=ids.new_id(), generation=alice.session_generation + 1)
    world.put("SessionsTable", from_item(session_item(ahead)))

    _only(world.violations(), f"session {alice.id}/{ahead.id}", "generation 1", "revoke-all")


def test_a_session_whose_user_is_gone_is_left_to_the_sweep(world: World) -> None:
    alice, session = world.register("alice")
    # The user removed as a deletion removes it, the sessions left for the sweep.
    account_changes.delete_user(world.deps, alice)

    assert [s["sessionId"] for s in world.items("SessionsTable")] == [session.id]
    assert world.violations() == []


# ----------------------------------------------------------------------------------------- tokens


def test_a_verification_token_that_outlived_its_user_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    assert alice.pending_verification is not None
    # The user removed without its pending token (what deletion_ops must not do).
    world.deps.tx.commit(world.deps.users.delete_ops(alice))
    world.delete("OutboxTable", {"id": world.mails(alice, "verify-email")[0]["id"]})  # swept

    _only(
        world.violations(), f"VERIFY#{alice.pending_verification[:12]}", f"user {alice.id}", "does not exist"
    )


def test_challenge_setup_and_device_tokens_may_outlive_their_user_and_the_pending_recovery_link_goes_with_it(
    world: World,
) -> None:
    alice, session = world.register("alice")
    ask_for_recovery(world.deps, "alice", time.time())
    world.deps.tx.commit(
        [
            world.deps.tokens.put_op(CHALLENGE, _challenge(alice)),
            world.deps.tokens.put_op(ENROLMENT, _pending_factor(alice, session)),
        ]
    )
    account_changes.delete_user(world.deps, world.user(alice.id))

    kinds = sorted(str(t["kind"]) for t in world.items("TokensTable"))
    assert kinds == ["challenge", "device", "enrol"]  # the device registration answered
    assert world.violations() == []


def test_an_item_of_no_known_kind_in_the_tokens_table_is_named(world: World) -> None:
    world.put("TokensTable", {"pk": "RESET#abc", "userId": "someone"})

    _only(world.violations(), "RESET#abc", "no kind the code writes")


# ----------------------------------------------------------------------------------------- outbox


def test_an_outbox_item_that_is_no_message_is_named_not_a_crash(world: World) -> None:
    world.put("OutboxTable", {"id": "01NOTAMESSAGE0000000000000", "kind": "verify-email"})

    _only(world.violations(), "is not a message")


def test_a_recovery_request_waiting_is_no_finding_and_an_unreadable_one_is_named(world: World) -> None:
    recovery.request_recovery(world.deps, RecoverBody(username="somebody"), time.time())
    assert world.violations() == []

    world.put("OutboxTable", {"id": "01NOTAREQUEST0000000000000", "kind": "recover-request"})

    _only(world.violations(), "01NOTAREQUEST", "is not a message")


def test_an_outbox_message_that_names_no_user_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    (mail,) = world.mails(alice, "verify-email")
    world.put("OutboxTable", {**{k: v for k, v in mail.items() if k != "userId"}, "id": ids.new_id()})

    _only(world.violations(), "names no user")


def test_an_outbox_message_of_a_kind_the_code_does_not_write_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    (mail,) = world.mails(alice, "verify-email")
    world.put("OutboxTable", {**mail, "id": ids.new_id(), "kind": "newsletter"})

    _only(world.violations(), "(newsletter)", "kind the code does not write")


@pytest.mark.parametrize(
    ("kind", "prefix"),
    [("verify-email", "VERIFY#"), ("recover-password", "RECOVER#")],
    ids=["verify", "recover"],
)
def test_a_pending_link_whose_token_record_is_gone_is_named_until_its_lifetime_ends(
    world: World, kind: str, prefix: str
) -> None:
    alice, _ = world.register("alice")
    ask_for_recovery(world.deps, "alice", time.time())
    alice = world.user(alice.id)
    pending = alice.pending_verification if prefix == "VERIFY#" else alice.pending_recovery
    world.delete("TokensTable", {"pk": f"{prefix}{pending}"})

    _only(world.violations(), f"({kind})", f"user {alice.id}'s pending one", "record is gone")
    lifetime = VERIFICATION_SECONDS if prefix == "VERIFY#" else RECOVERY_SECONDS
    assert world.violations(now=time.time() + lifetime + 1) == []  # TTL may remove an expired one


def test_used_and_superseded_links_need_no_record(world: World) -> None:
    """A verified link, a resent one, a recovery link superseded by another, one spent by a reset,
    and one voided by a password change: each mail stays in the outbox without its record."""
    now = time.time()
    alice, _ = world.register("alice")
    after, ops = verification.issue(world.deps, alice, now)
    world.deps.tx.commit([*world.deps.users.change_ops(alice, after), *ops])
    (_, second) = world.mails(alice, "verify-email")
    verification.verify(world.deps, _link(second), now)
    for _ in range(2):
        ask_for_recovery(world.deps, "alice", now)
    _, newer = world.mails(alice, "recover-password")
    body = {"token": _link(newer), "newPassword": "battery staple", "confirmNewPassword": "battery staple"}
    recovery.reset_password(
        world.deps, ResetPasswordBody.model_validate(body), source_ip="198.51.100.7", now=now
    )

    bob, bob_session = world.register("bob")
    ask_for_recovery(world.deps, "bob", now)
    accounts.change_password(world.deps, Caller(bob, bob_session), "battery staple", now, actor=ME)

    # Left: bob's voided recovery record and his registration link; alice's are all gone. (And the
    # known devices each sign-in answered: alice's registration and reset, bob's registration.)
    kinds = sorted(str(t["kind"]) for t in world.items("TokensTable"))
    assert kinds == ["device", "device", "device", "recovery", "verify-email"]
    # alice: two verification links, two recovery links, a notice; bob: two links, a notice; and
    # the activity events no message carries: both registrations and alice's reset's sign-in.
    messages = [i for i in world.items("OutboxTable") if i["kind"] != "activity"]
    assert len(messages) == 8
    assert len(world.items("OutboxTable")) == 11
    assert world.violations() == []


def test_a_link_mailed_to_another_address_than_its_record_holds_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    (mail,) = world.mails(alice, "verify-email")
    world.put("OutboxTable", {**mail, "to": "mallory@example.com"})

    _only(world.violations(), "to mallory@example.com", f"bound to user {alice.id} at alice@example.com")


def test_a_link_for_another_user_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    bob, _ = world.register("bob")
    (mail,) = world.mails(alice, "verify-email")
    world.put("OutboxTable", {**mail, "userId": bob.id})

    _only(world.violations(), f"about user {bob.id} carries a link for user {alice.id}")


def test_a_link_message_without_a_link_token_is_named(world: World) -> None:
    alice, _ = world.register("alice")
    (mail,) = world.mails(alice, "verify-email")
    world.put("OutboxTable", {**mail, "text": "Hello, no link here."})

    _only(world.violations(), "carries 0 link tokens")


# ------------------------------------------------------------------------------- found: import


class _Upstream:
    """An upstream database of the given accounts, as run_import reads one (UpstreamSource)."""

    def __init__(self, accounts: list[UpstreamAccount]) -> None:
        self.accounts = accounts

    def counts(self) -> dict[str, int]:
        return {"users": len(self.accounts), "domains": 0}

    def domains(self) -> list[Any]:
        return []

    def names(self) -> Iterator[tuple[str, str, str]]:
        return iter((a.id, a.username, a.email) for a in self.accounts)

    def pages(self, size: int) -> Iterator[list[UpstreamAccount]]:
        yield self.accounts


def test_an_imported_banned_account_keeps_no_session_that_an_unban_would_revive(world: World) -> None:
    now = datetime.now(UTC)
    later = datetime.fromtimestamp(now.timestamp() + 86400, UTC)
    upstream_session = UpstreamSession(
        id=str(int(now.timestamp()) - 60),
        exp=later,
        name="old laptop",
        permission_flags=None,
        used_at=None,
        created_at=now,
        updated_at=now,
    )
    banned = UpstreamAccount(
        id="1234",
        username="mallory",
        email="mallory@example.com",
        password="$2b$15$" + "a" * 53,
        staff=False,
        domain="nimbus.test",
        subdomain=None,
        verified_at=now,
        banned_at=now,
        backup_codes=[],
        backup_code_used_at=None,
        created_at=now,
        updated_at=now,
        sessions=[upstream_session],
    )
    report = run_import(
        cast(UpstreamSource, _Upstream([banned])), Stores.on(world.client, world.tables, world.deps.sealer)
    )
    assert report.imported["users"] == 1

    assert world.items("SessionsTable") == []  # listed in the report as dropped, not stored
    assert world.violations() == []
    # Lifted the ban, its sessions from before the ban still do not authenticate.
    staff.unban(world.deps, world.user("1234"), time.time())
    token = SessionToken("1234", upstream_session.id, "", upstream=True)
    assert authenticate(world.deps, token, time.time()) is None


# ------------------------------------------------------------------- found: resend vs address change


def test_a_resend_built_on_a_read_from_before_an_address_change_leaves_a_link_for_the_new_address(
    world: World,
) -> None:
    """GET /users/me/verify racing PUT /users/me/email of the same user: the resend authenticated
    (read the user) before the address change committed, and commits after it."""
    now = time.time()
    alice, _ = world.register("alice")
    read_by_the_resend = world.user(alice.id)
    account_changes.change_email(world.deps, alice, "alice.new@example.com", now, actor=ME)

    account_changes.resend_verification(world.deps, read_by_the_resend, now)

    assert world.violations() == []
    # What the finding means: no link mailed to the new address verifies it.
    links = [_link(m) for m in world.mails(alice, "verify-email") if m["to"] == "alice.new@example.com"]
    verification.verify(world.deps, links[-1], now)
