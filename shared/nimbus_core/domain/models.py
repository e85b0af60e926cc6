"""Domain records and their public JSON shapes (CONTRACT section 5).

The records are frozen dataclasses (keyword-only, slotted). Their stored attribute names are their
field names in camelCase, so one pair of functions in ``nimbus_core.adapters.items`` maps every
entity to and from DynamoDB. Timestamps are ISO-8601 strings (the wire format); ``exp`` values are
Unix seconds. Secrets and hashes are fields here but never part of a public view.

They are not pydantic models: everything they hold was written by our own adapters from validated
input, so reading them back needs no validation, and pydantic with its models is a large share of
a function's cold start (the records are on every request's path; pydantic is loaded only by the
requests that validate a body).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

# A field whose values are records of another kind (``User.second_factors``): the item mapping
# reads and writes them as nested maps. Read with ``dataclasses.fields(...)[i].metadata``.
RECORDS = "records"
# A map field stored as one top-level attribute per entry, named ``<prefix><key>``
# (``User.totp_secrets``): an index's INCLUDE projection, which names the attributes it copies,
# then never copies them.
PREFIXED = "prefixed"

if TYPE_CHECKING:  # the public JSON's types: typing only, never imported to answer
    from nimbus_core.domain.views import DomainView, SecondFactorView, SessionView, UserView


class Record:
    """Base of every stored record (each is a frozen, keyword-only, slotted dataclass)."""

    __slots__ = ()

    def changed(self, **values: Any) -> Self:
        """A copy with ``values`` replaced."""
        return dataclasses.replace(self, **values)  # type: ignore[type-var]


@dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactor(Record):
    """An enrolled second factor, stored inside its user's item (``secondFactors.<id>``), so the
    authentication read brings every factor with the user and deleting the user deletes them.

    The secret parts (the TOTP seed, the WebAuthn public key) never leave the server: only
    :meth:`to_public` is ever answered.
    """

    id: str
    type: Literal["totp", "webauthn"]
    name: str
    created_at: str
    updated_at: str
    # TOTP: the last time step accepted (a code is accepted at most once). The seed is sealed and
    # kept outside the factor (``User.totp_secrets``); ``secret`` is a plaintext seed stored before
    # sealing existed, still read until `nimbus totp reseal` seals it.
    secret: str | None = None
    last_step: int = 0
    # WebAuthn: the credential (base64url) and its signature counter.
    credential_id: str | None = None
    public_key: str | None = None
    sign_count: int = 0
    # A passkey (CONTRACT section 16): a discoverable credential enrolled with user verification,
    # which signs its user in alone. Every other factor, imported ones included, is False.
    passkey: bool = False
    # When the factor last answered a challenge (None: never), written with that answer.
    used_at: str | None = None

    def to_public(self) -> SecondFactorView:
        """The SecondFactor structure of the API: never a secret."""
        return {
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "passkey": self.passkey,
            "usedAt": self.used_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class User(Record):
    """A user account as stored."""

    id: str
    username: str
    email: str
    password_hash: str
    created_at: str
    updated_at: str
    domain: str
    subdomain: str | None = None
    staff: bool = False
    verified_at: str | None = None
    banned_at: str | None = None
    ban_reason: str | None = None
    two_factor_backup_code_used_at: str | None = None
    # Enrolled factors by id, and the hashes of the unused backup codes (a map, so one can be
    # removed atomically by its hash). Both live in the user item: see SecondFactor.
    second_factors: dict[str, SecondFactor] = field(default_factory=dict, metadata={RECORDS: SecondFactor})
    backup_codes: dict[str, bool] = field(default_factory=dict)
    # The TOTP factors' seeds, sealed (nimbus_core.adapters.sealing), by factor id: stored one
    # attribute each (``totpSecret#<factor id>``), beside the factors rather than in them, so the
    # login indexes, which project the factors, never hold a seed.
    totp_secrets: dict[str, str] = field(default_factory=dict, metadata={PREFIXED: "totpSecret#"})
    # Failed password (and later second-factor) answers in the current per-account window.
    auth_failures: int = 0
    auth_failures_reset_at: int = 0
    # Sessions of an older generation are revoked: bumping it revokes every session at once
    # (ban, deletion, password change), checked for free by the authentication read.
    session_generation: int = 0
    # The hash of the one verification token that is still valid, if any (single pending token).
    pending_verification: str | None = None
    # The hash of the one recovery token that is still valid, if any: a newer request replaces it.
    pending_recovery: str | None = None
    # Recovery emails sent in the current per-account window (a silent limit: CONTRACT section 14).
    recovery_mails: int = 0
    recovery_mails_reset_at: int = 0

    @property
    def second_factor_count(self) -> int:
        """How many factors are enrolled (backup codes are not a factor of their own)."""
        return len(self.second_factors)

    def webauthn_factors(self) -> list[SecondFactor]:
        """The enrolled security keys (the factors a WebAuthn answer may name), oldest first."""
        keys = [f for f in self.second_factors.values() if f.type == "webauthn" and f.credential_id]
        return sorted(keys, key=lambda f: f.id)

    def passkey_factors(self) -> list[SecondFactor]:
        """The enrolled passkeys (the keys that sign their user in alone), oldest first."""
        return [f for f in self.webauthn_factors() if f.passkey]

    def to_public(self) -> UserView:
        """The User structure of the API; unset values are null, never omitted."""
        return {
            "id": self.id,
            "username": self.username,
            "email": self.email,
            "staff": self.staff,
            "domain": self.domain,
            "subdomain": self.subdomain,
            "verifiedAt": self.verified_at,
            "bannedAt": self.banned_at,
            "banReason": self.ban_reason,
            "twoFactorBackupCodeUsedAt": self.two_factor_backup_code_used_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Session(Record):
    """A login session (normal when ``permission_flags`` is None, scoped otherwise)."""

    user_id: str
    id: str
    secret_hash: str
    # The name given (X-Session-Name, a scoped session's body) or, when none was, the User-Agent it
    # was opened with: the readable device name is derived when shown (display_name), so opening a
    # session never pays for building the User-Agent parser's tables.
    name: str | None = None
    user_agent: str | None = None
    exp: int
    created_at: str
    updated_at: str
    used_at: str
    permission_flags: int | None = None
    generation: int = 0
    # Wrong passwords and second-factor answers at reverification from this session, in the current
    # window: a limit of the session's own, so the authentication read brings it for free and a
    # signed-in owner is never kept out by the per-account login lock (CONTRACT section 8).
    reverify_failures: int = 0
    reverify_failures_reset_at: int = 0

    @property
    def scoped(self) -> bool:
        """Whether this is a scoped session (created by POST /users/me/sessions)."""
        return self.permission_flags is not None

    @property
    def display_name(self) -> str:
        """The name given, else a readable device name from the User-Agent ("Firefox 132 on Ubuntu")."""
        if self.name is not None:
            return self.name
        from nimbus_core.domain.useragent import device_name  # the parser loads at the first session shown

        return device_name(self.user_agent)

    def to_public(self) -> SessionView:
        """The Session structure of the API."""
        return {
            "id": self.id,
            "exp": self.exp,
            "name": self.display_name,
            "permissionFlags": self.permission_flags,
            "usedAt": self.used_at,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationToken(Record):
    """An email verification token, stored under the hash of its secret."""

    hash: str
    user_id: str
    email: str
    created_at: str
    exp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryToken(Record):
    """A password recovery token, stored under the hash of its secret: single use, bound to its
    user, to the address it was mailed to and to the password it replaces (``password_digest``,
    a SHA-256 of the stored hash: a password changed since makes the token worthless)."""

    hash: str
    user_id: str
    email: str
    password_digest: str
    created_at: str
    exp: int
    # Wrong second-factor answers given with this token: at the limit the token is void, so whoever
    # holds the mailbox cannot guess a factor by asking for challenge after challenge.
    attempts: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownDevice(Record):
    """A known device (CONTRACT section 8, OWASP's device cookies), stored under the hash of its
    token: bound to its user and to the user's session generation when it was issued, so revoking
    every session (sign out everywhere, a password change or reset, a ban) revokes it too."""

    hash: str
    user_id: str
    generation: int
    created_at: str
    exp: int
    # Wrong passwords and answers given at login with this token, in the current window: at the
    # limit it no longer lifts the account's login lock.
    failures: int = 0
    failures_reset_at: int = 0

    def valid_for(self, user: User, *, now: float) -> bool:
        """Whether this is a known device of ``user``: issued to that user, not revoked since, not
        expired (a sign-in from it sends no new sign-in notice)."""
        return self.user_id == user.id and self.generation == user.session_generation and self.exp > now

    def lifts_lock_for(self, user: User, *, failure_limit: int, now: float) -> bool:
        """Whether this device lets a login of ``user`` past the account's login lock: valid for
        that user, and not out of wrong answers."""
        return self.valid_for(user, now=now) and not (
            self.failures >= failure_limit and self.failures_reset_at > now
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Challenge(Record):
    """A second-factor challenge (CONTRACT section 9), stored under the hash of its token.

    Bound to the user and, on reverification, to the calling session and the endpoint; valid 5
    minutes; single use; dead after 5 wrong answers. ``webauthn_challenge`` holds the WebAuthn
    request challenge (base64url) when the user has a key.
    """

    hash: str
    # None for a passkey sign-in's challenge: the passkey's answer names its user.
    user_id: str | None = None
    session_id: str | None = None
    # The recovery token (its hash) a password reset's challenge is bound to.
    recovery: str | None = None
    endpoint: str
    attempts: int = 0
    webauthn_challenge: str | None = None
    created_at: str
    exp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingFactor(Record):
    """A second factor being enrolled: shown to the user, confirmed within 10 minutes by the same
    session (the TOTP seed, or the WebAuthn creation challenge), stored under its token's hash."""

    hash: str
    user_id: str
    session_id: str
    type: Literal["totp", "webauthn"]
    # The TOTP seed shown, sealed for the user and this enrolment (a plaintext one was stored by
    # releases before sealing).
    secret: str | None = None
    webauthn_challenge: str | None = None
    passkey: bool = False  # a WebAuthn enrolment that asked for a passkey
    created_at: str
    exp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Domain(Record):
    """A domain the deployment offers; ``subdomains`` says whether users may pick a subdomain."""

    id: str
    subdomains: bool = False
    created_at: str
    updated_at: str

    def to_public(self) -> DomainView:
        """The Domain structure of the API."""
        return {
            "id": self.id,
            "subdomains": self.subdomains,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def iso_to_epoch(value: str) -> float:
    """Seconds since the epoch for one of our ISO timestamps."""
    return datetime.fromisoformat(value).timestamp()


@dataclass(frozen=True, slots=True)
class Email:
    """One outgoing message."""

    to: str
    subject: str
    text: str
    html: str
