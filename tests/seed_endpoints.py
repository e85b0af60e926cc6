"""The seed specification's endpoint requirements, transcribed as data (plus the CONTRACT's additions).

One row per endpoint of the seed's Endpoints section, implemented or not, in the seed's order, with
what the seed lists for it: Staff, Scope, Kill switches, Reverify, Ratelimit (from its Limits table)
and whether scoped sessions may call it. Paths are written as in the seed (``:id``). The rows are
deliberately plain literals (names, not the service's enums) so this file is an independent
transcription the service's own Policy declarations are checked against
(tests/unit/test_endpoint_registry.py).

Resolutions applied from CONTRACT.md:
- section 8: the session deletes' switch, "ACCOUNT_MODIFY shown with number 2", is ACCOUNT_MODIFY (1);
- section 8: PATCH /users/:uid/sessions/:sid's scope "STAFF_SESSION_MODIFY" is STAFF_MODIFY_SESSIONS;
- section 8: PUT /users/me/password and PUT /users/me/email are closed to scoped sessions (the seed's
  scope ACCOUNT_MODIFY there no longer opens them), and so are the staff paths naming the caller's own
  account for those changes, for deletion and for removing second factors (``scoped_self``);
- section 8: staff is granted and changed by people: PUT and DELETE /users/:id/staff are closed to
  scoped sessions, and the staff paths that change an account's password, address, verification or
  second factors are closed to them on every staff account (``scoped_staff``);
- section 1, 8 and 11 add GET /, GET /domains, GET /domains/:id and the kill-switch / log-level API.

The API describes itself: GET /openapi.json, open like GET /.

``auth``: "required" (a session is needed; the seed's default), "none" (the seed's "Authorization not
required", and GET /), "guest" (register and login: no requirement stated; a session means "already
logged in"). GLOBAL applies to every endpoint and is not listed, as in the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AuthKind = Literal["required", "none", "guest"]
Source = Literal["seed", "contract", "project"]

HOUR = 3600
MINUTE = 60


@dataclass(frozen=True, slots=True)
class SeedLimit:
    """One row of the seed's Limits table."""

    limit: int
    window: int  # seconds
    per: Literal["ip", "user"]
    not_counted: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class SeedEndpoint:
    """What the seed (or the CONTRACT) requires of one endpoint."""

    method: str
    path: str  # seed style: /users/:id
    auth: AuthKind = "required"
    staff: bool = False
    scope: str | None = None
    killswitches: tuple[str, ...] = ()
    reverify: bool = False
    rate_limit: SeedLimit | None = None
    scoped_sessions: bool = True
    # False where a scoped session may not name its own account (the path's :id/:uid, or the body's
    # ids): a staff path to what /users/me keeps from scoped sessions (CONTRACT sections 8 and 9).
    scoped_self: bool = True
    # False where a scoped session may not act on a staff account (the path's :id/:uid, its own
    # included): a change that hands the account to whoever makes it (CONTRACT section 8).
    scoped_staff: bool = True
    source: Source = "seed"

    @property
    def key(self) -> tuple[str, str]:
        """(method, path) as the seed writes it."""
        return (self.method, self.path)


_MODIFY = ("ACCOUNT_MODIFY",)
_MODIFY_EMAIL = ("ACCOUNT_MODIFY", "ACCOUNT_EMAIL_VERIFY")


def _staff_modify(
    method: str,
    path: str,
    *,
    reverify: bool = True,
    scoped_self: bool = True,
    scoped_staff: bool = True,
    scoped_sessions: bool = True,
) -> SeedEndpoint:
    return SeedEndpoint(
        method,
        path,
        staff=True,
        scope="STAFF_MODIFY_ACCOUNTS",
        reverify=reverify,
        scoped_self=scoped_self,
        scoped_staff=scoped_staff,
        scoped_sessions=scoped_sessions,
    )


SEED_ENDPOINTS: tuple[SeedEndpoint, ...] = (
    # ------------------------------------------------------------------ Account endpoints
    SeedEndpoint(
        "POST",
        "/register",
        auth="guest",
        killswitches=("ACCOUNT_CREATE", "ACCOUNT_EMAIL_VERIFY"),
        rate_limit=SeedLimit(1, 6 * HOUR, "ip", frozenset({500, 409})),
    ),
    SeedEndpoint("GET", "/users", staff=True, scope="STAFF_READ_ACCOUNTS"),
    SeedEndpoint("GET", "/users/me", scope="ACCOUNT_READ"),
    SeedEndpoint("GET", "/users/:id", staff=True, scope="STAFF_READ_ACCOUNTS"),
    SeedEndpoint(
        "PUT",
        "/users/me/username",
        scope="ACCOUNT_MODIFY",
        killswitches=_MODIFY,
        reverify=True,
        rate_limit=SeedLimit(3, 24 * HOUR, "user", frozenset({500, 409})),
    ),
    _staff_modify("PUT", "/users/:id/username"),
    # The seed's scope ACCOUNT_MODIFY gives way to CONTRACT section 8: no scoped session changes the
    # address (or the password) of its own account, on /users/me or on a staff path naming it.
    SeedEndpoint(
        "PUT",
        "/users/me/email",
        killswitches=_MODIFY_EMAIL,
        reverify=True,
        rate_limit=SeedLimit(3, 24 * HOUR, "user", frozenset({500, 409})),
        scoped_sessions=False,
    ),
    _staff_modify("PUT", "/users/:id/email", scoped_self=False, scoped_staff=False),
    SeedEndpoint("PUT", "/users/verify", auth="none", killswitches=_MODIFY_EMAIL),
    _staff_modify("PUT", "/users/:id/verify", scoped_staff=False),
    _staff_modify("DELETE", "/users/:id/verify", scoped_staff=False),
    SeedEndpoint(
        "GET",
        "/users/me/verify",
        scope="ACCOUNT_MODIFY",
        killswitches=_MODIFY_EMAIL,
        rate_limit=SeedLimit(1, 5 * MINUTE, "user", frozenset({500})),
    ),
    _staff_modify("GET", "/users/:id/verify", reverify=False),
    SeedEndpoint(
        "PUT",
        "/users/me/password",
        killswitches=_MODIFY,
        reverify=True,
        rate_limit=SeedLimit(5, 24 * HOUR, "user", frozenset({500})),
        scoped_sessions=False,
    ),
    _staff_modify("PUT", "/users/:id/password", scoped_self=False, scoped_staff=False),
    _staff_modify("PUT", "/users/:id/staff", scoped_sessions=False),
    _staff_modify("DELETE", "/users/:id/staff", scoped_sessions=False),
    _staff_modify("PUT", "/users/:id/ban"),
    _staff_modify("DELETE", "/users/:id/ban"),
    SeedEndpoint(
        "PUT",
        "/users/me/domain",
        scope="ACCOUNT_MODIFY",
        killswitches=_MODIFY,
        rate_limit=SeedLimit(20, 1 * HOUR, "user", frozenset({500})),
    ),
    _staff_modify("PUT", "/users/:id/domain", reverify=False),
    SeedEndpoint(
        "DELETE",
        "/users/me",
        killswitches=("ACCOUNT_DELETE",),
        reverify=True,
        scoped_sessions=False,
    ),
    _staff_modify("DELETE", "/users/:id", scoped_self=False),
    _staff_modify("DELETE", "/users", scoped_self=False),
    # ------------------------------------------------------------------ Session endpoints
    # Login: "Reverify with second-factor challenge". There is no session to reverify: the password
    # is the login body's own field and the challenge is login's own (tests/unit/test_endpoint_registry).
    SeedEndpoint(
        "POST",
        "/login",
        auth="guest",
        killswitches=("ACCOUNT_LOGIN",),
        reverify=True,
        rate_limit=SeedLimit(4, 5 * MINUTE, "ip", frozenset({404})),
    ),
    SeedEndpoint(
        "POST",
        "/users/me/sessions",
        killswitches=("ACCOUNT_MODIFY", "ACCOUNT_LOGIN"),
        reverify=True,
        rate_limit=SeedLimit(4, 5 * MINUTE, "ip"),
        scoped_sessions=False,
    ),
    SeedEndpoint("GET", "/users/me/sessions/:sid", scope="SESSION_READ"),
    SeedEndpoint("PATCH", "/users/me/sessions/:sid", scope="SESSION_MODIFY"),
    SeedEndpoint("GET", "/users/:uid/sessions/:sid", staff=True, scope="STAFF_READ_SESSIONS"),
    # The seed names the scope STAFF_SESSION_MODIFY; CONTRACT section 8 makes it STAFF_MODIFY_SESSIONS.
    SeedEndpoint("PATCH", "/users/:uid/sessions/:sid", staff=True, scope="STAFF_MODIFY_SESSIONS"),
    SeedEndpoint("GET", "/users/me/sessions", scope="SESSION_READ"),
    SeedEndpoint("GET", "/users/:uid/sessions", staff=True, scope="STAFF_READ_SESSIONS"),
    # "Kill switch named ACCOUNT_MODIFY, shown with number 2": ACCOUNT_MODIFY, number 1 (CONTRACT 8).
    SeedEndpoint("DELETE", "/users/me/sessions/:sid", scope="SESSION_MODIFY", killswitches=_MODIFY),
    SeedEndpoint("DELETE", "/users/:uid/sessions/:sid", staff=True, scope="STAFF_MODIFY_SESSIONS"),
    SeedEndpoint("DELETE", "/users/me/sessions", scope="SESSION_MODIFY", killswitches=_MODIFY),
    SeedEndpoint("DELETE", "/users/:uid/sessions", staff=True, scope="STAFF_MODIFY_SESSIONS"),
    SeedEndpoint("DELETE", "/users/me/sessions/all", scope="SESSION_MODIFY", killswitches=_MODIFY),
    SeedEndpoint("DELETE", "/users/:uid/sessions/all", staff=True, scope="STAFF_MODIFY_SESSIONS"),
    # ------------------------------------------------------------------ CONTRACT additions
    # Section 9: second-factor management of the caller's own account. Enrolment, regeneration and
    # removal are closed to scoped sessions; changes are account modifications (ACCOUNT_MODIFY).
    SeedEndpoint(
        "POST",
        "/users/me/2fa/totp",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint(
        "POST", "/users/me/2fa/totp/confirm", killswitches=_MODIFY, scoped_sessions=False, source="contract"
    ),
    SeedEndpoint(
        "POST",
        "/users/me/2fa/webauthn",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint(
        "POST",
        "/users/me/2fa/webauthn/confirm",
        killswitches=_MODIFY,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint(
        "POST",
        "/users/me/2fa/backup",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint("GET", "/users/me/2fa", scope="SECOND_FACTOR_READ", source="contract"),
    SeedEndpoint("GET", "/users/me/2fa/:id", scope="SECOND_FACTOR_READ", source="contract"),
    SeedEndpoint(
        "DELETE",
        "/users/me/2fa/:id",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint(
        "DELETE",
        "/users/me/2fa",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    SeedEndpoint(
        "DELETE",
        "/users/me/2fa/all",
        killswitches=_MODIFY,
        reverify=True,
        scoped_sessions=False,
        source="contract",
    ),
    # Staff variants: reads with STAFF_READ_SECOND_FACTORS; removals with STAFF_MODIFY_SECOND_FACTORS,
    # reverified like the staff account changes (the client library sends the password).
    SeedEndpoint("GET", "/users/:uid/2fa", staff=True, scope="STAFF_READ_SECOND_FACTORS", source="contract"),
    SeedEndpoint(
        "GET", "/users/:uid/2fa/:id", staff=True, scope="STAFF_READ_SECOND_FACTORS", source="contract"
    ),
    *(
        SeedEndpoint(
            "DELETE",
            path,
            staff=True,
            scope="STAFF_MODIFY_SECOND_FACTORS",
            reverify=True,
            scoped_self=False,
            scoped_staff=False,
            source="contract",
        )
        for path in ("/users/:uid/2fa/:id", "/users/:uid/2fa", "/users/:uid/2fa/all")
    ),
    SeedEndpoint("GET", "/", auth="none", source="contract"),  # section 1
    SeedEndpoint("GET", "/openapi.json", auth="none", source="project"),  # the API describes itself
    SeedEndpoint("GET", "/domains", scope="ACCOUNT_READ", source="contract"),  # section 8
    SeedEndpoint("GET", "/domains/:id", scope="ACCOUNT_READ", source="contract"),  # section 8
    # Section 11: kill switches (staff, STAFF_MODIFY_KILLSWITCHES; the three changes reverify) ...
    SeedEndpoint("GET", "/killswitches", staff=True, scope="STAFF_MODIFY_KILLSWITCHES", source="contract"),
    SeedEndpoint(
        "PUT",
        "/killswitches/:id",
        staff=True,
        scope="STAFF_MODIFY_KILLSWITCHES",
        reverify=True,
        source="contract",
    ),
    SeedEndpoint(
        "DELETE",
        "/killswitches/:id",
        staff=True,
        scope="STAFF_MODIFY_KILLSWITCHES",
        reverify=True,
        source="contract",
    ),
    SeedEndpoint(
        "DELETE",
        "/killswitches",
        staff=True,
        scope="STAFF_MODIFY_KILLSWITCHES",
        reverify=True,
        source="contract",
    ),
    # ... and the log level (GET without reverification, PATCH with it).
    SeedEndpoint("GET", "/loglevel", staff=True, scope="STAFF_MODIFY_LOGLEVEL", source="contract"),
    SeedEndpoint(
        "PATCH", "/loglevel", staff=True, scope="STAFF_MODIFY_LOGLEVEL", reverify=True, source="contract"
    ),
    # Section 14: account recovery. The request refuses a logged-in caller as login does; both are
    # held by the switch that holds logins.
    SeedEndpoint(
        "POST",
        "/users/recover",
        auth="guest",
        killswitches=("ACCOUNT_LOGIN",),
        rate_limit=SeedLimit(5, 1 * HOUR, "ip"),
        source="contract",
    ),
    SeedEndpoint(
        "PUT",
        "/users/recover",
        auth="none",
        killswitches=("ACCOUNT_LOGIN",),
        rate_limit=SeedLimit(10, 15 * MINUTE, "ip", frozenset({500})),
        source="contract",
    ),
    # Section 16: signing in with a passkey (10 answers per 5 minutes per IP; the challenge step is
    # not counted, which the policy's predicate and the integration tests hold), and the challenge a
    # normal session asks for to reverify with one (our limit: the contract names none).
    SeedEndpoint(
        "POST",
        "/login/passkey",
        auth="guest",
        killswitches=("ACCOUNT_LOGIN",),
        rate_limit=SeedLimit(10, 5 * MINUTE, "ip"),
        source="contract",
    ),
    SeedEndpoint(
        "POST",
        "/users/me/reverify",
        scoped_sessions=False,
        rate_limit=SeedLimit(10, 5 * MINUTE, "user", frozenset({400})),
        source="contract",
    ),
    # Section 17: an account's activity, to its owner and to staff.
    SeedEndpoint("GET", "/users/me/activity", scope="ACCOUNT_READ", source="contract"),
    SeedEndpoint("GET", "/users/:id/activity", staff=True, scope="STAFF_READ_ACCOUNTS", source="contract"),
)

BY_KEY: dict[tuple[str, str], SeedEndpoint] = {e.key: e for e in SEED_ENDPOINTS}
