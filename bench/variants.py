"""What a scenario of ``make bench``'s calls part differs by, from the plain request an endpoint's
registration gives: ``VARIANTS``, by endpoint, with the budgets their AWS calls are held to and the
uncounted setups their requests start from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.harness import Account, Harness
from bench.stack import expect
from nimbus_core.accounts.notices import NEW_SIGN_IN_INTERVAL
from nimbus_core.adapters import container
from nimbus_core.adapters.user_items import list_partitions
from nimbus_core.adapters.user_listing import count_batches
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES, LOGIN
from nimbus_core.platform import clock
from nimbus_core.sessions.auth import USED_AT_REFRESH_SECONDS
from tests.samples import PASSWORD

Setup = Callable[[Harness, Account, dict[str, Any]], None]


@dataclass(frozen=True)
class Budget:
    """A limit on one request's AWS calls; None means "not limited"."""

    text: str
    dynamodb: int | None = None
    ssm: int | None = None
    ses: int | None = None
    total: int | None = None

    def verdict(self, trips: Mapping[str, int]) -> str:
        """OVER if ``trips`` (round trips per service) exceed any limit, else OK."""
        counted = [(self.dynamodb, trips["dynamodb"]), (self.ssm, trips["ssm"]), (self.ses, trips["sesv2"])]
        counted.append((self.total, sum(trips.values())))
        return "OVER" if any(limit is not None and n > limit for limit, n in counted) else "OK"


@dataclass(frozen=True)
class Variant:
    """How one scenario of an endpoint differs from the plain request its registration gives."""

    label: str = ""
    budget: Budget | None = None
    status: int | None = None  # the answer expected, when not the endpoint's success
    body: Mapping[str, Any] | None = None  # instead of the sample body of the endpoint's model
    query: str = ""
    params: Mapping[str, str] = field(default_factory=dict)  # path parameters given as they are
    account: bool = True  # False: the user named ("{username}") is no account
    # The state of the user the request is about (the caller, or a staff endpoint's user).
    logins: int = 0
    factor: Literal["totp", "key", "passkey"] | None = None
    staff: bool = False
    verified: bool = False
    banned: bool = False
    step: Literal["ask", "answer"] = "answer"  # "ask": the challenged first request is measured
    challenged: bool = False  # a second factor is asked for though the policy does not reverify (login)
    setup: Setup | None = None  # more uncounted setup, filling ``values`` for the body
    config: Literal["warm", "cold"] = "warm"
    # Fields the answer's body must hold: a change answered 200 without changing anything (unban
    # of a user who is not banned) would be another code path.
    expect_body: Mapping[str, Any] = field(default_factory=dict)


# Register, asking for a recovery link (whatever the name), verifying an address.
TWO_NO_MAIL = Budget("DynamoDB <= 2, SES 0", dynamodb=2, ses=0)
# Each self-service change is authentication + limit + one transaction, and never SES; so is a
# password reset (limit, token and user, transaction) and the recovery function's handling of one
# request (the index Query, the claim on a miss, one transaction).
CHANGE_BUDGET = Budget("DynamoDB <= 3, SES 0", dynamodb=3, ses=0)
# Choosing a domain reads it first: its item never joins the user's transaction (docs/scale.md).
DOMAIN_BUDGET = Budget("DynamoDB <= 4, SES 0", dynamodb=4, ses=0)
ME_BUDGET = Budget("auth 1 DynamoDB; total <= 1, SSM 0", dynamodb=1, ssm=0, total=1)
# A wrong password: the IP limit, the user's read, the account's failure counted, and the one write
# the account's activity adds (its event, which no transaction of the request carries).
FAILED_LOGIN_BUDGET = Budget("DynamoDB <= 4 (one the activity event's), SES 0", dynamodb=4, ses=0)
AUTH_ONLY_BUDGET = Budget("DynamoDB 1 (the auth read)", dynamodb=1, total=1)
TWO_BUDGET = Budget("DynamoDB <= 2", dynamodb=2)  # one session, a list, a domain
THREE_BUDGET = Budget("DynamoDB <= 3", dynamodb=3)  # a login, a scoped session, a passkey's sign-in
# A login that presents a known device: its one more read (the device, by its token's hash).
DEVICE_BUDGET = Budget("DynamoDB <= 4", dynamodb=4)
# A passkey sign-in's challenge: its one write (no rate counter: the challenge step is not counted).
CHALLENGE_BUDGET = Budget("DynamoDB 1 (one write)", dynamodb=1, total=1)
# A page of users: auth, a CreatedIndex Query per list partition and a BatchGetItem per 100 count
# shards (side by side), one BatchGetItem for the page.
PAGE_CALLS = len(list_partitions()) + len(count_batches()) + 2
PAGE_BUDGET = Budget(f"DynamoDB <= {PAGE_CALLS}", dynamodb=PAGE_CALLS)
# By design: runtime_config reads the nine switches and the log level in one GetParameters.
COLD_BUDGET = Budget("SSM <= 1 (by design)", ssm=1)
LISTED_USERS = 110  # stored for GET /users: two full pages of 50 and more
STALE = USED_AT_REFRESH_SECONDS + 300
SWITCH = KillSwitch.FILE_CREATE  # guards no Nimbus endpoint: enabling it disturbs nothing
# What fills a path parameter, by the path segment before it (the target user's: its policy names it).
PARAM_KINDS = {"sessions": "sid", "2fa": "factor", "domains": "domain", "killswitches": "switch"}


def _recovery_link(h: Harness, user: Account, values: dict[str, Any]) -> None:
    asked = h.api.call("POST", "/users/recover", {"username": user.name}, ip=h.fresh_ip())
    expect("setup: recover", 201, asked)
    values["token"] = h.verification_link(f"{user.name}@example.com", kind="recover-password")


def _listed(h: Harness, user: Account, values: dict[str, Any]) -> None:
    h.seed_users(LISTED_USERS, once=values["scenario"])  # full pages, for all of a scenario's requests


def _passkey_answer(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """A passkey sign-in's challenge (uncounted) and the user's passkey answering it."""
    asked = h.api.call("POST", "/login/passkey", {}, ip=h.fresh_ip())
    expect("setup: passkey challenge", 200, asked)
    assert user.key is not None
    values["token"] = asked.body["token"]
    values["response"] = user.key.get(asked.body["challenge"], origin=h.origin)


def _past_first_hour(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """The account made over an hour ago: a sign-in that presents no device of it mails the new
    sign-in notice (the sign-ins of an account's first hour mail none)."""
    h.set_user(user.token, createdAt=clock.iso(clock.now() - 2 * NEW_SIGN_IN_INTERVAL))


def _passkey_answer_past_first_hour(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """A passkey's answer (as :func:`_passkey_answer`) for an account made over an hour ago."""
    _past_first_hour(h, user, values)
    _passkey_answer(h, user, values)


def _known_device_locked(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """The device a sign-in answered the owner, then the account's logins locked by wrong passwords
    from addresses that each stay under their own limit."""
    signed_in = h.api.call("POST", "/login", {"username": user.name, "password": PASSWORD}, ip=h.fresh_ip())
    expect("setup: a sign-in", 201, signed_in)
    values["device"] = signed_in.body["device"]
    for n in range(ACCOUNT_AUTH_FAILURES.limit):
        wrong = {"username": user.name, "password": f"a guess {n}"}
        expect("setup: lock", 401, h.api.call("POST", "/login", wrong, ip=h.fresh_ip()))


def exhausted_login_limit(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """An address whose login limit is used up on the counter, and which this instance has not seen
    refused: its next request is refused by DynamoDB (what the refusal memo spares the others)."""
    ip = values["ip"] = h.fresh_ip()
    for _ in range(LOGIN.limit):
        reply = h.api.call("POST", "/login", {"username": user.name, "password": "x"}, ip=ip)
        expect("setup: flood", 401, reply)


def _flooding(h: Harness, user: Account, values: dict[str, Any]) -> None:
    """An address that used up its login limit, refused once by DynamoDB on this instance."""
    exhausted_login_limit(h, user, values)
    reply = h.api.call("POST", "/login", {"username": user.name, "password": "x"}, ip=values["ip"])
    expect("setup: flood", 429, reply)


V = Variant
TOTP = V(factor="totp")
# A challenged login or change: the first request, then the answers by TOTP and by security key,
# each within 3 round trips.
CHALLENGED = (
    V(factor="totp", step="ask", budget=THREE_BUDGET, challenged=True),
    V(factor="totp", budget=THREE_BUDGET, challenged=True),
    V(factor="key", budget=THREE_BUDGET, challenged=True),
)

VARIANTS: dict[str, tuple[Variant, ...]] = {
    "POST /register": (V(budget=TWO_NO_MAIL, account=False),),
    "POST /login": (
        V(" (username)", THREE_BUDGET),
        V(" (email)", THREE_BUDGET, body={"username": "{username}@example.com", "password": PASSWORD}),
        V(
            " wrong password",
            FAILED_LOGIN_BUDGET,
            status=401,
            body={"username": "{username}", "password": "not the password"},
        ),
        V(
            " (a known device, the account locked)",
            DEVICE_BUDGET,
            body={"username": "{username}", "password": PASSWORD, "device": "{device}"},
            setup=_known_device_locked,
        ),
        # The new sign-in notice is the outbox item that carries the sign-in's event: no call more.
        V(" (a new device: the sign-in notice)", THREE_BUDGET, setup=_past_first_hour),
        V(" unknown user", status=404, account=False),
        V(
            " (a refused request from a flooding address)",
            Budget("DynamoDB 0", dynamodb=0),
            status=429,
            setup=_flooding,
        ),
        *CHALLENGED,
    ),
    "POST /login/passkey": (
        V(" (challenge)", CHALLENGE_BUDGET, status=200, body={}, account=False),
        V(
            " (a passkey's answer)",
            THREE_BUDGET,
            factor="passkey",
            setup=_passkey_answer,
        ),
        V(
            " (a passkey's answer, the sign-in notice)",
            THREE_BUDGET,
            factor="passkey",
            setup=_passkey_answer_past_first_hour,
        ),
    ),
    "POST /users/recover": (V(" (an account)", TWO_NO_MAIL), V(" (no account)", TWO_NO_MAIL, account=False)),
    "PUT /users/recover": (V(budget=CHANGE_BUDGET, setup=_recovery_link),),
    "GET /users/me": (
        V(" (usedAt recent)", ME_BUDGET),
        V(f" (usedAt {STALE // 60} min old)", setup=lambda h, u, v: h.set_used_at(u.token, STALE)),
        V(", cold config cache", COLD_BUDGET, config="cold"),
    ),
    "PUT /users/me/username": (V(budget=CHANGE_BUDGET), *CHALLENGED),
    "PUT /users/me/email": (V(budget=CHANGE_BUDGET),),
    "PUT /users/me/password": (V(budget=CHANGE_BUDGET),),
    "PUT /users/me/domain": (V(budget=DOMAIN_BUDGET),),
    "GET /users/me/verify": (V(" (resend)", CHANGE_BUDGET),),
    "PUT /users/verify": (
        V(
            budget=TWO_NO_MAIL,
            setup=lambda h, u, v: v.update(token=h.verification_link(f"{u.name}@example.com")),
        ),
    ),
    "DELETE /users/me": (V(" (3 other sessions)", Budget("SES 0", ses=0), logins=3),),
    "GET /domains": (V(budget=TWO_BUDGET),),
    "GET /domains/<id>": (V(budget=TWO_BUDGET),),
    "GET /users/me/sessions": (V(" (4 live)", TWO_BUDGET, logins=3),),
    "GET /users/me/sessions/<sid>": (
        V(budget=AUTH_ONLY_BUDGET, params={"sid": "me"}, logins=3),
        V(" (another)", TWO_BUDGET, logins=3),
    ),
    "PATCH /users/me/sessions/<sid>": (V(budget=TWO_BUDGET, logins=3),),
    "DELETE /users/me/sessions/<sid>": (V(budget=TWO_BUDGET, logins=3),),
    "DELETE /users/me/sessions": (V(" (2 ids)", body={"ids": ["{sid}", "me"]}, logins=3),),
    "DELETE /users/me/sessions/all": (V(" (3 others)", logins=3),),
    "POST /users/me/sessions": (V(" (scoped)", THREE_BUDGET),),
    "GET /users/<uid>/sessions": (V(budget=TWO_BUDGET, logins=1),),
    "GET /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "PATCH /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "DELETE /users/<uid>/sessions/<sid>": (V(budget=TWO_BUDGET, logins=1),),
    "DELETE /users/<uid>/sessions": (V(logins=1),),
    "DELETE /users/<uid>/sessions/all": (V(logins=1),),
    "POST /users/me/2fa/totp": (V(budget=CHANGE_BUDGET),),
    "POST /users/me/2fa/totp/confirm": (
        V(budget=CHANGE_BUDGET, setup=lambda h, u, v: v.update(h.enrolment(u.token, "totp"))),
    ),
    "POST /users/me/2fa/webauthn": (V(budget=CHANGE_BUDGET),),
    "POST /users/me/reverify": (V(" (a passkey's challenge)", THREE_BUDGET, factor="passkey"),),
    "POST /users/me/2fa/webauthn/confirm": (
        V(budget=CHANGE_BUDGET, setup=lambda h, u, v: v.update(h.enrolment(u.token, "webauthn"))),
    ),
    "GET /users/me/2fa": (V(budget=AUTH_ONLY_BUDGET, factor="totp"),),
    "GET /users/me/2fa/<id>": (V(budget=AUTH_ONLY_BUDGET, factor="totp"),),
    "POST /users/me/2fa/backup": (TOTP,),
    "DELETE /users/me/2fa/<id>": (TOTP,),
    "DELETE /users/me/2fa": (V(" (1 id)", factor="totp"),),
    "DELETE /users/me/2fa/all": (TOTP,),
    "GET /users/<uid>/2fa": (TOTP,),
    "GET /users/<uid>/2fa/<id>": (TOTP,),
    "DELETE /users/<uid>/2fa/<id>": (TOTP,),
    "DELETE /users/<uid>/2fa": (V(" (1 id)", factor="totp"),),
    "DELETE /users/<uid>/2fa/all": (TOTP,),
    "GET /users": (
        V(" (page of 50)", PAGE_BUDGET, setup=_listed),
        V(query="?offset=50&limit=50", budget=PAGE_BUDGET, setup=_listed),
        # An offset past any list (a 64-bit one once answered 500): an empty page with the count.
        V(" (an offset past every user)", PAGE_BUDGET, query="?offset=9223372036854775807", setup=_listed),
    ),
    "DELETE /users/<id>/verify": (V(verified=True, expect_body={"verifiedAt": None}),),
    "GET /users/<id>/verify": (V(" (resend)"),),
    "PUT /users/<id>/staff": (V(factor="totp", expect_body={"staff": True}),),
    "DELETE /users/<id>/staff": (V(staff=True, expect_body={"staff": False}),),
    "PUT /users/<id>/ban": (V(step="ask"), V(" (3 sessions)", logins=2, expect_body={"banReason": "Spam"})),
    "DELETE /users/<id>/ban": (V(banned=True, expect_body={"bannedAt": None}),),
    "DELETE /users/<id>": (V(" (3 sessions)", logins=2),),
    "DELETE /users": (
        V(
            " (2 ids)",
            body={"ids": ["{uid}", "{uid2}"]},
            setup=lambda h, u, v: v.update(uid2=h.account().id),
            expect_body={"count": 2},
        ),
    ),
    # The runtime-configuration changes write SSM: each starts from switches that make it write.
    "PUT /killswitches/<id>": (V(setup=lambda h, u, v: h.set_killswitches([])),),
    "DELETE /killswitches/<id>": (V(setup=lambda h, u, v: h.set_killswitches([SWITCH])),),
    "DELETE /killswitches": (V(" (1 on)", setup=lambda h, u, v: h.set_killswitches([SWITCH])),),
    # The level stored now, so the change leaves the functions' logging as it was.
    "PATCH /loglevel": (
        V(setup=lambda h, u, v: v.update(level=container.production_deps().config.current().log_level)),
    ),
}
