"""Account changes in flight when another request lands, on the fakes: the answer says what happened.

Each test makes a concurrent request land between a change's read (its authentication) and its
write (tests/races.py). A change made by a signed-in caller holds on the caller's session as it was
read: one whose session was revoked meanwhile (a ban, a password set or reset, a password change
or revoke-all from another session) is 401 INVALID_SESSION_ERROR and writes nothing, whoever's
account it changes; one whose session stands is built again on the fresh read and lands, or answers
the contract error the fresh state calls for. Never INVALID_PASSWORD_ERROR where no password was
wrong. The user's own password change is in test_password_races.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accounts_api import service as accounts
from auth_api import service as auth
from auth_api.models import RegisterBody
from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.sessions.auth import Caller
from sessions_api import service as sessions
from staff_api import service as staff
from tests.fakes import FakeWorld, fake_world
from tests.races import (
    NO_FACTOR,
    PASSWORD,
    call,
    caller_of,
    code,
    lands_first,
    login,
    read,
    register,
    staff_member,
)

ACTOR = Actor("user", "203.0.113.9", "Firefox 132 on Ubuntu")
DOMAIN = "nimbus.test"
SECOND = "tr0ub4dor and 3"

pytestmark = pytest.mark.usefixtures("cheap_password_hashing")

type State = tuple[Any, ...]


def _state(world: FakeWorld) -> State:
    """What a change writes: users, claims, sessions, links and mail (records are immutable)."""
    db = world.db
    return (
        dict(db.users),
        dict(db.usernames),
        dict(db.emails),
        dict(db.sessions),
        dict(db.tokens),
        list(db.outbox),
    )


def _after(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[], object]
) -> list[State]:
    """:func:`lands_first`, and the state the concurrent request left (once it has run)."""
    left: list[State] = []

    def then_seen() -> None:
        concurrent()
        left.append(_state(world))

    lands_first(world, monkeypatch, then_seen)
    return left


def _user(world: FakeWorld, user_id: str) -> User:
    """The user as stored now."""
    stored = world.deps.users.get(user_id)
    assert stored is not None
    return stored


def _verification_mails(world: FakeWorld) -> list[str]:
    return [email.to for kind, email in world.db.outbox if kind == "verify-email"]


# --- the user's own changes ------------------------------------------------------------------------

OwnChange = Callable[[FakeWorld, Caller], object]
OWN_CHANGES: dict[str, OwnChange] = {
    "username": lambda w, c: accounts.change_username(w.deps, c, "alice_new", w.clock.now()),
    "email": lambda w, c: accounts.change_email(
        w.deps, c, "alice.new@example.com", w.clock.now(), actor=ACTOR
    ),
    "domain": lambda w, c: accounts.change_domain(w.deps, c, DOMAIN, "files", w.clock.now()),
    "resend": lambda w, c: accounts.resend_verification(w.deps, c, w.clock.now()),
    "revoke-all-but-mine": lambda w, c: sessions.revoke_all_sessions(
        w.deps,
        sessions.Owner.me(c, Actor.user("203.0.113.9", c.session)),
        keep_current=True,
        now=w.clock.now(),
    ),
}

# What revokes the session of a change in flight; each gets the user's other session as read.
Revocation = Callable[[FakeWorld, Caller], object]
REVOCATIONS: dict[str, Revocation] = {
    "another session's password change": lambda w, other: accounts.change_password(
        w.deps, other, SECOND, w.clock.now(), actor=ACTOR
    ),
    "a ban": lambda w, other: staff.ban(w.deps, _user(w, other.user.id), "spam", w.clock.now()),
    "a staff password set": lambda w, other: staff.set_password(
        w.deps, _user(w, other.user.id), SECOND, w.clock.now()
    ),
}


@pytest.fixture
def offered(world: FakeWorld) -> FakeWorld:
    """The world with a domain to choose (subdomains allowed)."""
    world.deps.domains.put(DOMAIN, subdomains=True, now=world.clock.iso())
    return world


@pytest.mark.parametrize("revocation", REVOCATIONS)
@pytest.mark.parametrize("change", OWN_CHANGES)
def test_an_own_change_whose_session_was_revoked_meanwhile_is_invalid_session_and_writes_nothing(
    offered: FakeWorld, monkeypatch: pytest.MonkeyPatch, change: str, revocation: str
) -> None:
    world = offered
    mine, theirs = register(world), login(world)
    caller, other = read(world, mine.token), read(world, theirs.token)
    left = _after(world, monkeypatch, lambda: REVOCATIONS[revocation](world, other))

    refused = code(lambda: OWN_CHANGES[change](world, caller))

    assert refused is ErrorCode.INVALID_SESSION_ERROR  # no password was wrong: the session is gone
    assert left == [_state(world)]  # nothing written after the revocation
    assert caller_of(world, mine.token) is None


def _same_session_meanwhile(world: FakeWorld, token: str, change: str) -> None:
    """The same session's password change, with a change of the same field, landed first: the
    change's read is stale on the field it writes and on the password, and its session stands."""
    accounts.change_password(world.deps, read(world, token), SECOND, world.clock.now(), actor=ACTOR)
    now, again = world.clock.now(), read(world, token)
    if change == "username":
        accounts.change_username(world.deps, again, "alice_elsewhere", now)
    elif change == "email":
        accounts.change_email(world.deps, again, "alice.elsewhere@example.com", now, actor=ACTOR)
    elif change == "domain":
        accounts.change_domain(world.deps, again, DOMAIN, "elsewhere", now)
    elif change == "resend":
        accounts.resend_verification(world.deps, again, now)


@pytest.mark.parametrize("change", OWN_CHANGES)
def test_an_own_change_whose_read_the_same_sessions_changes_made_stale_lands_on_the_fresh_read(
    offered: FakeWorld, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Not INVALID_PASSWORD_ERROR (the password changed, but this request proved the one that was
    current at its read, and takes none at all where it is a resend or a revoke-all)."""
    world = offered
    mine, elsewhere = register(world), login(world)
    caller = read(world, mine.token)
    lands_first(world, monkeypatch, lambda: _same_session_meanwhile(world, mine.token, change))

    OWN_CHANGES[change](world, caller)

    stored = _user(world, caller.user.id)
    assert caller_of(world, mine.token) is not None
    assert caller_of(world, elsewhere.token) is None
    if change == "username":
        assert stored.username == "alice_new"
    elif change == "email":
        assert (stored.email, stored.verified_at) == ("alice.new@example.com", None)
        assert _verification_mails(world)[-1] == "alice.new@example.com"
    elif change == "domain":
        assert (stored.domain, stored.subdomain) == (DOMAIN, "files")
    elif change == "resend":
        assert _verification_mails(world) == ["alice@example.com"] * 3  # register, the other, this one
        assert stored.pending_verification in world.db.tokens


def test_revoke_all_but_mine_after_the_same_sessions_password_change_counts_only_what_it_revoked(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, _ = register(world), login(world)
    caller = read(world, mine.token)
    lands_first(world, monkeypatch, lambda: _same_session_meanwhile(world, mine.token, "password"))

    count = OWN_CHANGES["revoke-all-but-mine"](world, caller)

    assert count == 0  # the password change had revoked the other session already
    assert caller_of(world, mine.token) is not None


def test_a_rename_to_a_name_taken_meanwhile_is_user_exists_after_the_fresh_read(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same session's password change made the read stale, and another user took the name: the
    fresh read finds the session standing and the name taken (409), not a wrong password."""
    mine = register(world)
    caller = read(world, mine.token)

    def meanwhile() -> None:
        _same_session_meanwhile(world, mine.token, "password")
        register(world, "alice_new")

    lands_first(world, monkeypatch, meanwhile)

    assert code(lambda: OWN_CHANGES["username"](world, caller)) is ErrorCode.USER_EXISTS_ERROR
    assert _user(world, caller.user.id).username == "alice"


# --- staff changes ---------------------------------------------------------------------------------

# Each staff change: its method, path (the user's id in place of {id}), body, and what the user must
# be first for the change to change anything.
STAFF_CHANGES: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, Any]]] = {
    "ban": ("PUT", "/users/{id}/ban", {"reason": "spam", "password": PASSWORD}, {}),
    "unban": ("DELETE", "/users/{id}/ban", {"password": PASSWORD}, {"banned_at": "2026-01-01T00:00:00.000Z"}),
    "verify": ("PUT", "/users/{id}/verify", {"password": PASSWORD}, {}),
    "unverify": (
        "DELETE",
        "/users/{id}/verify",
        {"password": PASSWORD},
        {"verified_at": "2026-01-01T00:00:00.000Z"},
    ),
    "promote": ("PUT", "/users/{id}/staff", {"password": PASSWORD}, {"second_factors": "a phone"}),
    "demote": ("DELETE", "/users/{id}/staff", {"password": PASSWORD}, {"staff": True}),
    "username": ("PUT", "/users/{id}/username", {"username": "bob_renamed", "password": PASSWORD}, {}),
    "email": ("PUT", "/users/{id}/email", {"email": "bob.new@example.com", "password": PASSWORD}, {}),
    "password": (
        "PUT",
        "/users/{id}/password",
        {"newPassword": SECOND, "confirmNewPassword": SECOND, "password": PASSWORD},
        {},
    ),
    "domain": ("PUT", "/users/{id}/domain", {"domain": DOMAIN, "subdomain": "files"}, {}),
    "resend": ("GET", "/users/{id}/verify", None, {}),
    "delete": ("DELETE", "/users/{id}", {"password": PASSWORD}, {}),
    "bulk delete": ("DELETE", "/users", {"ids": ["{id}"], "password": PASSWORD}, {}),
}

# What revokes the staff member's own session meanwhile (another staff member, or the operator).
STAFF_REVOCATIONS: dict[str, Callable[[FakeWorld, str], object]] = {
    "banned": lambda w, staff_id: staff.ban(w.deps, _user(w, staff_id), "compromised", w.clock.now()),
    "password set": lambda w, staff_id: staff.set_password(w.deps, _user(w, staff_id), SECOND, w.clock.now()),
}


def _staff_world() -> tuple[FakeWorld, str, str, str]:
    """A world with a domain, a staff member (their token and id) and the user bob (his id)."""
    world = fake_world(NO_FACTOR)
    world.deps.domains.put(DOMAIN, subdomains=True, now=world.clock.iso())
    token, staff_id = staff_member(world)
    bob = read(world, register(world, "bob").token).user
    return world, token, staff_id, bob.id


def _prepared(world: FakeWorld, user_id: str, change: str) -> None:
    """Make bob someone the change changes."""
    fields = dict(STAFF_CHANGES[change][3])
    if "second_factors" in fields:
        stamp = world.clock.iso()
        phone = SecondFactor(
            id="f1", type="totp", name="Phone", created_at=stamp, updated_at=stamp, secret="A" * 32
        )
        fields["second_factors"] = {phone.id: phone}
    if fields:
        user = _user(world, user_id)
        world.tx.commit(world.deps.users.change_ops(user, user.changed(**fields)))


def _staff_request(world: FakeWorld, token: str, change: str, user_id: str) -> tuple[int, dict[str, Any]]:
    method, path, body, _ = STAFF_CHANGES[change]
    if body is not None and "ids" in body:
        body = {**body, "ids": [user_id]}
    return call(world, token, method, path.format(id=user_id), body)


@pytest.mark.parametrize("revocation", STAFF_REVOCATIONS)
@pytest.mark.parametrize("change", STAFF_CHANGES)
def test_a_staff_change_whose_staff_session_was_revoked_meanwhile_is_invalid_session_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, change: str, revocation: str
) -> None:
    """The staff member's session stood when the request was authenticated and reverified; a ban of
    theirs or a password set (as a reset would) landed before the change's write."""
    world, token, staff_id, bob_id = _staff_world()
    _prepared(world, bob_id, change)
    left = _after(world, monkeypatch, lambda: STAFF_REVOCATIONS[revocation](world, staff_id))

    status, answer = _staff_request(world, token, change, bob_id)

    assert (status, answer["code"]) == (401, "INVALID_SESSION_ERROR")
    assert left == [_state(world)]  # bob as the revocation left him: nothing written
    assert caller_of(world, token) is None


@pytest.mark.parametrize("change", ["ban", "username", "delete"])
def test_a_staff_change_whose_staff_session_stands_lands_after_their_own_password_change(
    monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The staff member changed their own password from the same session meanwhile: their sessions'
    generation moved, this one with it, so the change is built again on the fresh read and lands."""
    world, token, _, bob_id = _staff_world()
    lands_first(
        world,
        monkeypatch,
        lambda: accounts.change_password(
            world.deps, read(world, token), SECOND, world.clock.now(), actor=ACTOR
        ),
    )

    status, answer = _staff_request(world, token, change, bob_id)

    assert status == 200, answer
    bob = world.deps.users.get(bob_id)
    if change == "delete":
        assert bob is None
    else:
        assert bob is not None
        assert (bob.ban_reason, bob.username) == (
            ("spam", "bob") if change == "ban" else (None, "bob_renamed")
        )
    assert caller_of(world, token) is not None


def test_a_staff_change_of_their_own_account_whose_session_another_staff_member_revoked_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Their own account through the staff path: the session and the account are one item, and the
    change's write holds on the session generation it read."""
    world, token, staff_id, _ = _staff_world()
    left = _after(world, monkeypatch, lambda: STAFF_REVOCATIONS["banned"](world, staff_id))

    status, answer = _staff_request(world, token, "username", staff_id)

    assert (status, answer["code"]) == (401, "INVALID_SESSION_ERROR")
    assert left == [_state(world)]


def test_a_staff_bulk_deletion_naming_their_own_account_first_deletes_every_account_named() -> None:
    """Their own account goes last: the deletions after it would hold on a session already gone."""
    world, token, staff_id, bob_id = _staff_world()

    status, answer = call(world, token, "DELETE", "/users", {"ids": [staff_id, bob_id], "password": PASSWORD})

    assert (status, answer.get("count")) == (200, 2), answer
    assert [world.deps.users.get(u) for u in (staff_id, bob_id)] == [None, None]


# --- claims and generations a concurrent request moved -----------------------------------------------


def test_an_address_change_to_an_address_taken_meanwhile_in_another_spelling_is_user_exists(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user took the address, spelled in another case and with ß for ss, between the change's
    read and its write: the claim is one key for every spelling, so the change is 409 and the address
    stays where it was (the HTTP suite races a uniqueness claim once, at registration)."""
    caller = read(world, register(world).token)

    def meanwhile() -> None:
        body = {"username": "bob", "email": "Alice.STRASSE@example.com", "password": PASSWORD}
        auth.register(
            world.deps, RegisterBody.model_validate(body), session_name="curl", now=world.clock.now()
        )

    lands_first(world, monkeypatch, meanwhile)

    new = "alice.straße@example.com"
    assert code(lambda: accounts.change_email(world.deps, caller, new, world.clock.now(), actor=ACTOR)) is (
        ErrorCode.USER_EXISTS_ERROR
    )
    assert _user(world, caller.user.id).email == "alice@example.com"


@pytest.mark.parametrize("keep_current", [True, False])
def test_a_scoped_session_created_on_a_read_from_before_a_revoke_all_is_born_revoked(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch, keep_current: bool
) -> None:
    """A revoke-all (keeping its own session or not) landed between the creation's read and its
    write: the new session belongs to the generation read, which the revocation left, so it never
    works; one created after the revocation, on the generation it moved to, does."""
    mine, other = register(world), login(world)
    caller = read(world, mine.token)
    revoker = read(world, other.token)
    lands_first(
        world,
        monkeypatch,
        lambda: sessions.revoke_all_sessions(
            world.deps,
            sessions.Owner.me(revoker, Actor.user("203.0.113.9", revoker.session)),
            keep_current=keep_current,
            now=world.clock.now(),
        ),
    )

    def create(by: Caller) -> str:
        issued = sessions.create_scoped_session(
            world.deps,
            by,
            name="uploader",
            permission_flags=4,
            long_lived=False,
            now=world.clock.now(),
            actor=ACTOR,
        )
        return issued.token

    before = create(caller)

    assert caller_of(world, before) is None
    assert caller_of(world, mine.token) is None
    if keep_current:
        after = create(read(world, other.token))
        assert caller_of(world, after) is not None
