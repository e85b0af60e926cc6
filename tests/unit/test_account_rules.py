"""Account rules on the fakes, in milliseconds: registration, login and its per-account lock, the
self-service changes, email verification, deletion under faults, reverification, and the number of
store round trips each change costs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from accounts_api import service as accounts
from accounts_api.routes import routes as account_routes
from auth_api import service as auth
from auth_api.models import LoginBody, RegisterBody
from nimbus_core.accounts import verification
from nimbus_core.accounts.notices import Actor
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, RateLimitedError
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import User
from nimbus_core.domain.scopes import Scope
from nimbus_core.factors.reverify import reverify
from nimbus_core.http.app import create_app
from nimbus_core.sessions import passwords
from nimbus_core.sessions.auth import Caller, authenticate
from nimbus_core.sessions.session_issuer import IssuedSession, new_session
from nimbus_core.sessions.tokens import parse_session_token
from sessions_api import service as sessions
from staff_api import service as staff
from tests.fakes import FakeWorld
from tests.recovery_requests import ask_for_recovery

PASSWORD = "correct horse"
NEW_PASSWORD = "battery staple"
DAY = 86400
NOW = 1_800_000_000.25  # FakeClock starts here
# Who the security notices of self-service changes name.
ACTOR = Actor("user", "203.0.113.9", "Firefox 132 on Ubuntu")


# argon2id at its smallest parameters (tests/unit/conftest.py): the rules are the same, the tests fast.
pytestmark = pytest.mark.usefixtures("cheap_password_hashing")


# --- helpers ---------------------------------------------------------------------------------------


def _register(world: FakeWorld, username: str = "alice", email: str | None = None) -> IssuedSession:
    body = RegisterBody.model_validate(
        {"username": username, "email": email or f"{username}@example.com", "password": PASSWORD}
    )
    return auth.register(world.deps, body, session_name="Firefox 132 on Ubuntu", now=world.clock.now())


def _login(world: FakeWorld, username: str = "alice", password: str = PASSWORD) -> IssuedSession:
    body = LoginBody.model_validate({"username": username, "password": password})
    return auth.login(world.deps, body, session_name="curl 8 on an unknown OS", now=world.clock.now())


def _authenticate(world: FakeWorld, token: str) -> Caller | None:
    parsed = parse_session_token(token)
    assert parsed is not None
    return authenticate(world.deps, parsed, world.clock.now())


def _caller(world: FakeWorld, token: str) -> Caller:
    caller = _authenticate(world, token)
    assert caller is not None
    return caller


def _user(world: FakeWorld, username: str = "alice") -> User:
    user = world.deps.users.find_by_username(username)
    assert user is not None
    return user


def _links(world: FakeWorld, to: str) -> list[str]:
    """The verification tokens mailed to ``to``, oldest first (the raw ``<userId>.<secret>``)."""
    found = []
    for kind, email in world.db.outbox:
        if email.to == to:
            assert kind == "verify-email"
            match = re.search(r"https://files\.test/verify\?token=(\S+)", email.text)
            assert match is not None
            found.append(match.group(1))
    return found


def _verified(world: FakeWorld, username: str = "alice") -> User:
    """Verify the address of a freshly registered user with the token mailed to it."""
    user = _user(world, username)
    verification.verify(world.deps, _links(world, user.email)[-1], world.clock.now())
    return _user(world, username)


def _error(action: Callable[[], object]) -> NimbusError:
    with pytest.raises(NimbusError) as raised:
        action()
    return raised.value


def _wrong_password(world: FakeWorld, attempt: int) -> NimbusError:
    return _error(lambda: _login(world, password=f"wrong {attempt}"))


def _code(action: Callable[[], object]) -> ErrorCode:
    return _error(action).code


def _user_sessions(world: FakeWorld, user_id: str) -> list[str]:
    return [sid for uid, sid in world.db.sessions if uid == user_id]


# --- register --------------------------------------------------------------------------------------


def test_register_writes_user_claims_session_token_and_outbox_in_one_commit(world: FakeWorld) -> None:
    issued = _register(world, "Alice", "Alice@Example.com")

    assert world.db.calls == ["commit"]
    (user,) = world.db.users.values()
    assert (user.username, user.email, user.verified_at, user.domain) == (
        "Alice",
        "Alice@example.com",
        None,
        "nimbus.test",
    )
    assert world.db.usernames == {username_key("Alice"): user.id}
    assert world.db.emails == {email_key("alice@example.com"): user.id}
    assert _user_sessions(world, user.id) == [issued.session.id]
    assert list(world.db.tokens) == [user.pending_verification]
    assert [(kind, email.to) for kind, email in world.db.outbox] == [("verify-email", "Alice@example.com")]
    assert _caller(world, issued.token).user == user


def test_register_that_fails_to_commit_writes_nothing(world: FakeWorld) -> None:
    world.tx.fail_next = DependencyError("injected")

    with pytest.raises(DependencyError):
        _register(world)

    assert (world.db.users, world.db.sessions, world.db.tokens, world.db.outbox) == ({}, {}, {}, [])


def test_register_with_a_taken_name_in_another_case_is_409_and_writes_nothing(world: FakeWorld) -> None:
    _register(world, "alice")

    assert _code(lambda: _register(world, "ALICE", "other@example.com")) is ErrorCode.USER_EXISTS_ERROR
    assert _code(lambda: _register(world, "bob", "ALICE@EXAMPLE.COM")) is ErrorCode.USER_EXISTS_ERROR
    assert len(world.db.users) == len(world.db.sessions) == len(world.db.tokens) == len(world.db.outbox) == 1


# --- login and the per-account lock ----------------------------------------------------------------


def test_login_opens_a_session_with_the_username_or_the_email_in_any_case(world: FakeWorld) -> None:
    _register(world)

    by_name = _login(world, "ALICE")
    by_email = _login(world, "Alice@Example.com")

    assert _caller(world, by_name.token).user.username == "alice"
    assert _caller(world, by_email.token).user.username == "alice"


def test_login_of_an_unknown_user_is_404_and_counts_nothing(world: FakeWorld) -> None:
    _register(world)

    assert _code(lambda: _login(world, "nobody")) is ErrorCode.INVALID_USER_ERROR
    assert _user(world).auth_failures == 0


def test_wrong_passwords_lock_the_account_and_the_eleventh_answer_is_429(world: FakeWorld) -> None:
    _register(world)

    answers = [_wrong_password(world, i) for i in range(11)]

    assert [a.code for a in answers[:10]] == [ErrorCode.INVALID_PASSWORD_ERROR] * 10
    locked = answers[10]
    assert isinstance(locked, RateLimitedError)
    assert (locked.status, locked.account_lock, locked.retry_after) == (429, True, 15 * 60)
    assert _user(world).auth_failures == 10


def test_a_locked_account_refuses_even_the_right_password_until_the_window_ends(world: FakeWorld) -> None:
    _register(world)
    for i in range(10):
        _wrong_password(world, i)

    world.clock.advance(14 * 60)
    world.db.calls.clear()
    refused = _error(lambda: _login(world))
    assert world.db.calls == ["users.find"]  # neither the password is checked nor a failure counted
    world.clock.advance(60)
    issued = _login(world)

    assert isinstance(refused, RateLimitedError)
    assert (refused.account_lock, refused.retry_after) == (True, 60)
    assert _caller(world, issued.token).user.username == "alice"


def test_a_banned_user_is_told_only_after_the_right_password(world: FakeWorld) -> None:
    _register(world)
    user = _user(world)
    world.db.users[user.id] = user.changed(banned_at=world.clock.iso(), ban_reason="spam")

    assert _code(lambda: _login(world, password="wrong password")) is ErrorCode.INVALID_PASSWORD_ERROR
    world.db.calls.clear()
    assert _code(lambda: _login(world)) is ErrorCode.BANNED_ERROR
    # Answered before any write but the account's activity event of the refused sign-in.
    assert world.db.calls == ["users.find", "outbox.record_event"]


# --- change username / email -----------------------------------------------------------------------


def test_change_username_frees_the_old_name_for_someone_else(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)

    changed = accounts.change_username(world.deps, caller, "Alicia", world.clock.now())

    assert world.deps.users.find_by_username("alicia") == changed
    assert world.deps.users.find_by_username("alice") is None
    _register(world, "ALICE", "new.alice@example.com")
    assert world.db.usernames[username_key("alice")] != changed.id


def test_change_username_to_a_taken_name_is_409_and_changes_nothing(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    _register(world, "bob")

    refused = _code(lambda: accounts.change_username(world.deps, caller, "BOB", world.clock.now()))

    assert refused is ErrorCode.USER_EXISTS_ERROR
    assert _user(world) == caller.user


def test_change_email_starts_unverified_and_mails_a_link_to_the_new_address(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    caller = Caller(_verified(world), caller.session)
    world.clock.advance(60)

    changed = accounts.change_email(world.deps, caller, "alice@new.example", world.clock.now(), actor=ACTOR)

    assert changed.verified_at is None
    assert _user(world) == changed
    (link,) = _links(world, "alice@new.example")
    user_id, _, secret = link.partition(".")
    assert (user_id, len(secret)) == (changed.id, 43)
    assert world.deps.users.find_by_email("ALICE@example.com") is None
    verification.verify(world.deps, link, world.clock.now())
    assert _user(world).verified_at == world.clock.iso()


def test_change_email_revokes_the_link_sent_to_the_old_address(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    (old_link,) = _links(world, "alice@example.com")

    accounts.change_email(world.deps, caller, "alice@new.example", world.clock.now(), actor=ACTOR)

    refused = _code(lambda: verification.verify(world.deps, old_link, world.clock.now()))
    assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    assert list(world.db.tokens) == [_user(world).pending_verification]  # the old token is gone


@pytest.mark.parametrize("spelling", ["ALICE@example.com", "alice@EXAMPLE.com"])
def test_another_spelling_of_the_address_starts_unverified_and_mails_it(
    world: FakeWorld, spelling: str
) -> None:
    # The same claim (casefolded, IDNA domain), but a different string: a new address to verify.
    caller = _caller(world, _register(world).token)
    verified = _verified(world)

    changed = accounts.change_email(world.deps, Caller(verified, caller.session), spelling, NOW, actor=ACTOR)

    assert changed.email == spelling
    assert changed.verified_at is None
    assert len(_links(world, spelling)) == 1
    assert world.db.emails == {email_key("alice@example.com"): verified.id}


def test_a_pending_link_dies_with_a_change_to_another_spelling_of_the_address(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    (link,) = _links(world, "alice@example.com")
    accounts.change_email(world.deps, caller, "Alice@Example.com", world.clock.now(), actor=ACTOR)

    refused = _code(lambda: verification.verify(world.deps, link, world.clock.now()))

    assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    assert _user(world).verified_at is None


def test_the_identical_address_is_no_change(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    verified = _verified(world)
    mails = len(world.db.outbox)

    same = accounts.change_email(
        world.deps, Caller(verified, caller.session), verified.email, NOW, actor=ACTOR
    )

    assert same == verified
    assert len(world.db.outbox) == mails


# --- verify ----------------------------------------------------------------------------------------


def test_verify_is_single_use(world: FakeWorld) -> None:
    _register(world)
    (link,) = _links(world, "alice@example.com")

    verification.verify(world.deps, link, world.clock.now())
    again = _code(lambda: verification.verify(world.deps, link, world.clock.now()))

    assert _user(world).verified_at == world.clock.iso()
    assert _user(world).pending_verification is None
    assert again is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    assert world.db.tokens == {}


def test_verify_refuses_a_secret_presented_for_another_user(world: FakeWorld) -> None:
    _register(world)
    _register(world, "bob")
    (alice_link,) = _links(world, "alice@example.com")
    forged = f"{_user(world, 'bob').id}.{alice_link.partition('.')[2]}"

    refused = _code(lambda: verification.verify(world.deps, forged, world.clock.now()))

    assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    assert _user(world, "bob").verified_at is None
    assert _user(world).verified_at is None


@pytest.mark.parametrize(("age", "valid"), [(DAY - 1, True), (DAY, False)])
def test_verify_links_last_24_hours(world: FakeWorld, age: int, valid: bool) -> None:
    _register(world)
    (link,) = _links(world, "alice@example.com")
    world.clock.advance(age)

    if valid:
        verification.verify(world.deps, link, world.clock.now())
    else:
        refused = _code(lambda: verification.verify(world.deps, link, world.clock.now()))
        assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR

    assert (_user(world).verified_at is not None) is valid


def test_verify_refuses_a_link_whose_address_changed_since(world: FakeWorld) -> None:
    _register(world)
    (link,) = _links(world, "alice@example.com")
    user = _user(world)
    # A concurrent change of address lands between the mail and the click (the token is still pending).
    world.db.users[user.id] = user.changed(email="alice@elsewhere.example")

    refused = _code(lambda: verification.verify(world.deps, link, world.clock.now()))

    assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    assert _user(world).verified_at is None


def test_verify_by_a_banned_user_is_403_and_verifies_nothing(world: FakeWorld) -> None:
    _register(world)
    (link,) = _links(world, "alice@example.com")
    user = _user(world)
    world.db.users[user.id] = user.changed(banned_at=world.clock.iso(), ban_reason="spam")

    refused = _code(lambda: verification.verify(world.deps, link, world.clock.now()))

    assert refused is ErrorCode.BANNED_ERROR
    assert _user(world).verified_at is None


@pytest.mark.parametrize("raw", ["", "nodot", "01ARZ3NDEKTSV4RRFFQ69G5FAV.short", "x" * 200])
def test_verify_refuses_malformed_tokens_without_reading_anything(world: FakeWorld, raw: str) -> None:
    assert (
        _code(lambda: verification.verify(world.deps, raw, 0)) is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    )
    assert world.db.calls == []


# --- change password -------------------------------------------------------------------------------


def test_change_password_keeps_the_current_session_and_revokes_the_others(world: FakeWorld) -> None:
    current = _register(world)
    others = [_login(world), _login(world)]
    caller = _caller(world, current.token)

    accounts.change_password(world.deps, caller, NEW_PASSWORD, world.clock.now(), actor=ACTOR)

    assert _caller(world, current.token).user.id == caller.user.id
    assert [_authenticate(world, o.token) for o in others] == [None, None]
    assert _code(lambda: _login(world)) is ErrorCode.INVALID_PASSWORD_ERROR
    assert _caller(world, _login(world, password=NEW_PASSWORD).token).user.id == caller.user.id


def test_change_password_from_a_revoked_session_changes_nothing(world: FakeWorld) -> None:
    first = _caller(world, _register(world).token)
    second = _caller(world, _login(world).token)
    accounts.change_password(world.deps, first, NEW_PASSWORD, world.clock.now(), actor=ACTOR)

    refused = _code(lambda: accounts.change_password(world.deps, second, "third password", NOW, actor=ACTOR))

    assert refused is ErrorCode.INVALID_SESSION_ERROR  # the first change revoked its session
    assert passwords.verify_password(_user(world).password_hash, NEW_PASSWORD)


# --- delete account --------------------------------------------------------------------------------


def _account_with_three_sessions(world: FakeWorld) -> tuple[Caller, list[IssuedSession]]:
    current = _register(world)
    return _caller(world, current.token), [current, _login(world), _login(world)]


def _assert_gone(world: FakeWorld, caller: Caller, issued: list[IssuedSession]) -> None:
    user = caller.user
    assert world.deps.users.get(user.id) is None
    assert (world.db.usernames, world.db.emails, world.db.tokens) == ({}, {}, {})
    assert _user_sessions(world, user.id) == []
    assert [_authenticate(world, i.token) for i in issued] == [None] * len(issued)


def test_delete_account_removes_user_claims_sessions_and_token_and_frees_the_name(world: FakeWorld) -> None:
    caller, issued = _account_with_three_sessions(world)
    assert caller.user.pending_verification in world.db.tokens

    accounts.delete_account(world.deps, caller)

    _assert_gone(world, caller, issued)
    again = _register(world, "ALICE", "Alice@Example.com")
    assert _caller(world, again.token).user.id != caller.user.id


class _FailOnce:
    """Wraps a store method so that its ``nth`` call raises DependencyError."""

    def __init__(self, method: Callable[..., Any], nth: int = 1) -> None:
        self.method, self.nth, self.calls = method, nth, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.nth:
            raise DependencyError("injected fault")
        return self.method(*args, **kwargs)


def _fail_delete_many(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = world.deps.sessions
    monkeypatch.setattr(sessions, "delete_many", _FailOnce(sessions.delete_many))


def _fail_commit(world: FakeWorld, _: pytest.MonkeyPatch) -> None:
    world.tx.fail_next = DependencyError("injected fault")


@pytest.mark.parametrize("fault", [_fail_delete_many, _fail_commit], ids=lambda f: f.__name__)
def test_a_fault_during_delete_account_leaves_a_usable_account_and_a_retry_completes(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch, fault: Callable[[FakeWorld, Any], None]
) -> None:
    caller, issued = _account_with_three_sessions(world)
    fault(world, monkeypatch)

    with pytest.raises(DependencyError):
        accounts.delete_account(world.deps, caller)

    assert world.deps.users.get(caller.user.id) == caller.user
    assert _caller(world, issued[0].token).session.id == caller.session.id
    relogin = _login(world)
    accounts.delete_account(world.deps, _caller(world, issued[0].token))
    _assert_gone(world, caller, [*issued, relogin])


def test_a_fault_while_sweeping_after_delete_account_is_not_an_error(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller, issued = _account_with_three_sessions(world)
    sessions = world.deps.sessions
    monkeypatch.setattr(sessions, "delete_many", _FailOnce(sessions.delete_many, nth=2))

    accounts.delete_account(world.deps, caller)

    _assert_gone(world, caller, issued)


# --- reverify --------------------------------------------------------------------------------------


def _scoped_caller(world: FakeWorld) -> Caller:
    user = _user(world)
    scoped = new_session(
        user, name="ci", lifetime=DAY, now=world.clock.now(), permission_flags=int(Scope.ACCOUNT_MODIFY)
    )
    world.tx.commit([world.deps.sessions.put_op(scoped.session)])
    return _caller(world, scoped.token)


def test_reverify_never_asks_a_scoped_session(world: FakeWorld) -> None:
    _register(world)
    caller = _scoped_caller(world)
    world.db.calls.clear()

    reverify(world.deps, caller, {}, world.clock.now(), endpoint="PUT /users/me/username")

    assert world.db.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"2fa": {"token": "t", "type": "totp", "code": "123456"}},
        {"password": None},
        {"password": 12345678},
    ],
    ids=["nothing", "2fa-without-password", "null", "number"],
)
def test_reverify_without_a_password_is_missing_fields_even_with_a_2fa_object(
    world: FakeWorld, body: dict[str, Any]
) -> None:
    caller = _caller(world, _register(world).token)

    error = _error(
        lambda: reverify(world.deps, caller, body, world.clock.now(), endpoint="PUT /users/me/username")
    )

    assert (error.code, error.extra) == (ErrorCode.MISSING_FIELDS_ERROR, {"fields": ["password"]})
    assert _user(world).auth_failures == 0


def test_reverify_with_a_wrong_password_is_401_and_counted_on_the_session(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)

    refused = _code(
        lambda: reverify(
            world.deps,
            caller,
            {"password": "wrong password"},
            world.clock.now(),
            endpoint="PUT /users/me/username",
        )
    )

    assert refused is ErrorCode.INVALID_PASSWORD_ERROR
    assert _user(world).auth_failures == 0  # the login lock holds logins only (CONTRACT section 8)
    assert world.db.sessions[(caller.user.id, caller.session.id)].reverify_failures == 1


def test_reverify_with_the_right_password_costs_no_round_trip(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    world.db.calls.clear()

    reverify(world.deps, caller, {"password": PASSWORD}, world.clock.now(), endpoint="PUT /users/me/username")

    assert world.round_trips() == 0


# --- round trips through the real accounts app -----------------------------------------------------


def _call(world: FakeWorld, method: str, path: str, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    app = create_app(account_routes, deps=lambda: world.deps)
    event = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": token, "content-type": "application/json"},
        "isBase64Encoded": False,
        "body": json.dumps(body),
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "203.0.113.9"},
            "stage": "$default",
        },
    }
    result = app.resolve(event)
    return result["statusCode"], json.loads(result["body"])


# A domain is read before the commit, never checked inside it: one item that every user choosing
# the popular domain put in their transaction would make those transactions conflict.
CHANGES = [
    ("/users/me/username", {"username": "alicia"}, []),
    ("/users/me/email", {"email": "alice@new.example"}, []),
    ("/users/me/password", {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD}, []),
    ("/users/me/domain", {"domain": "nimbus.test", "subdomain": "Alice Files"}, ["domains.get"]),
]


@pytest.mark.parametrize(("path", "body", "reads"), CHANGES, ids=[c[0].rsplit("/", 1)[1] for c in CHANGES])
def test_each_change_is_authentication_plus_limit_plus_one_commit(
    world: FakeWorld, path: str, body: dict[str, Any], reads: list[str]
) -> None:
    world.deps.domains.put("nimbus.test", subdomains=True, now=world.clock.iso())
    token = _register(world).token
    world.db.calls.clear()

    status, answer = _call(world, "PUT", path, token, {**body, "password": PASSWORD})

    assert status == 200, answer
    assert world.db.calls == ["sessions.get_with_user", "counters.hit", *reads, "commit"]
    assert answer["id"] == _user(world, answer["username"]).id


def test_a_refused_change_costs_no_commit(world: FakeWorld) -> None:
    token = _register(world).token
    world.db.calls.clear()

    status, answer = _call(
        world, "PUT", "/users/me/username", token, {"username": "x", "password": "wrong pw"}
    )

    assert (status, answer["code"]) == (401, "INVALID_PASSWORD_ERROR")
    assert world.db.calls == [
        "sessions.get_with_user",
        "counters.hit",
        "sessions.count_reverify_failure",
        "outbox.record_event",  # the failure, for the account's activity: its one added write
    ]


def test_delete_account_is_authentication_plus_sweeps_around_one_commit(world: FakeWorld) -> None:
    token = _register(world).token
    world.db.calls.clear()

    status, answer = _call(world, "DELETE", "/users/me", token, {"password": PASSWORD})

    assert (status, answer["code"]) == (200, "DELETE_USER_SUCCESS")
    assert world.db.calls == [
        "sessions.get_with_user",
        "sessions.list_ids",
        "sessions.delete_many",
        "commit",
        "sessions.list_ids",
        "sessions.delete_many",
    ]


def test_login_and_verify_are_one_read_and_one_commit(world: FakeWorld) -> None:
    _register(world)
    (link,) = _links(world, "alice@example.com")
    world.db.calls.clear()

    _login(world)
    verification.verify(world.deps, link, world.clock.now())

    assert world.db.calls == ["users.find", "commit", "tokens.read_with_user", "commit"]


# --- staff changes built on a stale read ------------------------------------------------------------


@pytest.mark.parametrize("change", ["password change", "revoke-all"])
def test_a_staff_ban_read_before_the_users_own_revocation_still_lands_on_the_stored_user(
    world: FakeWorld, change: str
) -> None:
    caller = _authenticate(world, _register(world).token)
    assert caller is not None
    read_by_staff = caller.user  # the ban's target read, before the change below commits
    if change == "password change":
        accounts.change_password(world.deps, caller, NEW_PASSWORD, world.clock.now(), actor=ACTOR)
    else:
        sessions.revoke_all_sessions(
            world.deps,
            sessions.Owner.me(caller, Actor.user("203.0.113.9", caller.session)),
            keep_current=False,
            now=world.clock.now(),
        )

    banned = staff.ban(world.deps, read_by_staff, "Spam", world.clock.now())

    stored = world.deps.users.get(read_by_staff.id)
    assert stored is not None
    assert (stored.banned_at, stored.ban_reason) == (banned.banned_at, "Spam")
    # The user's change is kept too.
    assert (stored.password_hash != read_by_staff.password_hash) is (change == "password change")
    assert stored.session_generation == read_by_staff.session_generation + 2  # both revocations


def test_two_staff_bans_read_at_once_with_different_reasons_both_land_the_last_one_kept(
    world: FakeWorld,
) -> None:
    caller = _authenticate(world, _register(world).token)
    assert caller is not None

    staff.ban(world.deps, caller.user, "Spam", world.clock.now())
    staff.ban(world.deps, caller.user, "Abuse", world.clock.now())  # read before the first landed

    stored = world.deps.users.get(caller.user.id)
    assert stored is not None
    assert stored.ban_reason == "Abuse"
    assert [kind for kind, _ in world.db.outbox].count("ban") == 2


def test_a_staff_change_on_a_user_deleted_since_its_read_is_404_invalid_user(world: FakeWorld) -> None:
    caller = _authenticate(world, _register(world).token)
    assert caller is not None
    accounts.delete_account(world.deps, caller)

    assert _code(lambda: staff.ban(world.deps, caller.user, "Spam", NOW)) is ErrorCode.INVALID_USER_ERROR
    assert _code(lambda: staff.unban(world.deps, caller.user.changed(banned_at="x"), NOW)) is (
        ErrorCode.INVALID_USER_ERROR
    )


def test_a_verification_racing_a_resend_that_lands_first_is_refused_as_superseded_not_a_500(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = _caller(world, _register(world).token)
    (link,) = _links(world, "alice@example.com")
    read = world.deps.tokens.read_with_user

    def read_then_resend(kind: Any, token_hash: str, user_id: str) -> Any:
        found = read(kind, token_hash, user_id)
        if not _links(world, "alice@example.com")[1:]:  # once: the resend lands after this read
            accounts.resend_verification(world.deps, caller, world.clock.now())
        return found

    monkeypatch.setattr(world.deps.tokens, "read_with_user", read_then_resend)

    refused = _code(lambda: verification.verify(world.deps, link, world.clock.now()))

    assert refused is ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
    monkeypatch.undo()
    verification.verify(world.deps, _links(world, "alice@example.com")[-1], world.clock.now())
    assert _user(world).verified_at is not None


def test_staff_verifying_an_address_replaced_since_their_read_verifies_nothing(world: FakeWorld) -> None:
    caller = _caller(world, _register(world).token)
    read_by_staff = caller.user
    accounts.change_email(world.deps, caller, "alice@elsewhere.example", world.clock.now(), actor=ACTOR)

    answered = staff.set_verified(world.deps, read_by_staff, world.clock.now())

    assert (answered.email, answered.verified_at) == ("alice@elsewhere.example", None)
    assert _user(world).verified_at is None


def test_a_deletion_read_before_a_recovery_request_takes_the_new_recovery_link_with_the_user(
    world: FakeWorld,
) -> None:
    caller = _caller(world, _register(world).token)  # the deletion's read: no recovery link yet
    ask_for_recovery(world.deps, "alice", world.clock.now())
    assert len(world.db.recovery) == 1

    accounts.delete_account(world.deps, caller)

    assert world.deps.users.get(caller.user.id) is None
    assert world.db.recovery == {}  # rebuilt on the stored user: its pending link deleted with it
