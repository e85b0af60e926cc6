"""The ports of accounts and their sessions: :class:`UserStore` (users and the claims that keep
names unique, their second factors and failure counts), :class:`SessionStore` and
:class:`ActivityStore`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nimbus_core.domain.activity import ActivityEvent
    from nimbus_core.domain.models import Challenge, SecondFactor, Session, User
    from nimbus_core.domain.ports import CounterState, WriteOp


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
        sealed_secret: str | None = None,
    ) -> WriteOp:
        """Enrol a second factor (stored in the user item) with its ``sealed_secret`` (a TOTP
        seed, kept beside it: ``User.totp_secrets``), optionally with a first set of backup code
        hashes in the same write; INVALID_FIELDS_ERROR beyond ``max_factors``."""
        ...

    def claim_credential_op(self, user: User, factor: SecondFactor) -> WriteOp:
        """Claim a security key's credential id for ``user`` (an id stored for any account already:
        INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        ...

    def release_credentials_ops(self, user: User, factor_ids: Sequence[str]) -> list[WriteOp]:
        """Release the credential ids of ``user``'s keys among ``factor_ids`` (removed or deleted)."""
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


class ActivityStore(Protocol):
    """An account's security events (:mod:`nimbus_core.domain.activity`), kept 90 days."""

    def page(self, user_id: str, *, limit: int, offset: int) -> tuple[int, list[ActivityEvent]]:
        """How many events the account has, and ``limit`` of them from ``offset``, newest first."""
        ...

    def put_many(self, events: Sequence[ActivityEvent]) -> None:
        """Store ``events`` (the same event stored again is the same item)."""
        ...

    def count_failure(self, user_id: str, hour: int) -> int:
        """Count one failure of the account in ``hour`` (epoch hours): how many it has now."""
        ...

    def add_to_summary(self, summary: ActivityEvent) -> None:
        """Count one more failure on ``summary``, the event standing for an hour's failures beyond
        those recorded one by one (created by the first; its time is the latest failure's)."""
        ...

    def delete_all(self, user_id: str) -> int:
        """Remove every event of a deleted account; how many."""
        ...
