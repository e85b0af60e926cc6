"""What the rules need from the outside world, as ``typing.Protocol``s.

Services receive these ports as arguments (bundled in :class:`nimbus_core.domain.deps.Deps`) and never
import boto3: the DynamoDB/SSM/SES adapters in ``nimbus_core.adapters`` implement them for Lambda,
the in-memory fakes in ``tests/fakes`` implement them for tests, and one contract suite
(``tests/contract``) runs against both so they cannot drift.

Multi-item changes are composed from :class:`WriteOp`s that the stores build and one
:class:`Transactor` commits atomically (a DynamoDB transaction, or one locked step in the fakes).
An op carries the domain error its condition means (e.g. a taken username claim is
``USER_EXISTS_ERROR``), so a cancelled transaction raises that error, never a storage exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import (
    Challenge,
    Domain,
    Email,
    PendingFactor,
    RecoveryToken,
    SecondFactor,
    Session,
    User,
    VerificationToken,
)


class WriteOp:
    """One element of an atomic multi-item write, built by a store and committed by a Transactor."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class CounterState:
    """The outcome of one counted hit in a fixed window."""

    allowed: bool
    count: int
    limit: int
    reset_at: int  # Unix seconds when the window ends

    def remaining(self) -> int:
        """Hits left in the window."""
        return max(self.limit - self.count, 0)

    def reset_in(self, now: float) -> int:
        """Whole seconds until the window ends (at least 1 while it is open)."""
        return max(math.ceil(self.reset_at - now), 1)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """A snapshot of the operator-controlled settings."""

    enabled_switches: frozenset[KillSwitch]
    log_level: str


class Clock(Protocol):
    """The single source of time."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class Transactor(Protocol):
    """Commits write ops atomically: all of them or none."""

    def commit(self, ops: Sequence[WriteOp]) -> None:
        """Write ``ops``; a failed condition raises the domain error its op carries."""
        ...

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """Write ``first`` and ``then`` in one transaction when their items allow it (two writes of
        one item are merged into one); otherwise, or when a merged write's condition fails, commit
        ``first`` and then ``then``, each atomically, so each failure is its own domain error."""
        ...


class UserStore(Protocol):
    """Users and the claims that keep usernames and emails unique (case-insensitively)."""

    def get(self, user_id: str) -> User | None:
        """A user by id (strongly consistent)."""
        ...

    def find_by_username(self, username: str, *, index_only: bool = False) -> User | None:
        """A user by username, case-insensitively. ``index_only``: one read whatever the answer,
        without the strongly consistent second look that finds a user registered a moment ago."""
        ...

    def find_by_email(self, email: str, *, index_only: bool = False) -> User | None:
        """A user by (validated) email address, compared by :func:`nimbus_core.domain.identity.email_key`;
        ``index_only`` as for :meth:`find_by_username`."""
        ...

    def get_many(self, user_ids: Iterable[str]) -> list[User]:
        """The users among ``user_ids`` (at most 100), in one round trip, in no particular order."""
        ...

    def newest_page(self, *, limit: int, offset: int) -> tuple[int, list[User]]:
        """How many users exist (exact: counted by the transactions that create and delete them)
        and one page of them, newest first, without reading them all."""
        ...

    def create_ops(self, user: User) -> list[WriteOp]:
        """Create ``user`` with its claims and count it; a taken claim is USER_EXISTS_ERROR."""
        ...

    def change_ops(
        self,
        before: User,
        after: User,
        *,
        assume_unchanged: bool = False,
        rebuilt_when_stale: bool = False,
        sessions_unrevoked: bool = False,
    ) -> list[WriteOp]:
        """Replace ``before`` by ``after`` (same id), swapping the username/email claims that changed.

        Conditions guard exactly what the change relies on: the user still exists
        (INVALID_SESSION_ERROR), still has ``before``'s username/email key when that changes
        (USER_EXISTS_ERROR, as is a new claim already taken) and ``before``'s password hash when that
        changes (INVALID_PASSWORD_ERROR), ``before``'s pending verification and recovery links when
        those change. With ``assume_unchanged`` the stored password hash and address must also still
        be ``before``'s (what a recovery link is bound to); with ``sessions_unrevoked`` (a change
        made by a session of this user) its session generation too, so a ban, password set or
        reset, or revoke-all landed since the read makes the write stale. Those answers fit the
        user's own request; with ``rebuilt_when_stale`` any such failure on a user still stored is
        a UserChangedError, for the change to be judged again on a fresh read.
        """
        ...

    def sessions_unrevoked_op(self, user: User) -> WriteOp:
        """Check, with a change of another user, that ``user`` (the caller who makes it) still exists
        with the session generation read (no ban, password set or reset, or revoke-all since);
        a UserChangedError if not, for the caller to be read again."""
        ...

    def delete_ops(self, user: User) -> list[WriteOp]:
        """Remove the user and both claims, and count one user less; the user must still exist
        (INVALID_SESSION_ERROR), so a user deleted twice at once is counted once."""
        ...

    def credentials_unchanged_op(
        self, user: User, *, new_password_hash: str | None, now: float, failure_limit: int | None
    ) -> WriteOp:
        """Assert the user still has the verified password hash, is not banned and (unless
        ``failure_limit`` is None: a request the login lock does not hold) not locked; optionally
        store a rehashed password in the same step."""
        ...

    def add_factor_op(
        self,
        user: User,
        factor: SecondFactor,
        *,
        max_factors: int,
        backup_codes: Sequence[str] | None = None,
    ) -> WriteOp:
        """Enrol a second factor (stored in the user item), optionally with a first set of backup
        code hashes in the same write; INVALID_FIELDS_ERROR beyond ``max_factors``."""
        ...

    def remove_factors_op(self, user: User, factor_ids: Sequence[str]) -> WriteOp:
        """Remove enrolled factors (each must exist: INVALID_SECOND_FACTOR_ERROR); the last ones take
        the backup codes with them."""
        ...

    def use_totp_step_op(self, user: User, factor_id: str, step: int, used_at: str) -> WriteOp:
        """Accept a TOTP time step newer than the factor's last one (else
        INVALID_SECOND_FACTOR_RESPONSE_ERROR: a replayed code) and record ``used_at``."""
        ...

    def use_sign_count_op(self, user: User, factor_id: str, *, seen: int, new: int, used_at: str) -> WriteOp:
        """Store a WebAuthn key's new signature counter if it is still ``seen``, and ``used_at``."""
        ...

    def use_backup_code_op(self, user: User, code_hash: str, used_at: str) -> WriteOp:
        """Spend a backup code (single use) and set ``twoFactorBackupCodeUsedAt``."""
        ...

    def set_backup_codes_op(self, user: User, code_hashes: Sequence[str]) -> WriteOp:
        """Replace the user's backup codes with a new set."""
        ...

    def count_auth_failure(self, user_id: str, *, limit: int, window: int, now: float) -> CounterState | None:
        """Count a failed password/second-factor answer on the account; None if the user is gone."""
        ...


class SessionStore(Protocol):
    """Sessions, keyed by user and session id."""

    def get_with_user(self, user_id: str, session_id: str) -> tuple[Session | None, User | None]:
        """The session and its user in one round trip (strongly consistent)."""
        ...

    def get_with_users(
        self, user_id: str, session_id: str, other_user_id: str
    ) -> tuple[Session | None, User | None, User | None]:
        """The session, its user and another user (a staff endpoint's target), in one round trip."""
        ...

    def get_with_challenge(
        self, user_id: str, session_id: str, other_user_id: str | None, challenge_hash: str
    ) -> tuple[Session | None, User | None, User | None, Challenge | None]:
        """The session, its user, another user (None: none asked) and the second-factor challenge
        a reverified request answers, in one round trip."""
        ...

    def count_reverify_failure(
        self, user_id: str, session_id: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a failed reverification on the session item (one conditional atomic write: with N
        concurrent failures exactly ``limit`` are allowed in a window); None if it is gone."""
        ...

    def put_op(self, session: Session) -> WriteOp:
        """Store a new session."""
        ...

    def move_to_generation_op(self, session: Session, generation: int) -> WriteOp:
        """Move an existing session (it must still exist) to ``generation``, changing nothing else
        of what is stored: a failure counted on it since it was read stays counted."""
        ...

    def delete_op(self, user_id: str, session_id: str) -> WriteOp:
        """Remove a session (idempotent)."""
        ...

    def touch(self, session: Session, used_at: str) -> None:
        """Record use of a session."""
        ...

    def get(self, user_id: str, session_id: str) -> Session | None:
        """One stored session (strongly consistent), live or not."""
        ...

    def get_many(self, user_id: str, session_ids: Iterable[str]) -> list[Session]:
        """The stored sessions among ``session_ids`` (at most 100), in one round trip."""
        ...

    def live_page(
        self, user_id: str, *, generation: int, now: float, limit: int, offset: int
    ) -> tuple[int, list[Session]]:
        """How many live sessions (``generation``, unexpired) the user has, and one page of them,
        newest first, by one Query."""
        ...

    def count_live(self, user_id: str, *, generation: int, now: float) -> int:
        """How many live sessions the user has (a COUNT Query: no items returned)."""
        ...

    def list_ids(self, user_id: str, *, below_generation: int | None = None) -> list[str]:
        """The ids of every stored session of a user (expired ones included), or only of those
        older than ``below_generation``, by a Query."""
        ...

    def rename(
        self, user_id: str, session_id: str, name: str, updated_at: str, *, generation: int, now: float
    ) -> Session | None:
        """Rename a session if it is still live (``generation``, unexpired); None if not."""
        ...

    def delete_live(self, user_id: str, session_id: str, *, generation: int, now: float) -> bool:
        """Delete a session if it is live (``generation``, unexpired); False if there was none."""
        ...

    def delete_many(self, user_id: str, session_ids: Iterable[str]) -> None:
        """Remove sessions in batches (idempotent, safe to retry)."""
        ...


class CounterStore(Protocol):
    """Atomic fixed-window counters."""

    def hit(self, key: str, *, limit: int, window: int, now: float) -> CounterState:
        """Count one request if the window has room; report the state either way."""
        ...

    def release(self, key: str, *, reset_at: int) -> None:
        """Give one hit back, only within the same window."""
        ...

    def release_op(self, key: str, *, reset_at: int) -> WriteOp:
        """:meth:`release` as part of a transaction; raises :class:`CounterWindowMovedError` when
        committed in another window (the caller then commits without it)."""
        ...


class CounterWindowMovedError(Exception):
    """A hit could not be given back in a transaction: its window ended meanwhile."""


class TokenStore(Protocol):
    """One-time email verification and password recovery tokens, stored under the hash of their secret."""

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[VerificationToken | None, User | None]:
        """The token and the user it names, in one round trip."""
        ...

    def put_op(self, token: VerificationToken) -> WriteOp:
        """Store a new token."""
        ...

    def consume_op(self, token_hash: str) -> WriteOp:
        """Remove a token that must still exist (single use): INVALID_VERIFICATION_TOKEN_ERROR if not."""
        ...

    def delete_op(self, token_hash: str) -> WriteOp:
        """Remove a token if present."""
        ...

    def get_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """The recovery token, its user and the named second-factor challenge, in one round trip."""
        ...

    def put_recovery_op(self, token: RecoveryToken) -> WriteOp:
        """Store a new recovery token."""
        ...

    def consume_recovery_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Spend a recovery token that must still exist and have fewer than ``max_attempts`` wrong
        answers: INVALID_RECOVERY_TOKEN_ERROR if not."""
        ...

    def count_recovery_failure(self, token_hash: str, *, limit: int) -> int | None:
        """Count a wrong second-factor answer on a recovery token that has fewer than ``limit``:
        how many so far, or None if it is gone or had ``limit`` already."""
        ...

    def delete_recovery_op(self, token_hash: str) -> WriteOp:
        """Remove a recovery token if present."""
        ...


class ChallengeStore(Protocol):
    """Second-factor challenges and pending enrolments, stored under the hash of their token."""

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[Challenge | None, User | None]:
        """The challenge and the user it names, in one round trip."""
        ...

    def put_op(self, challenge: Challenge) -> WriteOp:
        """Store a new challenge."""
        ...

    def consume_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Use a live challenge up (else INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        ...

    def count_failure(self, token_hash: str) -> int | None:
        """Count a wrong answer: how many so far, or None if the challenge is gone."""
        ...

    def get_pending(self, token_hash: str) -> PendingFactor | None:
        """A pending enrolment."""
        ...

    def put_pending_op(self, pending: PendingFactor) -> WriteOp:
        """Store a pending enrolment."""
        ...

    def consume_pending_op(self, token_hash: str) -> WriteOp:
        """Use a pending enrolment up (else INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        ...


class DomainStore(Protocol):
    """The domains the deployment offers."""

    def list(self) -> list[Domain]:
        """Every offered domain, sorted by name."""
        ...

    def get(self, name: str) -> Domain | None:
        """One domain, or None."""
        ...

    def offered_op(self, name: str, *, with_subdomain: bool) -> WriteOp:
        """Assert the domain is offered (INVALID_DOMAIN_ERROR) and, when a subdomain is chosen,
        allows one (SUBDOMAIN_NOT_ALLOWED_ERROR)."""
        ...

    def put(self, name: str, *, subdomains: bool, now: str) -> bool:
        """Offer a domain or update it; True if it was new."""
        ...

    def delete(self, name: str) -> bool:
        """Stop offering a domain; False if it was not offered."""
        ...


@dataclass(frozen=True, slots=True)
class RecoveryRequest:
    """A ``POST /users/recover`` waiting for the recovery function: the name as asked, nothing
    looked up yet (the lookup and the mail happen after the answer, so its timing tells nothing)."""

    id: str
    login_name: str
    created_at: str
    expires_at: int

    def expired(self, now: float) -> bool:
        """Whether the request is too old to act on (a stalled stream caught up late)."""
        return self.expires_at <= now


class RecoveryRequestGoneError(Exception):
    """The recovery request was handled already (a record the stream delivered again)."""


class Outbox(Protocol):
    """Outgoing email, written in the same transaction as the change that sends it; and the
    recovery requests the recovery function turns into mail."""

    def enqueue_op(self, email: Email, *, now: float, kind: str, user_id: str) -> WriteOp:
        """Queue ``email``, about user ``user_id``, for the mail function."""
        ...

    def discard_for(self, user_id: str) -> int:
        """Remove every stored message about ``user_id`` (a deleted user's pending mail, and what
        an operator could otherwise replay); how many were removed."""
        ...

    def queue_recovery(self, login_name: str, *, now: float) -> RecoveryRequest:
        """Store a recovery request for ``login_name`` (one write, whatever the name)."""
        ...

    def recovery_done_op(self, request_id: str) -> WriteOp:
        """Remove the request, on condition that it is still stored: a second handling of it is
        refused with :class:`RecoveryRequestGoneError`, so its mail goes out once."""
        ...


class RuntimeConfigSource(Protocol):
    """Kill switches and log level, at most a few seconds old."""

    def current(self) -> RuntimeConfig:
        """The current runtime configuration."""
        ...

    def write_killswitches(
        self, change: Callable[[frozenset[KillSwitch]], frozenset[KillSwitch]]
    ) -> RuntimeConfig:
        """Apply ``change`` to the switches as stored now (read afresh, not from the cache) and
        store the result; the configuration after the change (this container sees it at once,
        every other one within the cache age)."""
        ...

    def write_log_level(self, name: str) -> RuntimeConfig:
        """Store the log level ``name`` (one of the five); the configuration after the change."""
        ...
