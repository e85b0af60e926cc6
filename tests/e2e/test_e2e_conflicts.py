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

One pair per kind of conflict is fired here, over real HTTP, process-isolated workers and moto:

- a write from a stale read is built again on the stored item, never lost: a ban racing the user's
  own password change;
- a revocation racing a request in flight leaves no session that outlives it: revoke-all racing
  an API key's creation (born of the revoked generation);
- two writers that exclude each other, exactly one wins: a recovery reset racing the password
  change that its mailed link is bound to.

Every other pair is proven where the concurrent request is made to land inside the change's
read-then-write window every time (tests/races.py ``lands_first``) or on moto:

- a password change racing the account's deletion: tests/integration/test_user_races.py (a change
  inside a deletion, a change whose session the deletion ended) and tests/unit/test_changes_in_flight.py
  (a change whose session was revoked meanwhile writes nothing);
- a verification resend racing an address change: tests/unit/test_invariants.py
  (``test_a_resend_built_on_a_read_from_before_an_address_change_leaves_a_link_for_the_new_address``);
- a ban racing the user's login: tests/integration/test_login.py
  (``test_a_ban_landing_between_password_check_and_session_write_opens_no_session``);
- an API key created while its own session revokes the others: tests/unit/test_changes_in_flight.py
  (``test_a_scoped_session_created_on_a_read_from_before_a_revoke_all_is_born_revoked``);
- two staff changing one user at once: tests/unit/test_account_rules.py (two bans read at once, a
  ban read before the user's own revocation);
- five password changes from one session at once: tests/unit/test_password_races.py (a change that
  loses to each of four identical ones still lands; two changes both land);
- a staff password set or another session's revoke-all against the user's change, a staff change on
  a user deleted meanwhile, a rename or a new address inside a deletion: the same files.
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


NEW_PASSWORD = "battery staple"
PASSWORD_CHANGE = {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD, "password": PASSWORD}


# -------------------------------------------------------------------------- a ban vs the user


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
