"""The published client library, ``cumulonimbus-wrapper`` 5.1.0, against the local API, unchanged.

Nimbus exists so that this library keeps working. Each test runs ``client_library/flows.mjs`` with
the machine's Node.js: the script makes the library calls (register, verify, log in and answer a
TOTP challenge, list and revoke sessions, create and use a scoped session, ban a user as staff) and
prints what the library resolved to or threw, one JSON line per call; this module judges each
outcome, and cross-checks with raw HTTP where the library cannot show it (status codes, a revoked
token refused). What the library cannot do itself comes from here: the emailed verification token
(the operator tool's captured mail), TOTP codes (pyotp) and staff rights (``nimbus staff promote``).

Library bugs found on the way are asserted as the library behaves, with a comment, never worked
around on Nimbus's side (see ``test_the_librarys_documented_list_call_without_options_throws``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools.local.launcher import LocalApiProcess
from tests import totp_reference
from tests.api_client import TOTP_PERIOD, Authenticator, new_ip, new_name
from tests.e2e.conftest import Client, run_cli

REPO = Path(__file__).resolve().parents[2]
FLOWS = Path(__file__).parent / "client_library" / "flows.mjs"
LIBRARY = REPO / "node_modules" / "cumulonimbus-wrapper" / "package.json"
LIBRARY_VERSION = "5.1.0"
PASSWORD = "correct horse battery"
ACCOUNT_READ, SESSION_READ = 4, 32
WRAPPER_SESSION_NAME = "Cumulonimbus-Wrapper 5 on an unknown OS"  # from its User-Agent
CHALLENGE = "SecondFactorChallengeRequiredError"  # the library's error class for a challenge


@dataclass(frozen=True)
class Step:
    """One library call of a flow: whether it resolved, and what it resolved to or threw."""

    ok: bool
    detail: Any


class Flow:
    """The steps one run of ``flows.mjs`` printed, by name, with failure messages that show them all."""

    def __init__(self, name: str, steps: dict[str, Step], stderr: str) -> None:
        self.name, self.steps, self.stderr = name, steps, stderr

    def _step(self, step: str) -> Step:
        assert step in self.steps, f"flow {self.name} never ran step {step!r}:\n{self}"
        return self.steps[step]

    def result(self, step: str) -> Any:
        """The API body the library resolved to at ``step`` (which must have succeeded)."""
        return self.ok(step)["result"]

    def ok(self, step: str) -> Any:
        """What the library resolved to at ``step``; fails the test if the call threw."""
        outcome = self._step(step)
        assert outcome.ok, f"flow {self.name}, step {step!r} threw:\n{self}"
        return outcome.detail

    def error(self, step: str, code: str, error_class: str = "ResponseError") -> dict[str, Any]:
        """The error the library threw at ``step``: it must carry ``code`` and be ``error_class``."""
        outcome = self._step(step)
        assert not outcome.ok, f"flow {self.name}, step {step!r} should have thrown {code}:\n{self}"
        detail: dict[str, Any] = outcome.detail
        assert (detail.get("class"), detail.get("code")) == (error_class, code), f"{step}:\n{self}"
        return detail

    def __str__(self) -> str:
        lines = [
            f"  {name}: {'ok' if s.ok else 'threw'} {json.dumps(s.detail)}" for name, s in self.steps.items()
        ]
        return "\n".join([*lines, self.stderr])


class Library:
    """Runs flows of ``flows.mjs`` with Node.js against one API, each from its own source address."""

    def __init__(self, node: str, api_url: str) -> None:
        self.node, self.api_url = node, api_url

    def run(self, flow: str, *, ip: str | None = None, **args: Any) -> Flow:
        """Run ``flow`` with ``args``; the script must get to its end (exit status 0)."""
        payload = json.dumps({"api": self.api_url, "ip": ip or new_ip(), **args})
        done = subprocess.run(
            [self.node, str(FLOWS), flow, payload],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=REPO,  # node resolves cumulonimbus-wrapper from the repository's node_modules
        )
        steps: dict[str, Step] = {}
        for line in done.stdout.splitlines():
            parsed = json.loads(line)
            steps[parsed["step"]] = Step(parsed["ok"], parsed["detail"])
        ran = Flow(flow, steps, done.stderr)
        assert done.returncode == 0, f"flows.mjs {flow} exited with {done.returncode}:\n{ran}"
        return ran

    def register(self, prefix: str) -> tuple[str, str, str]:
        """A new account registered through the library: (username, user id, session token)."""
        username = new_name(prefix)
        flow = self.run("register", username=username, email=f"{username}@example.com", password=PASSWORD)
        return username, flow.result("self")["id"], flow.ok("register")["token"]


@pytest.fixture(scope="module")
def library(local_api: LocalApiProcess) -> Library:
    """Node.js and the pinned library, or a clear failure saying how to get them."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is not on PATH: `make test` installs Debian's nodejs if npm is missing")
    if not LIBRARY.is_file():
        pytest.fail(f"{LIBRARY.parent} is missing: run `make node_modules/.installed` (npm ci)")
    version = json.loads(LIBRARY.read_text())["version"]
    if version != LIBRARY_VERSION:
        pytest.fail(f"cumulonimbus-wrapper {version} installed, the lock pins {LIBRARY_VERSION}: run npm ci")
    return Library(node, local_api.api_url)


def verification_token(local_api: LocalApiProcess, address: str) -> str:
    """The token of the latest verification email to ``address``, as the user would click it."""
    deadline = time.monotonic() + 10  # the mail function sends it from the outbox stream
    while True:
        listed = run_cli(local_api, "mail", "list", "--to", address, "--json")
        assert listed.returncode == 0, listed.stderr
        links = [re.search(r"/verify\?token=([\w.-]+)", m["text"]) for m in json.loads(listed.stdout)]
        found = [link.group(1) for link in links if link]
        if found or time.monotonic() > deadline:
            assert found, f"no verification email to {address}"
            return found[-1]
        time.sleep(0.2)


def enrol_totp(library: Library, session: str) -> tuple[Authenticator, list[str]]:
    """Enrol a TOTP factor through the library: (the authenticator, the first backup codes)."""
    started = library.run("totp-begin", session=session, password=PASSWORD).ok("totp-begin")
    assert started["status"] == 200  # as upstream: nothing exists until the confirmation
    begun = started["result"]
    assert (begun["type"], begun["digits"], begun["period"]) == ("totp", 6, TOTP_PERIOD)
    authenticator = Authenticator(begun["secret"])
    confirmed = library.run(
        "totp-confirm", session=session, token=begun["token"], name="phone", code=authenticator.code()
    ).ok("totp-confirm")
    assert confirmed["status"] == 201
    assert (confirmed["result"]["type"], confirmed["result"]["name"]) == ("totp", "phone")
    codes: list[str] = confirmed["result"]["codes"]
    return authenticator, codes


def test_register_and_verify_the_email_through_the_library(
    library: Library, local_api: LocalApiProcess, client: Client
) -> None:
    username = new_name("wr_reg")
    email = f"{username}@example.com"

    registered = library.run("register", username=username, email=email, password=PASSWORD)

    token = registered.ok("register")["token"]
    me = registered.result("self")
    assert (me["username"], me["email"], me["verifiedAt"], me["staff"]) == (username, email, None, False)
    session = registered.result("session")
    assert (session["name"], session["permissionFlags"]) == (WRAPPER_SESSION_NAME, None)
    # index.d.ts types Session.id as a number (upstream's ids); Nimbus's are opaque strings
    # (CONTRACT section 5). Only TypeScript users see the difference; the library passes ids through.
    assert isinstance(session["id"], str)
    # LIBRARY BUG, latent here: the static getAPIStatus() reads `baseURL ? baseURL : BASE_URL + '/'`
    # (dist/esm/index.js line 194), so with a baseURL it requests the base URL itself, without the
    # `/`. At a bare origin, as here, URL parsing adds it; a base URL with a path would not get it.
    # index.d.ts also types the answer {version, hello}; Nimbus answers {name, version} (CONTRACT 1).
    status = registered.ok("status")
    assert (sorted(status), status["name"]) == (["name", "version"], "nimbus")

    verified = library.run("verify", session=token, verification=verification_token(local_api, email))

    assert verified.result("verify")["code"] == "VERIFY_EMAIL_SUCCESS"
    assert verified.result("self")["verifiedAt"] is not None
    verified.error("verify-again", "INVALID_VERIFICATION_TOKEN_ERROR")  # single use
    assert client.call("GET", "/users/me", token=token).body["verifiedAt"] is not None


def test_login_answers_a_totp_challenge_through_the_library(library: Library, client: Client) -> None:
    username, user_id, first = library.register("wr_2fa")
    authenticator, _ = enrol_totp(library, first)

    wrong = totp_reference.wrong_code(authenticator.totp.secret, time.time(), steps=2)
    flow = library.run(
        "login",
        username=username,
        password=PASSWORD,
        rememberMe=True,
        wrong={"type": "totp", "code": wrong},
        answer={"type": "totp", "code": authenticator.code()},
    )

    challenge = flow.error("login", "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", CHALLENGE)
    assert "totp" in challenge["types"]
    assert "backup" in challenge["types"]  # the enrolment gave a first set of backup codes
    flow.error("login-2fa-wrong", "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    token = flow.ok("login-2fa")["token"]
    assert flow.result("self")["id"] == user_id
    session = flow.result("session")
    # rememberMe: the library sends it with the answer, and the session lives 30 days, not 24 hours.
    assert session["exp"] - time.time() > 29 * 24 * 3600
    assert client.call("GET", "/users/me", token=token).status == 200


def test_a_wrong_password_is_refused_through_the_library_before_any_challenge(
    library: Library,
) -> None:
    username, _, first = library.register("wr_pw")
    enrol_totp(library, first)

    flow = library.run("login", username=username, password=PASSWORD + "!")

    flow.error("login", "INVALID_PASSWORD_ERROR")


def test_the_librarys_documented_list_call_without_options_throws(library: Library) -> None:
    """LIBRARY BUG (cumulonimbus-wrapper 5.1.0): ``getSelfSessions()``, typed in index.d.ts with
    ``options?`` optional, throws a TypeError before any request: ``toQueryString(params)``
    (dist/esm/index.js line 121, dist/cjs/index.js line 123) calls ``Object.entries(params)`` on
    ``undefined``. The same holds for every list method built on it (getUsers, getUserSessions,
    getSelfSecondFactors, ...; getDomains alone defaults its options). Callers must pass ``{}``;
    nothing on the wire is wrong, so Nimbus has nothing to change. This test pins the library's
    behaviour: it fails, and should be revisited, once a fixed version is pinned.
    """
    _, _, token = library.register("wr_bug")

    flow = library.run("list", session=token)

    error = flow.steps["list-without-options"]
    assert not error.ok, "fixed in this version of the library? then drop the workaround ({})"
    assert error.detail == {"class": "TypeError", "message": "Cannot convert undefined or null to object"}
    assert flow.result("list-with-options")["count"] == 1


def test_sessions_are_listed_and_revoked_through_the_library(library: Library, client: Client) -> None:
    username, _, token = library.register("wr_ses")
    others = [
        library.run("login", username=username, password=PASSWORD).ok("login")["token"] for _ in range(3)
    ]

    flow = library.run("sessions", session=token, others=others)

    listed = flow.result("list")
    assert listed["count"] == 4
    assert {s["name"] for s in listed["items"]} == {WRAPPER_SESSION_NAME}
    current = flow.result("current")
    assert current["id"] in {s["id"] for s in listed["items"]}
    page = flow.result("list-page")  # limit and offset as query parameters; count is the total
    assert (page["count"], len(page["items"])) == (4, 1)
    assert page["items"][0]["id"] == listed["items"][1]["id"]  # newest first, the second one

    assert flow.result("revoke-one")["code"] == "DELETE_SESSION_SUCCESS"
    flow.error("revoked-one-refused", "INVALID_SESSION_ERROR")
    assert flow.result("revoke-list") == {
        "code": "DELETE_SESSIONS_SUCCESS",
        "message": "Sessions Successfully Deleted",
        "count": 1,
    }
    # deleteAllSelfSessions() leaves includeSelf out of the query: "all but mine".
    assert flow.result("revoke-all-but-mine")["count"] == 1
    assert [s["id"] for s in flow.result("list-after")["items"]] == [current["id"]]
    # deleteAllSelfSessions(true) sends ?includeSelf=true (the contract accepts that spelling).
    assert flow.result("revoke-all-with-mine")["count"] == 1
    flow.error("self-after", "INVALID_SESSION_ERROR")

    for revoked in [token, *others]:
        reply = client.call("GET", "/users/me", token=revoked)
        assert (reply.status, reply.body["code"]) == (401, "INVALID_SESSION_ERROR")


def test_a_scoped_session_is_created_and_used_within_its_scopes_through_the_library(
    library: Library, client: Client
) -> None:
    _, user_id, token = library.register("wr_scope")

    flow = library.run(
        "scoped",
        session=token,
        password=PASSWORD,
        name="ci key",
        permissionFlags=ACCOUNT_READ | SESSION_READ,
        longLived=True,
    )

    created = flow.ok("create")
    assert created["status"] == 201
    scoped = created["result"]
    assert (scoped["name"], scoped["permissionFlags"]) == ("ci key", ACCOUNT_READ | SESSION_READ)
    assert scoped["exp"] - time.time() > 9 * 365 * 24 * 3600  # longLived: 10 years
    assert created["ratelimit"]["limit"] == 4  # the library reads the RateLimit-* headers
    assert flow.result("scoped-self")["id"] == user_id
    assert {s["id"] for s in flow.result("scoped-sessions")["items"]} >= {scoped["id"]}
    flow.error("scoped-out-of-scope", "INSUFFICIENT_PERMISSIONS_ERROR")  # no ACCOUNT_MODIFY
    flow.error("scoped-create", "INSUFFICIENT_PERMISSIONS_ERROR")  # never from a scoped session
    flow.error("scoped-delete-account", "INSUFFICIENT_PERMISSIONS_ERROR")  # never from a scoped session
    owner_view = {s["id"]: s for s in flow.result("owner-sessions")["items"]}
    assert owner_view[scoped["id"]]["permissionFlags"] == ACCOUNT_READ | SESSION_READ
    assert flow.result("revoke")["code"] == "DELETE_SESSION_SUCCESS"
    flow.error("scoped-after-revoke", "INVALID_SESSION_ERROR")

    assert client.call("GET", "/users/me", token=scoped["token"]).status == 401
    assert client.call("GET", "/users/me", token=token).status == 200  # the owner's session lives on


def test_a_scoped_session_for_a_user_with_totp_is_reverified_with_a_backup_code(
    library: Library,
) -> None:
    _, user_id, token = library.register("wr_scope2fa")
    _, backup_codes = enrol_totp(library, token)

    flow = library.run(
        "scoped",
        session=token,
        password=PASSWORD,
        answer={"type": "backup", "code": backup_codes[0]},
        name="backup key",
        permissionFlags=ACCOUNT_READ,
    )

    flow.error("create", "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", CHALLENGE)
    assert flow.ok("create-2fa")["status"] == 201
    assert flow.result("scoped-self")["id"] == user_id
    flow.error("scoped-sessions", "INSUFFICIENT_PERMISSIONS_ERROR")  # no SESSION_READ


def test_a_staff_ban_through_the_library_ends_the_users_sessions_and_logins(
    library: Library, local_api: LocalApiProcess, client: Client
) -> None:
    user, user_id, user_token = library.register("wr_banned")
    staff, _, staff_token = library.register("wr_staff")
    authenticator, _ = enrol_totp(library, staff_token)  # staff endpoints need a second factor

    not_yet = library.run("ban", session=staff_token, password=PASSWORD, user=user_id, reason="spam")
    not_yet.error("ban", "INSUFFICIENT_PERMISSIONS_ERROR")  # not staff yet
    promoted = run_cli(local_api, "staff", "promote", staff)
    assert promoted.returncode == 0, promoted.stderr

    flow = library.run(
        "ban",
        session=staff_token,
        password=PASSWORD,
        answer={"type": "totp", "code": authenticator.code()},
        user=user_id,
        reason="spam",
    )

    flow.error("ban", "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", CHALLENGE)
    banned = flow.result("ban-2fa")
    assert (banned["id"], banned["banReason"]) == (user_id, "spam")
    assert banned["bannedAt"] is not None
    assert flow.result("user")["bannedAt"] == banned["bannedAt"]

    library.run("self", session=user_token).error("self", "INVALID_SESSION_ERROR")
    library.run("login", username=user, password=PASSWORD).error("login", "BANNED_ERROR")
    # What the library's ResponseError does not carry: the status codes.
    assert client.call("GET", "/users/me", token=user_token).status == 401
    refused = client.login(user, PASSWORD, ip=new_ip())
    assert (refused.status, refused.body["code"]) == (403, "BANNED_ERROR")
