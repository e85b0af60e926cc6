"""Conflicting requests at the same instant, over HTTP against the local API: pairs that change the
same account in ways that cannot both hold, each pair fired several rounds (ROUNDS: at the same
instant, then one side held back a few milliseconds, so that both commit orders and the overlap in
which each request read before the other committed all occur). The pairs that once showed a bug
search for that overlap instead (``hunt``), so that the bug would show again if it came back.

Every request either succeeds or gets the contract's answer for losing (never a 500), the end state
is one that some serial order of the two requests gives, and after each test the whole stack holds
its invariants (tests/invariants.py, through ``stack_whole``).

What "a serial order" means here: a request reads the account when it authenticates and writes it
when it commits, and is placed in the order by its commit. A request already authenticated when a
revocation commits may still commit after it (CONTRACT section 3: revocation takes effect on the
*next* request) where its write cannot outlive the revocation (an API key created then is born
revoked); a change of an account holds on the session it was read with, and is told that session
is gone. What must never happen is a write lost, a session surviving what revoked it, or an answer
the contract does not give for the case.

One pair per kind of conflict is fired here; the other pairs of each kind are proven on the fakes,
where the concurrent request is made to land inside the change's read-then-write window every time
(tests/races.py ``lands_first``; tests/unit/test_password_races.py, test_changes_in_flight.py and
test_account_rules.py: a staff password set or another session's revoke-all against the user's
change, two staff bans, a staff change on a user deleted meanwhile, changes to different passwords
from one session) or on moto (tests/integration/test_user_races.py: a rename or a new address
inside a deletion).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from nimbus_core.accounts.notices import Notice
from nimbus_core.domain.identity import email_key, username_key
from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import Reply, link_token, new_ip, new_name, outbox_messages
from tests.e2e.conftest import Client, parallel, run_cli, with_totp

pytestmark = pytest.mark.usefixtures("stack_whole")

PASSWORD = "correct horse"

type Outcome = tuple[int, str | None]
OK: Outcome = (200, None)  # a User in the body (no code)
CREATED: Outcome = (201, None)
SESSION_GONE: Outcome = (401, "INVALID_SESSION_ERROR")
USER_GONE: Outcome = (404, "INVALID_USER_ERROR")
BANNED: Outcome = (403, "BANNED_ERROR")
DELETED: Outcome = (200, "DELETE_USER_SUCCESS")


@dataclass(frozen=True)
class Timed:
    """A reply and when (``time.monotonic()``) its request was sent and answered."""

    reply: Reply
    sent: float
    answered: float

    @property
    def outcome(self) -> Outcome:
        body = self.reply.body
        return self.reply.status, body.get("code") if isinstance(body, dict) else None

    @property
    def body(self) -> Any:
        return self.reply.body


def at_once(*calls: Callable[[], Reply], delays: Sequence[float] = ()) -> list[Timed]:
    """Every call on its own thread, released together by a barrier (call ``i`` then waits
    ``delays[i]`` seconds, if given); the replies, none of them a 500."""
    barrier = threading.Barrier(len(calls))
    times: dict[int, tuple[float, float]] = {}

    def call(i: int) -> Reply:
        barrier.wait(timeout=30)
        if i < len(delays) and delays[i] > 0:
            time.sleep(delays[i])
        sent = time.monotonic()
        reply = calls[i]()
        times[i] = (sent, time.monotonic())
        return reply

    replies = parallel(len(calls), call)
    timed = [Timed(reply, *times[i]) for i, reply in enumerate(replies)]
    assert all(t.reply.status < 500 for t in timed), [(t.reply.status, t.body) for t in timed]
    return timed


# Rounds of a pair: (delay of the first request, delay of the second) after the barrier. At the same
# instant first, then each side held back a little, so that the commits land in both orders and in
# the overlap where each request read before the other committed (the requests take 25-100 ms).
ROUNDS: tuple[tuple[float, float], ...] = ((0, 0), (0.01, 0), (0, 0.01), (0.04, 0), (0, 0.04))


EARLY, LATE = "held-back request landed first", "held-back request read after"


def hunt(attempt: Callable[[float], str], *, delay: float, step: float, rounds: int = 12) -> Counter[str]:
    """Run ``attempt(delay)`` up to ``rounds`` times, moving ``delay`` (how long one request of the
    pair is held back) toward the window where each request reads before the other commits: longer
    after an attempt says EARLY, shorter after LATE. The attempt asserts what each round must give,
    so a wrong answer in that window fails the test; the verdicts are returned."""
    seen: Counter[str] = Counter()
    for n in range(rounds):
        try:
            verdict = attempt(delay)
        except AssertionError as failed:
            where = f"round {n + 1}, held back {delay * 1000:.0f} ms, after: {_report(seen) or 'nothing'}"
            raise AssertionError(f"{failed}\n({where})") from failed
        seen[verdict] += 1
        delay = max(0.0, delay + (step if verdict == EARLY else -step if verdict == LATE else 0.0))
    return seen


def _user(client: Client) -> tuple[str, str, str]:
    """A new user: (name, session token, id)."""
    name = new_name()
    registered = client.register(name)
    assert registered.status == 201, registered.body
    token = str(registered.body["token"])
    return name, token, token.split(".", maxsplit=1)[0]


def _login(client: Client, name: str, password: str = PASSWORD) -> str:
    reply = client.login(name, password)
    assert reply.status == 201, reply.body
    return str(reply.body["token"])


def _me(client: Client, token: str) -> Outcome:
    reply = client.call("GET", "/users/me", token=token, ip=new_ip())
    return reply.status, reply.body.get("code") if reply.status != 200 else None


def _outcome(reply: Reply) -> Outcome:
    return reply.status, reply.body.get("code") if isinstance(reply.body, dict) else None


class Staff:
    """A staff member with TOTP, answering challenges with backup codes (a new set when one is left)."""

    def __init__(self, client: Client, local_api: LocalApiProcess) -> None:
        name, self.session, _, self.codes = with_totp(client)
        promoted = run_cli(local_api, "staff", "promote", name)
        assert promoted.returncode == 0, promoted.stderr
        self.client = client

    def _code(self) -> str:
        if len(self.codes) == 1:
            regenerate = self._answered("POST", "/users/me/2fa/backup", {}, self.codes.pop())
            reply = regenerate()
            assert reply.status == 201, reply.body
            self.codes = list(reply.body["codes"])
        return self.codes.pop()

    def _answered(self, method: str, path: str, body: dict[str, Any], code: str) -> Callable[[], Reply]:
        asked = self.client.call(
            method, path, {**body, "password": PASSWORD}, token=self.session, ip=new_ip()
        )
        assert asked.body.get("code") == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", asked.body
        answer = {**body, "2fa": {"token": asked.body["token"], "type": "backup", "code": code}}
        return partial(self.client.call, method, path, answer, token=self.session, ip=new_ip())

    def reverified(self, method: str, path: str, body: dict[str, Any] | None = None) -> Callable[[], Reply]:
        """The request, reverified: challenged now with the password; the call sends the answer."""
        return self._answered(method, path, body or {}, self._code())

    def user(self, user_id: str) -> Reply:
        return self.client.call("GET", f"/users/{user_id}", token=self.session, ip=new_ip())


# One path of each function the races go through: their worker pools (4 warm workers each, started
# on demand) are filled before the first race, so no request of a pair waits for a cold start while
# the other runs alone.
WARM_UP = [
    ("POST", "/login"),  # AuthFunction
    ("GET", "/users/me"),  # AccountsFunction
    ("GET", "/users/me/sessions"),  # SessionsFunction
    ("GET", "/users/me/2fa"),  # FactorsFunction
    ("GET", "/users/0000000000000000000000000A"),  # StaffFunction
]


@pytest.fixture(scope="module", autouse=True)
def _warm_workers(client: Client) -> None:
    for method, path in WARM_UP:
        body = {"username": new_name("nobody"), "password": PASSWORD} if method == "POST" else None
        call = partial(client.call, method, path, body)
        replies = parallel(4, lambda _: call(ip=new_ip()))  # noqa: B023 (called at once, in this loop)
        assert all(r.status in (401, 404) for r in replies), [(r.status, r.body) for r in replies]


@pytest.fixture(scope="module")
def staff(client: Client, local_api: LocalApiProcess) -> tuple[Staff, Staff]:
    """Two staff members, for the whole module."""
    return Staff(client, local_api), Staff(client, local_api)


def _claims(dynamodb: Any, local_api: LocalApiProcess, *keys: str) -> list[str]:
    """Which of the users table's claim keys (USERNAME#..., EMAIL#...) are stored."""
    table = local_api.state["tables"]["UsersTable"]
    found = dynamodb.batch_get_item(
        RequestItems={table: {"Keys": [{"pk": {"S": k}} for k in keys], "ConsistentRead": True}}
    )
    return sorted(item["pk"]["S"] for item in found["Responses"][table])


def _mails(dynamodb: Any, local_api: LocalApiProcess, user_id: str, kind: str) -> list[dict[str, Any]]:
    """The outbox messages of ``kind`` about ``user_id``, oldest first (found by its UserIndex)."""
    return outbox_messages(dynamodb, local_api.state["tables"]["OutboxTable"], user_id, kind)


def _recovery_mail(dynamodb: Any, local_api: LocalApiProcess, user_id: str) -> dict[str, Any]:
    """The one recovery mail of ``user_id``, waited for: the request is answered before the account
    is looked up and the mail queued (CONTRACT section 14)."""
    table = local_api.state["tables"]["OutboxTable"]
    mails = outbox_messages(dynamodb, table, user_id, "recover-password", wait=10)
    assert mails, "no recovery mail was queued"
    (mail,) = mails
    return mail


def _link(mail: dict[str, Any]) -> str:
    """The one-time token of a mailed link (the local API's links end with ``?token=<token>``)."""
    token = link_token(str(mail["text"]))
    assert token is not None, mail["text"]
    return token


def _report(seen: Counter[Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in seen.items())


# ------------------------------------------------------------------- the user's change vs deletion

NEW_PASSWORD = "battery staple"


PASSWORD_CHANGE = {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD, "password": PASSWORD}


def test_a_users_password_change_racing_the_deletion_of_the_account_lands_before_it_or_finds_it_gone(
    client: Client, dynamodb: Any, local_api: LocalApiProcess
) -> None:
    """One session changes the password while another deletes the account. The change lands first
    (the deletion, built again on the changed user, still removes every claim) or finds the account
    gone (401: its session died with it). The change also revokes the deleting session, which is
    refused if it authenticates after that (401) and deletes if it authenticated before. (A rename
    or a new address inside a deletion: tests/integration/test_user_races.py.)"""
    seen: Counter[tuple[Outcome, Outcome]] = Counter()
    for delays in ROUNDS:
        name, deleting, _ = _user(client)
        changing = _login(client, name)

        change, delete = at_once(
            partial(client.call, "PUT", "/users/me/password", PASSWORD_CHANGE, token=changing, ip=new_ip()),
            partial(client.call, "DELETE", "/users/me", {"password": PASSWORD}, token=deleting, ip=new_ip()),
            delays=delays,
        )

        seen[(change.outcome, delete.outcome)] += 1
        assert change.outcome in {OK, SESSION_GONE}, change.body
        assert delete.outcome in {DELETED, SESSION_GONE}, delete.body
        if delete.outcome == DELETED:
            assert [_me(client, t) for t in (changing, deleting)] == [SESSION_GONE] * 2
            for login_name in (name, f"{name}@example.com"):
                assert _outcome(client.login(login_name, NEW_PASSWORD)) == USER_GONE
            keys = [f"USERNAME#{username_key(name)}", f"EMAIL#{email_key(f'{name}@example.com')}"]
            assert _claims(dynamodb, local_api, *keys) == [], "a claim outlived the deleted account"
        else:  # the password change revoked the deleting session before it authenticated
            assert change.outcome == OK
            assert [_me(client, t) for t in (changing, deleting)] == [(200, None), SESSION_GONE]
            assert client.login(name, NEW_PASSWORD).status == 201
    print(f"password change vs delete: {_report(seen)}")


# Found here once: a resend wrote its new link on the user as it read them, so after an address
# change that landed in between, the pending link was bound and mailed to the old address. Its write
# is now conditioned on the pending link it read and built again on the stored user.


def test_a_verification_resend_racing_an_address_change_leaves_a_link_that_verifies_the_new_address(
    client: Client, dynamodb: Any, local_api: LocalApiProcess
) -> None:
    """GET /users/me/verify racing PUT /users/me/email: in either serial order the last link mailed
    to the new address verifies it (a resend before the change mails the old address, whose link
    the change then supersedes; a resend after it mails the new one). The resend is held back into
    the window where it reads the user before the change commits and commits after it."""

    def attempt(held: float) -> str:
        name, session, user_id = _user(client)
        new_address = f"{name}_2@example.com"
        change = {"email": new_address, "password": PASSWORD}

        changed, resent = at_once(
            partial(client.call, "PUT", "/users/me/email", change, token=session, ip=new_ip()),
            partial(client.call, "GET", "/users/me/verify", token=session, ip=new_ip()),
            delays=(0, held),
        )

        assert changed.outcome == OK, changed.body
        assert resent.outcome == (201, "SEND_VERIFICATION_EMAIL_SUCCESS"), resent.body
        to_new = [m for m in _mails(dynamodb, local_api, user_id, "verify-email") if m["to"] == new_address]
        verified = client.call("PUT", "/users/verify", {"token": _link(to_new[-1])}, ip=new_ip())
        if verified.status != 200:  # a link bound to the address again, for the stack_whole check
            again = {"email": f"{name}_3@example.com", "password": PASSWORD}
            assert client.call("PUT", "/users/me/email", again, token=session, ip=new_ip()).status == 200
        assert _outcome(verified) == (200, "VERIFY_EMAIL_SUCCESS"), "no link verifies the new address"
        return LATE if len(to_new) == 2 else EARLY  # the resend mailed the new address: it read after

    print(f"resend vs address change: {_report(hunt(attempt, delay=0.03, step=0.005, rounds=10))}")


# -------------------------------------------------------------------------- a ban vs the user


def test_a_ban_racing_the_users_login_leaves_no_session_that_works(
    client: Client, staff: tuple[Staff, Staff]
) -> None:
    """The login lands before the ban (its session is revoked with the others) or after it (403
    BANNED_ERROR, after the right password): either way no session of the user works once both
    have answered, and the next login is refused."""
    seen: Counter[Outcome] = Counter()
    for delays in ROUNDS:
        name, session, user_id = _user(client)
        ban = staff[0].reverified("PUT", f"/users/{user_id}/ban", {"reason": "spam"})

        banned, login = at_once(ban, partial(client.login, name), delays=delays)

        seen[login.outcome] += 1
        assert banned.outcome == OK, banned.body
        assert banned.body["bannedAt"] is not None
        assert login.outcome in {CREATED, BANNED}, login.body
        tokens = [session, *([login.body["token"]] if login.outcome == CREATED else [])]
        assert [_me(client, t) for t in tokens] == [SESSION_GONE] * len(tokens)
        assert _outcome(client.login(name)) == BANNED
    print(f"login vs ban: {_report(seen)}")


# Found here once: a staff ban committed once on the user it read, so a write landing between its
# read and its commit (the user's password change or revoke-all, another staff member's ban or
# deletion) made it fail with an answer meant for the user's own request, and the ban was lost. Staff
# changes are now built again on the stored user (staff_api.service._change).


def test_a_ban_racing_the_users_own_password_change_is_never_lost(
    client: Client, staff: tuple[Staff, Staff]
) -> None:
    """Whatever the user does to their own sessions at the moment of the ban, the ban lands: before
    the user's password change (which then finds its session revoked: 401) or after it. The ban is
    held back by a delay that the rounds move into the window where it reads the user before the
    change commits and commits after it (a password change verifies and hashes with argon2: the
    local API's test profile takes milliseconds, so its reads and writes set the window).
    (The user's revoke-all instead: on the fakes, tests/unit/test_account_rules.py.)"""
    moderator = staff[0]

    def attempt(held: float) -> str:
        _, session, user_id = _user(client)
        ban = moderator.reverified("PUT", f"/users/{user_id}/ban", {"reason": "spam"})

        changed, banned = at_once(
            partial(client.call, "PUT", "/users/me/password", PASSWORD_CHANGE, token=session, ip=new_ip()),
            ban,
            delays=(0, held),
        )

        assert banned.outcome == OK, f"the ban was lost to the user's password change: {banned.body}"
        assert changed.outcome in {OK, SESSION_GONE}, changed.body
        assert moderator.user(user_id).body["bannedAt"] is not None
        assert _me(client, session) == SESSION_GONE
        return EARLY if changed.outcome == SESSION_GONE else LATE

    print(f"password change vs ban: {_report(hunt(attempt, delay=0.03, step=0.005, rounds=10))}")


# ----------------------------------------------------------------- revoke-all vs a scoped session

SCOPED = {"name": "uploader", "permissionFlags": 4, "password": PASSWORD}


def test_revoking_every_session_racing_a_scoped_session_creation_leaves_none_that_works(
    client: Client,
) -> None:
    """One session creates an API key while another revokes every session, itself included: the
    key is created from a session read before the revocation (it is born of the old generation,
    so revoked) or its creator is already revoked (401). No session of the user works after."""
    seen: Counter[Outcome] = Counter()
    for delays in ROUNDS:
        name, creating, _ = _user(client)
        revoking = _login(client, name)

        created, revoked = at_once(
            partial(client.call, "POST", "/users/me/sessions", SCOPED, token=creating, ip=new_ip()),
            partial(client.call, "DELETE", "/users/me/sessions/all?include-self=true", token=revoking),
            delays=delays,
        )

        seen[created.outcome] += 1
        assert revoked.outcome == (200, "DELETE_SESSIONS_SUCCESS"), revoked.body
        assert created.outcome in {CREATED, SESSION_GONE}, created.body
        assert revoked.body["count"] in (2, 3)  # the key is counted only if it was stored before
        tokens = [creating, revoking, *([created.body["token"]] if created.outcome == CREATED else [])]
        assert [_me(client, t) for t in tokens] == [SESSION_GONE] * len(tokens)
    print(f"scoped creation vs revoke-all: {_report(seen)}")


def test_a_scoped_session_survives_a_racing_revoke_all_only_if_it_was_created_after_it(
    client: Client,
) -> None:
    """One session creates an API key while revoking every other session. Both succeed; the key
    works afterwards exactly when it was created on the generation the revocation moved to, i.e.
    after it. From the client's clocks: a key whose creation was answered before the revocation was
    sent must be revoked, and a key created after the revocation was answered must work (when the
    two overlap, either is right: the order of the answers says nothing about the order of the
    commits)."""
    seen: Counter[str] = Counter()
    for delays in ROUNDS:
        name, caller, _ = _user(client)
        other = _login(client, name)

        created, revoked = at_once(
            partial(client.call, "POST", "/users/me/sessions", SCOPED, token=caller, ip=new_ip()),
            partial(client.call, "DELETE", "/users/me/sessions/all", token=caller, ip=new_ip()),
            delays=delays,
        )

        assert created.outcome == CREATED, created.body
        assert revoked.outcome == (200, "DELETE_SESSIONS_SUCCESS"), revoked.body
        works = _me(client, str(created.body["token"])) == (200, None)
        seen["key created after the revocation" if works else "key revoked by it"] += 1
        if created.answered < revoked.sent:
            assert not works, "a key created before the revoke-all was sent survived it"
        if revoked.answered < created.sent:
            assert works, "a key created after the revoke-all answered was revoked"
        assert [_me(client, t) for t in (caller, other)] == [(200, None), SESSION_GONE]
    print(f"scoped creation vs revoke-all-but-mine: {_report(seen)}")


# ------------------------------------------------------------------------ two staff, one user


def test_two_staff_banning_and_renaming_one_user_at_once_both_land(
    client: Client, staff: tuple[Staff, Staff]
) -> None:
    """One staff member bans a user while another renames them. The two write different attributes
    of the user (only what differs from the read is written), so both land in either order and
    neither is lost (a new address takes the same path: staff_api.service._change)."""
    first, second = staff
    seen: Counter[tuple[Outcome, Outcome]] = Counter()
    for delays in ROUNDS:
        name, session, user_id = _user(client)
        ban = first.reverified("PUT", f"/users/{user_id}/ban", {"reason": "spam"})
        rename = second.reverified("PUT", f"/users/{user_id}/username", {"username": f"{name}_2"})

        banned, renamed = at_once(ban, rename, delays=delays)

        seen[(banned.outcome, renamed.outcome)] += 1
        assert (banned.outcome, renamed.outcome) == (OK, OK), (banned.body, renamed.body)
        user = first.user(user_id).body
        assert (user["bannedAt"] is not None, user["banReason"]) == (True, "spam"), user
        assert user["username"] == f"{name}_2"
        assert _me(client, session) == SESSION_GONE
    print(f"ban vs rename: {_report(seen)}")


# ------------------------------------------------------------- recovery vs the password change


RESET_PASSWORD = "reset by link"


def test_a_recovery_reset_racing_the_users_password_change_lets_exactly_one_win(
    client: Client, dynamodb: Any, local_api: LocalApiProcess
) -> None:
    """The mailed link is bound to the password it replaces, and a reset revokes every session: the
    first to commit wins. The reset after a change finds its link dead (400); the change after a
    reset finds the password or its session gone (401). The account ends with the winner's
    password, and the changing session works exactly when the change won."""
    seen: Counter[tuple[Outcome, Outcome]] = Counter()
    for delays in ROUNDS:
        name, session, user_id = _user(client)
        asked = client.call("POST", "/users/recover", {"username": name}, ip=new_ip())
        assert asked.status == 201, asked.body
        link = _link(_recovery_mail(dynamodb, local_api, user_id))
        reset_body = {"token": link, "newPassword": RESET_PASSWORD, "confirmNewPassword": RESET_PASSWORD}
        change_body = {"password": PASSWORD, "newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD}

        reset, change = at_once(
            partial(client.call, "PUT", "/users/recover", reset_body, ip=new_ip()),
            partial(client.call, "PUT", "/users/me/password", change_body, token=session, ip=new_ip()),
            delays=delays,
        )

        seen[(reset.outcome, change.outcome)] += 1
        assert reset.outcome in {(200, "RESET_PASSWORD_SUCCESS"), (400, "INVALID_RECOVERY_TOKEN_ERROR")}
        # A change in flight when the reset committed had its password right when it read the
        # account; what happened is that the reset revoked its session, and that is its answer.
        assert change.outcome in {OK, SESSION_GONE}, change.body
        assert [reset.reply.status, change.reply.status].count(200) == 1, (reset.body, change.body)
        winner, loser = (
            (RESET_PASSWORD, NEW_PASSWORD) if reset.reply.status == 200 else (NEW_PASSWORD, RESET_PASSWORD)
        )
        assert [client.login(name, p).status for p in (winner, loser, PASSWORD)] == [201, 401, 401]
        assert _me(client, session) == ((200, None) if winner == NEW_PASSWORD else SESSION_GONE)
    print(f"reset vs password change: {_report(seen)}")


# ------------------------------------------------------- one session changing its password at once

# Found here once: of five changes sent at once from one session, each with the right password, the
# ones whose write found the hash replaced by another of them were told 401 INVALID_PASSWORD_ERROR.
# A stale write now reads the caller again: its session still stands (a change of its own session
# keeps it), so the change lands after the other; a session revoked meanwhile is told so.

PARALLEL = 5  # the endpoint's limit: 5 per 24 hours per user, every one of them counted


def _password_changes(client: Client, session: str, new_passwords: Sequence[str]) -> list[Reply]:
    """PUT /users/me/password from ``session`` once per new password, all at once."""

    def change(i: int) -> Reply:
        body = {"password": PASSWORD, "newPassword": new_passwords[i], "confirmNewPassword": new_passwords[i]}
        return client.call("PUT", "/users/me/password", body, token=session, ip=new_ip())

    replies = parallel(len(new_passwords), change)
    assert all(r.status < 500 for r in replies), [(r.status, r.body) for r in replies]
    return replies


def test_changes_of_one_sessions_password_sent_at_once_are_never_told_the_right_password_is_wrong(
    client: Client, dynamodb: Any, local_api: LocalApiProcess
) -> None:
    """Five requests from one session, each proving the password (the same one they set again, so
    it is right whenever it is judged): all five land, one after the other, the session stays and
    the other session goes, each sends its notice, and the limit counted all five."""
    name, session, user_id = _user(client)
    elsewhere = _login(client, name)

    replies = _password_changes(client, session, [PASSWORD] * PARALLEL)

    assert [_outcome(r) for r in replies] == [OK] * PARALLEL, [r.body for r in replies]
    assert [_me(client, t) for t in (session, elsewhere)] == [OK, SESSION_GONE]
    assert len(_mails(dynamodb, local_api, user_id, Notice.PASSWORD_CHANGED.kind)) == PARALLEL
    sixth = client.call(
        "PUT",
        "/users/me/password",
        {"password": PASSWORD, "newPassword": PASSWORD, "confirmNewPassword": PASSWORD},
        token=session,
        ip=new_ip(),
    )
    assert _outcome(sixth) == (429, "RATELIMITED_ERROR")
    assert client.login(name).status == 201
