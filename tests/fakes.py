"""In-memory fakes of every port (``nimbus_core.domain.ports``), for service and guard tests in milliseconds.

They share one :class:`FakeDb` so a transaction spanning stores is atomic, as in DynamoDB: a
:class:`FakeOp` checks its condition and applies its change; :class:`FakeTransactor` checks every
op, then applies them all, under one lock. ``tests/contract`` runs the same suite against these
fakes and the DynamoDB adapters on moto, so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nimbus_core.adapters.sealing import Sealer
from nimbus_core.adapters.user_items import list_partitions
from nimbus_core.domain.activity import ActivityEvent
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import DependencyError, ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import (
    Challenge,
    Domain,
    Email,
    KnownDevice,
    PendingFactor,
    RecoveryToken,
    SecondFactor,
    Session,
    User,
    VerificationToken,
    iso_to_epoch,
)
from nimbus_core.domain.ports import (
    CounterState,
    CounterWindowMovedError,
    RecoveryRequest,
    RecoveryRequestGoneError,
    RuntimeConfig,
    SealError,
    WriteOp,
)
from nimbus_core.domain.secret_kinds import (
    CHALLENGE,
    EMAIL_VERIFICATION,
    ENROLMENT,
    RECOVERY,
    SecretKind,
    SingleUseSecret,
)
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id, session_order
from nimbus_core.platform.settings import Settings

USER_FIELDS = tuple(f.name for f in dataclasses.fields(User))

# None when the condition holds; else what DynamoDB would raise: the op's domain error, or a
# DependencyError for a condition that carries none (a bug, as ``ConditionFailedError`` in the adapters).
Check = Callable[[], Exception | None]


@dataclass
class FakeDb:
    """Every fake table, by key."""

    users: dict[str, User] = field(default_factory=dict)
    usernames: dict[str, str] = field(default_factory=dict)  # username key -> user id
    emails: dict[str, str] = field(default_factory=dict)  # email key -> user id
    sessions: dict[tuple[str, str], Session] = field(default_factory=dict)
    counters: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (count, resetAt)
    tokens: dict[str, VerificationToken] = field(default_factory=dict)
    recovery: dict[str, RecoveryToken] = field(default_factory=dict)
    devices: dict[str, KnownDevice] = field(default_factory=dict)
    credentials: dict[str, str] = field(default_factory=dict)  # WebAuthn credential id -> user id
    challenges: dict[str, Challenge] = field(default_factory=dict)
    pending: dict[str, PendingFactor] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    outbox: list[tuple[str, Email]] = field(default_factory=list)  # (kind, email)
    outbox_users: list[str] = field(default_factory=list)  # the user of each outbox message
    recovery_requests: dict[str, RecoveryRequest] = field(default_factory=dict)  # id -> request
    # Events queued in the outbox for the activity function (tests.fakes.drain_activity stores them).
    outbox_events: list[ActivityEvent] = field(default_factory=list)
    activity: dict[str, dict[str, ActivityEvent]] = field(default_factory=dict)  # user id -> id -> event
    activity_failures: dict[tuple[str, int], int] = field(default_factory=dict)  # (user id, hour) -> count
    lock: threading.RLock = field(default_factory=threading.RLock)
    calls: list[str] = field(default_factory=list)  # every store call, for round-trip counting


@dataclass(frozen=True)
class FakeOp(WriteOp):
    """A condition (None = holds, else the error), the change to make, and the items it touches."""

    check: Check
    apply: Callable[[], object]
    # DynamoDB refuses a transaction with two operations on one item, so the fake refuses it too.
    items: tuple[tuple[str, ...], ...] = ()


def _always() -> Exception | None:
    return None


class FakeConditionFailedError(DependencyError):
    """A condition without a domain error failed (the adapters raise ``ConditionFailedError``)."""


def _attempts(secret: object) -> int:
    """Wrong answers counted on a secret (kinds that count none have none)."""
    return int(getattr(secret, "attempts", 0))


def _absent(table: dict[Any, Any], key: object, what: str) -> Check:
    """The condition ``attribute_not_exists`` of a put whose key must be new."""
    return lambda: FakeConditionFailedError(f"{what} exists") if key in table else None


class FakeTransactor:
    """All ops or none, under the database lock."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db
        self.fail_next: Exception | None = None

    def commit(self, ops: Sequence[WriteOp]) -> None:
        """Check every op, then apply every op (each item at most once, as DynamoDB requires)."""
        self._commit(ops, items_once=True)

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """One transaction in which ``first`` and ``then`` may write the same item (the adapter
        merges such writes): every condition is checked on the old state, then ``first`` is applied
        and ``then`` after it."""
        self._commit([*first, *then], items_once=False)

    def _commit(self, ops: Sequence[WriteOp], *, items_once: bool) -> None:
        with self.db.lock:
            self.db.calls.append("commit")
            if self.fail_next is not None:
                error, self.fail_next = self.fail_next, None
                raise error
            fakes = [op for op in ops if isinstance(op, FakeOp)]
            if len(fakes) != len(ops):
                raise TypeError("FakeTransactor commits only FakeOps")
            touched = [item for op in fakes for item in op.items]
            if items_once and len(touched) != len(set(touched)):
                raise DependencyError("Transaction request cannot include multiple operations on one item")
            for op in fakes:
                refused = op.check()
                if refused is not None:
                    raise refused
            for op in fakes:
                op.apply()


class FakeUsers:
    """The UserStore in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def get(self, user_id: str) -> User | None:
        """A user by id."""
        self.db.calls.append("users.get")
        return self.db.users.get(user_id)

    def find_by_username(self, username: str, *, index_only: bool = False) -> User | None:
        """A user by username, case-insensitively."""
        self.db.calls.append("users.find")
        user_id = self.db.usernames.get(username_key(username))
        return self.db.users.get(user_id) if user_id else None

    def find_by_email(self, email: str, *, index_only: bool = False) -> User | None:
        """A user by email key."""
        self.db.calls.append("users.find")
        user_id = self.db.emails.get(email_key(email))
        return self.db.users.get(user_id) if user_id else None

    def _item(self, table: dict[str, str], key: str) -> tuple[str, str]:
        return ("username" if table is self.db.usernames else "email", key)

    def _claim(self, table: dict[str, str], key: str, user_id: str) -> FakeOp:
        def check() -> NimbusError | None:
            return NimbusError(ErrorCode.USER_EXISTS_ERROR) if key in table else None

        return FakeOp(check, lambda: table.__setitem__(key, user_id), (self._item(table, key),))

    def _release(self, table: dict[str, str], key: str, user_id: str) -> FakeOp:
        def check() -> NimbusError | None:
            return None if table.get(key) == user_id else NimbusError(ErrorCode.USER_EXISTS_ERROR)

        return FakeOp(check, lambda: table.pop(key, None), (self._item(table, key),))

    def create_ops(self, user: User) -> list[WriteOp]:
        """Create the user and both claims."""
        db = self.db
        return [
            FakeOp(
                _absent(db.users, user.id, "user"),
                lambda: db.users.__setitem__(user.id, user),
                (("user", user.id),),
            ),
            self._claim(db.usernames, username_key(user.username), user.id),
            self._claim(db.emails, email_key(user.email), user.id),
        ]

    def change_ops(
        self,
        before: User,
        after: User,
        *,
        assume_unchanged: bool = False,
        rebuilt_when_stale: bool = False,
        sessions_unrevoked: bool = False,
    ) -> list[WriteOp]:
        """Write the changed fields; swap claims whose keys changed."""
        db = self.db
        fields = {name for name in USER_FIELDS if getattr(before, name) != getattr(after, name)}
        ops: list[WriteOp] = []
        if username_key(before.username) != username_key(after.username):
            ops += [
                self._release(db.usernames, username_key(before.username), before.id),
                self._claim(db.usernames, username_key(after.username), after.id),
            ]
        if email_key(before.email) != email_key(after.email):
            ops += [
                self._release(db.emails, email_key(before.email), before.id),
                self._claim(db.emails, email_key(after.email), after.id),
            ]
        if not fields and not ops:
            return []  # nothing to write, so nothing to guard (as the adapter)

        def check() -> Exception | None:
            stored = db.users.get(before.id)
            if stored is None:
                return NimbusError(ErrorCode.INVALID_SESSION_ERROR)
            stale = (
                ("password_hash" in fields and stored.password_hash != before.password_hash)
                or (
                    (sessions_unrevoked or "session_generation" in fields)
                    and stored.session_generation != before.session_generation
                )
                or ("pending_recovery" in fields and stored.pending_recovery != before.pending_recovery)
                or (
                    "pending_verification" in fields
                    and stored.pending_verification != before.pending_verification
                )
                or (
                    assume_unchanged
                    and (stored.password_hash, stored.email) != (before.password_hash, before.email)
                )
                or (
                    "recovery_mails" in fields
                    and (stored.recovery_mails, stored.recovery_mails_reset_at)
                    != (before.recovery_mails, before.recovery_mails_reset_at)
                )
                or (
                    username_key(before.username) != username_key(after.username)
                    and username_key(stored.username) != username_key(before.username)
                )
                or (
                    email_key(before.email) != email_key(after.email)
                    and email_key(stored.email) != email_key(before.email)
                )
            )
            if not stale:
                return None
            if rebuilt_when_stale:
                return UserChangedError()
            if stored.password_hash != before.password_hash:
                return NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
            if stored.session_generation != before.session_generation:
                return NimbusError(ErrorCode.INVALID_SESSION_ERROR)
            return UserChangedError()  # renamed or readdressed meanwhile: rebuilt on a re-read

        def apply() -> None:
            stored = db.users[before.id]
            db.users[before.id] = stored.changed(**{name: getattr(after, name) for name in fields})

        return [FakeOp(check, apply, (("user", before.id),)), *ops]

    def sessions_unrevoked_op(self, user: User) -> WriteOp:
        """Check that ``user`` is stored with the session generation read."""
        users = self.db.users

        def check() -> Exception | None:
            stored = users.get(user.id)
            if stored is None or stored.session_generation != user.session_generation:
                return UserChangedError()
            return None

        return FakeOp(check, lambda: None, (("user", user.id),))

    def get_many(self, user_ids: Iterable[str]) -> list[User]:
        """The stored users among ``user_ids``."""
        with self.db.lock:
            self.db.calls.append("users.get_many")
            return [self.db.users[u] for u in dict.fromkeys(user_ids) if u in self.db.users]

    def newest_page(self, *, limit: int, offset: int) -> tuple[int, list[User]]:
        """The number of users and one page, newest (creation time, then id) first."""
        with self.db.lock:
            # A Query per list partition (the fake models none: one list) and a BatchGetItem.
            self.db.calls += ["users.list_index"] * len(list_partitions()) + ["users.get_page"]
            newest = sorted(
                self.db.users.values(), key=lambda u: (iso_to_epoch(u.created_at), u.id), reverse=True
            )
            return len(newest), newest[offset : offset + limit] if limit > 0 else []

    def delete_ops(self, user: User) -> list[WriteOp]:
        """Remove the user and its own claims; a claim that is now another user's cancels it all,
        and so does a user already gone (INVALID_SESSION_ERROR)."""
        db = self.db
        claims = ((db.usernames, username_key(user.username)), (db.emails, email_key(user.email)))

        def check() -> Exception | None:
            stored = db.users.get(user.id)
            if stored is None:
                return NimbusError(ErrorCode.INVALID_SESSION_ERROR)
            if (
                username_key(stored.username) != username_key(user.username)
                or email_key(stored.email) != email_key(user.email)
                or stored.pending_verification != user.pending_verification
                or stored.pending_recovery != user.pending_recovery
            ):
                return UserChangedError()  # changed after the read: its claims are not these
            if any(table.get(key, user.id) != user.id for table, key in claims):
                return UserChangedError()  # its names moved on: built again on a fresh read
            return None

        def apply() -> None:
            db.users.pop(user.id, None)
            for table, key in claims:
                table.pop(key, None)

        items = (("user", user.id), *(self._item(table, key) for table, key in claims))
        return [FakeOp(check, apply, items)]

    def credentials_unchanged_op(
        self, user: User, *, new_password_hash: str | None, now: float, failure_limit: int | None
    ) -> WriteOp:
        """The login condition on the user (the lock only with a ``failure_limit``), and an
        optional rehash."""
        db = self.db

        def check() -> NimbusError | None:
            stored = db.users.get(user.id)
            locked = (
                stored is not None
                and failure_limit is not None
                and stored.auth_failures >= failure_limit
                and stored.auth_failures_reset_at > int(now)
            )
            if stored is None or stored.password_hash != user.password_hash or stored.banned_at or locked:
                return NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
            return None

        def apply() -> None:
            if new_password_hash is not None:
                db.users[user.id] = db.users[user.id].changed(password_hash=new_password_hash)

        return FakeOp(check, apply, (("user", user.id),))

    # ------------------------------------------------------------------ second factors (in the user)

    def _factor_op(
        self, user: User, check: Callable[[User], NimbusError | None], change: Callable[[User], User]
    ) -> WriteOp:
        db = self.db

        def condition() -> NimbusError | None:
            stored = db.users.get(user.id)
            return NimbusError(ErrorCode.INVALID_SESSION_ERROR) if stored is None else check(stored)

        def apply() -> None:
            db.users[user.id] = change(db.users[user.id])

        return FakeOp(condition, apply, (("user", user.id),))

    def add_factor_op(
        self,
        user: User,
        factor: SecondFactor,
        *,
        max_factors: int,
        backup_codes: Sequence[str] | None = None,
        sealed_secret: str | None = None,
    ) -> WriteOp:
        """Enrol a factor (with its sealed seed, and maybe a first set of backup codes)."""

        def check(stored: User) -> NimbusError | None:
            if factor.id in stored.second_factors or len(stored.second_factors) >= max_factors:
                return NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=["type"])
            return None

        def change(u: User) -> User:
            update: dict[str, Any] = {"second_factors": {**u.second_factors, factor.id: factor}}
            if sealed_secret is not None:
                update["totp_secrets"] = {**u.totp_secrets, factor.id: sealed_secret}
            if backup_codes is not None:
                update["backup_codes"] = dict.fromkeys(backup_codes, True)
            return u.changed(**update)

        return self._factor_op(user, check, change)

    def claim_credential_op(self, user: User, factor: SecondFactor) -> WriteOp:
        """Claim a key's credential id (taken by anyone: a wrong answer)."""
        credentials, credential = self.db.credentials, str(factor.credential_id)

        def check() -> NimbusError | None:
            taken = credential in credentials
            return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR) if taken else None

        return FakeOp(
            check, lambda: credentials.__setitem__(credential, user.id), (("credential", credential),)
        )

    def release_credentials_ops(self, user: User, factor_ids: Sequence[str]) -> list[WriteOp]:
        """Release the user's own claims of the keys among ``factor_ids``."""
        credentials = self.db.credentials
        keys = [user.second_factors.get(fid) for fid in dict.fromkeys(factor_ids)]
        named = [str(k.credential_id) for k in keys if k is not None and k.credential_id]

        def release(credential: str) -> WriteOp:
            def check() -> NimbusError | None:
                held = credentials.get(credential, user.id) != user.id
                return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_ERROR) if held else None

            return FakeOp(check, lambda: credentials.pop(credential, None), (("credential", credential),))

        return [release(credential) for credential in named]

    def remove_factors_op(self, user: User, factor_ids: Sequence[str]) -> WriteOp:
        """Remove factors (all must exist); the last ones take the backup codes along."""
        wanted = set(factor_ids)
        last = set(user.second_factors) <= wanted

        def check(stored: User) -> NimbusError | None:
            if not wanted <= set(stored.second_factors):
                return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_ERROR)
            if last and len(stored.second_factors) != len(user.second_factors):
                return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_ERROR)
            return None

        def change(u: User) -> User:
            kept = {k: v for k, v in u.second_factors.items() if k not in wanted}
            secrets = {k: v for k, v in u.totp_secrets.items() if k not in wanted}
            return u.changed(
                second_factors=kept, totp_secrets=secrets, backup_codes={} if last else u.backup_codes
            )

        return self._factor_op(user, check, change)

    def use_totp_step_op(self, user: User, factor_id: str, step: int, used_at: str) -> WriteOp:
        """Accept a newer TOTP step."""

        def check(stored: User) -> NimbusError | None:
            factor = stored.second_factors.get(factor_id)
            if factor is None or factor.last_step >= step:
                return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
            return None

        return self._factor_op(
            user, check, lambda u: _with_factor(u, factor_id, last_step=step, used_at=used_at)
        )

    def use_sign_count_op(self, user: User, factor_id: str, *, seen: int, new: int, used_at: str) -> WriteOp:
        """Store a new signature counter."""

        def check(stored: User) -> NimbusError | None:
            factor = stored.second_factors.get(factor_id)
            if factor is None or factor.sign_count != seen:
                return NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
            return None

        return self._factor_op(
            user, check, lambda u: _with_factor(u, factor_id, sign_count=new, used_at=used_at)
        )

    def use_backup_code_op(self, user: User, code_hash: str, used_at: str) -> WriteOp:
        """Spend a backup code."""

        def check(stored: User) -> NimbusError | None:
            present = code_hash in stored.backup_codes
            return None if present else NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)

        def change(u: User) -> User:
            left = {k: v for k, v in u.backup_codes.items() if k != code_hash}
            return u.changed(backup_codes=left, two_factor_backup_code_used_at=used_at)

        return self._factor_op(user, check, change)

    def set_backup_codes_op(self, user: User, code_hashes: Sequence[str]) -> WriteOp:
        """Replace the backup codes."""
        codes = dict.fromkeys(code_hashes, True)
        return self._factor_op(user, lambda _u: None, lambda u: u.changed(backup_codes=codes))

    def count_auth_failure(self, user_id: str, *, limit: int, window: int, now: float) -> CounterState | None:
        """Count a failure on the user record."""
        with self.db.lock:
            self.db.calls.append("users.count_failure")
            stored = self.db.users.get(user_id)
            if stored is None:
                return None
            count, reset_at = stored.auth_failures, stored.auth_failures_reset_at
            state, count, reset_at = _count(count, reset_at, limit=limit, window=window, now=now)
            if state.allowed:
                self.db.users[user_id] = stored.changed(auth_failures=count, auth_failures_reset_at=reset_at)
            return state


def _count(
    count: int, reset_at: int, *, limit: int, window: int, now: float
) -> tuple[CounterState, int, int]:
    now_s = int(now)
    if reset_at <= now_s:
        count, reset_at = 0, now_s + window
    if count >= limit:
        return CounterState(False, count, limit, reset_at), count, reset_at
    return CounterState(True, count + 1, limit, reset_at), count + 1, reset_at


def _with_factor(user: User, factor_id: str, **values: Any) -> User:
    factor = user.second_factors[factor_id].changed(**values)
    return user.changed(second_factors={**user.second_factors, factor_id: factor})


def _live(session: Session, generation: int, now: float) -> bool:
    return session.generation == generation and session.exp > now


class FakeSessions:
    """The SessionStore in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def get_with_user(self, user_id: str, session_id: str) -> tuple[Session | None, User | None]:
        """Session and user together."""
        self.db.calls.append("sessions.get_with_user")
        return self.db.sessions.get((user_id, session_id)), self.db.users.get(user_id)

    def get_with_users(
        self, user_id: str, session_id: str, other_user_id: str
    ) -> tuple[Session | None, User | None, User | None]:
        """Session, its user and another user together."""
        self.db.calls.append("sessions.get_with_users")
        users = self.db.users
        return self.db.sessions.get((user_id, session_id)), users.get(user_id), users.get(other_user_id)

    def get_with_challenge(
        self, user_id: str, session_id: str, other_user_id: str | None, challenge_hash: str
    ) -> tuple[Session | None, User | None, User | None, Challenge | None]:
        """Session, its user, another user and a challenge together."""
        self.db.calls.append("sessions.get_with_challenge")
        users = self.db.users
        other = users.get(other_user_id) if other_user_id is not None else None
        return (
            self.db.sessions.get((user_id, session_id)),
            users.get(user_id),
            other,
            self.db.challenges.get(challenge_hash),
        )

    def count_reverify_failure(
        self, user_id: str, session_id: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a failed reverification on the session record."""
        with self.db.lock:
            self.db.calls.append("sessions.count_reverify_failure")
            key = (user_id, session_id)
            stored = self.db.sessions.get(key)
            if stored is None:
                return None
            count, reset_at = stored.reverify_failures, stored.reverify_failures_reset_at
            state, count, reset_at = _count(count, reset_at, limit=limit, window=window, now=now)
            if state.allowed:
                self.db.sessions[key] = stored.changed(
                    reverify_failures=count, reverify_failures_reset_at=reset_at
                )
            return state

    def put_op(self, session: Session) -> WriteOp:
        """Store a new session."""
        sessions, key = self.db.sessions, (session.user_id, session.id)
        return FakeOp(
            _absent(sessions, key, "session"),
            lambda: sessions.__setitem__(key, session),
            (("session", *key),),
        )

    def move_to_generation_op(self, session: Session, generation: int) -> WriteOp:
        """Move an existing session to ``generation`` (the rest as stored now)."""
        sessions, key = self.db.sessions, (session.user_id, session.id)

        def check() -> NimbusError | None:
            return None if key in sessions else NimbusError(ErrorCode.INVALID_SESSION_ERROR)

        def apply() -> None:
            sessions[key] = sessions[key].changed(generation=generation)

        return FakeOp(check, apply, (("session", *key),))

    def delete_op(self, user_id: str, session_id: str) -> WriteOp:
        """Remove a session."""
        item = ("session", user_id, session_id)
        return FakeOp(_always, lambda: self.db.sessions.pop((user_id, session_id), None), (item,))

    def touch(self, session: Session, used_at: str) -> None:
        """Record use."""
        self.db.calls.append("sessions.touch")
        key = (session.user_id, session.id)
        if key in self.db.sessions:
            self.db.sessions[key] = self.db.sessions[key].changed(used_at=used_at)

    def get(self, user_id: str, session_id: str) -> Session | None:
        """One stored session."""
        self.db.calls.append("sessions.get")
        return self.db.sessions.get((user_id, session_id))

    def get_many(self, user_id: str, session_ids: Iterable[str]) -> list[Session]:
        """The stored sessions among the ids."""
        self.db.calls.append("sessions.get_many")
        found = (self.db.sessions.get((user_id, sid)) for sid in dict.fromkeys(session_ids))
        return [s for s in found if s is not None]

    def live_page(
        self, user_id: str, *, generation: int, now: float, limit: int, offset: int
    ) -> tuple[int, list[Session]]:
        """The number of live sessions and one page of them, newest first."""
        self.db.calls.append("sessions.live_page")
        live = self._live(user_id, generation, now)
        return len(live), live[offset : offset + limit]

    def count_live(self, user_id: str, *, generation: int, now: float) -> int:
        """The number of live sessions."""
        self.db.calls.append("sessions.count_live")
        return len(self._live(user_id, generation, now))

    def _live(self, user_id: str, generation: int, now: float) -> list[Session]:
        mine = [s for (uid, _), s in self.db.sessions.items() if uid == user_id]
        live = (s for s in mine if _live(s, generation, now))
        return sorted(live, key=lambda s: session_order(s.id), reverse=True)

    def list_ids(self, user_id: str, *, below_generation: int | None = None) -> list[str]:
        """Stored session ids of the user (optionally only older generations)."""
        self.db.calls.append("sessions.list_ids")
        return sorted(
            sid
            for (uid, sid), s in self.db.sessions.items()
            if uid == user_id and (below_generation is None or s.generation < below_generation)
        )

    def rename(
        self, user_id: str, session_id: str, name: str, updated_at: str, *, generation: int, now: float
    ) -> Session | None:
        """Rename a live session."""
        with self.db.lock:
            self.db.calls.append("sessions.rename")
            key = (user_id, session_id)
            stored = self.db.sessions.get(key)
            if stored is None or not _live(stored, generation, now):
                return None
            renamed: Session = stored.changed(name=name, updated_at=updated_at)
            self.db.sessions[key] = renamed
            return renamed

    def delete_live(self, user_id: str, session_id: str, *, generation: int, now: float) -> bool:
        """Delete a live session."""
        with self.db.lock:
            self.db.calls.append("sessions.delete_live")
            stored = self.db.sessions.get((user_id, session_id))
            if stored is None or not _live(stored, generation, now):
                return False
            del self.db.sessions[(user_id, session_id)]
            return True

    def delete_many(self, user_id: str, session_ids: Iterable[str]) -> None:
        """Remove sessions."""
        self.db.calls.append("sessions.delete_many")
        for sid in list(session_ids):
            self.db.sessions.pop((user_id, sid), None)


class FakeCounters:
    """The CounterStore in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def hit(self, key: str, *, limit: int, window: int, now: float) -> CounterState:
        """Count one hit."""
        with self.db.lock:
            self.db.calls.append("counters.hit")
            count, reset_at = self.db.counters.get(key, (0, 0))
            state, count, reset_at = _count(count, reset_at, limit=limit, window=window, now=now)
            self.db.counters[key] = (count, reset_at)
            return state

    def release(self, key: str, *, reset_at: int) -> None:
        """Give one hit back in the same window."""
        with self.db.lock:
            self.db.calls.append("counters.release")
            count, current = self.db.counters.get(key, (0, 0))
            if current == reset_at and count > 0:
                self.db.counters[key] = (count - 1, current)

    def release_op(self, key: str, *, reset_at: int) -> WriteOp:
        """The give-back as a transaction element (window moved: CounterWindowMovedError)."""
        counters = self.db.counters

        def check() -> Exception | None:
            count, current = counters.get(key, (0, 0))
            return None if current == reset_at and count > 0 else CounterWindowMovedError()

        def apply() -> None:
            count, current = counters[key]
            counters[key] = (count - 1, current)

        return FakeOp(check, apply, (("counter", key),))


class FakeTokens:
    """The TokenStore in memory: each kind of single-use secret in its own dict of the FakeDb."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def _table(self, kind: SecretKind[Any]) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            CHALLENGE.name: self.db.challenges,
            ENROLMENT.name: self.db.pending,
            EMAIL_VERIFICATION.name: self.db.tokens,
            RECOVERY.name: self.db.recovery,
        }
        return tables[kind.name]

    def read[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> R | None:
        """A secret of ``kind``."""
        self.db.calls.append("tokens.read")
        found: R | None = self._table(kind).get(token_hash)
        return found

    def read_with_user[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, user_id: str
    ) -> tuple[R | None, User | None]:
        """A secret and a user together."""
        self.db.calls.append("tokens.read_with_user")
        found: R | None = self._table(kind).get(token_hash)
        return found, self.db.users.get(user_id)

    def read_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """Recovery token, user and challenge together."""
        self.db.calls.append("tokens.read_recovery")
        challenge = self.db.challenges.get(challenge_hash) if challenge_hash is not None else None
        return self.db.recovery.get(token_hash), self.db.users.get(user_id), challenge

    def put_op[R: SingleUseSecret](self, kind: SecretKind[R], secret: R) -> WriteOp:
        """Store a new secret."""
        table, key = self._table(kind), secret.hash
        return FakeOp(
            _absent(table, key, kind.name), lambda: table.__setitem__(key, secret), ((kind.name, key),)
        )

    def take_op[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, max_attempts: int | None = None
    ) -> WriteOp:
        """Use a secret up: still there and (with ``max_attempts``) not worn out."""
        table = self._table(kind)

        def check() -> NimbusError | None:
            stored = table.get(token_hash)
            worn = max_attempts is not None and stored is not None and _attempts(stored) >= max_attempts
            return None if stored is not None and not worn else NimbusError(kind.gone)

        return FakeOp(check, lambda: table.pop(token_hash, None), ((kind.name, token_hash),))

    def drop_op[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> WriteOp:
        """Remove a secret if present."""
        table = self._table(kind)
        return FakeOp(_always, lambda: table.pop(token_hash, None), ((kind.name, token_hash),))

    def count_wrong_answer[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, limit: int | None = None
    ) -> int | None:
        """Count a wrong answer (with ``limit``: only below it)."""
        with self.db.lock:
            self.db.calls.append("tokens.count_wrong_answer")
            table = self._table(kind)
            stored = table.get(token_hash)
            if stored is None or (limit is not None and _attempts(stored) >= limit):
                return None
            count = _attempts(stored) + 1
            table[token_hash] = stored.changed(attempts=count)
            return count

    def get_device(self, token_hash: str) -> KnownDevice | None:
        """A known device by its hash."""
        self.db.calls.append("tokens.get_device")
        return self.db.devices.get(token_hash)

    def put_device_op(self, device: KnownDevice) -> WriteOp:
        """Store a known device."""
        devices = self.db.devices
        return FakeOp(_always, lambda: devices.__setitem__(device.hash, device), (("device", device.hash),))

    def delete_device_op(self, token_hash: str) -> WriteOp:
        """Remove a known device if present."""
        devices = self.db.devices
        return FakeOp(_always, lambda: devices.pop(token_hash, None), (("device", token_hash),))

    def count_device_failure(
        self, token_hash: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a failure on the device record."""
        with self.db.lock:
            self.db.calls.append("tokens.count_device_failure")
            stored = self.db.devices.get(token_hash)
            if stored is None:
                return None
            state, count, reset_at = _count(
                stored.failures, stored.failures_reset_at, limit=limit, window=window, now=now
            )
            if state.allowed:
                self.db.devices[token_hash] = stored.changed(failures=count, failures_reset_at=reset_at)
            return state


class FakeDomains:
    """The DomainStore in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def list(self) -> list[Domain]:
        """Every domain by name."""
        self.db.calls.append("domains.list")
        return [self.db.domains[name] for name in sorted(self.db.domains)]

    def get(self, name: str) -> Domain | None:
        """One domain."""
        self.db.calls.append("domains.get")
        return self.db.domains.get(name)

    def put(self, name: str, *, subdomains: bool, now: str) -> bool:
        """Offer or update a domain."""
        old = self.db.domains.get(name)
        created = old.created_at if old else now
        self.db.domains[name] = Domain(id=name, subdomains=subdomains, created_at=created, updated_at=now)
        return old is None

    def delete(self, name: str) -> bool:
        """Stop offering a domain."""
        return self.db.domains.pop(name, None) is not None


class FakeOutbox:
    """The Outbox in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def enqueue_op(
        self, email: Email, *, now: float, kind: str, user_id: str, event: ActivityEvent | None = None
    ) -> WriteOp:
        """Queue an email (and the event it carries)."""

        def apply() -> None:
            self.db.outbox.append((kind, email))
            self.db.outbox_users.append(user_id)
            if event is not None:
                self.db.outbox_events.append(event)

        return FakeOp(_always, apply)

    def event_op(self, event: ActivityEvent, *, now: float) -> WriteOp:
        """Queue an event for the activity function."""
        return FakeOp(_always, lambda: self.db.outbox_events.append(event), (("outbox", event.id),))

    def record_event(self, event: ActivityEvent, *, now: float) -> None:
        """Queue an event now (one write)."""
        with self.db.lock:
            self.db.calls.append("outbox.record_event")
            self.db.outbox_events.append(event)

    def discard_for(self, user_id: str) -> int:
        """Remove the user's stored messages."""
        with self.db.lock:
            self.db.calls.append("outbox.discard_for")
            kept = [(m, u) for m, u in zip(self.db.outbox, self.db.outbox_users, strict=True) if u != user_id]
            removed = len(self.db.outbox) - len(kept)
            self.db.outbox[:] = [m for m, _ in kept]
            self.db.outbox_users[:] = [u for _, u in kept]
            return removed

    def queue_recovery(self, login_name: str, *, now: float) -> RecoveryRequest:
        """Store a recovery request (one write)."""
        request = RecoveryRequest(
            id=new_id(),
            login_name=login_name,
            created_at=iso(now),
            expires_at=int(now) + 3600,  # as stored
        )
        with self.db.lock:
            self.db.calls.append("outbox.queue_recovery")
            self.db.recovery_requests[request.id] = request
        return request

    def recovery_done_op(self, request_id: str) -> WriteOp:
        """Remove the request while it is stored, else RecoveryRequestGoneError."""
        requests = self.db.recovery_requests

        def check() -> Exception | None:
            return None if request_id in requests else RecoveryRequestGoneError()

        return FakeOp(check, lambda: requests.pop(request_id, None), (("outbox", request_id),))


class FakeActivity:
    """The ActivityStore in memory."""

    def __init__(self, db: FakeDb) -> None:
        self.db = db

    def page(self, user_id: str, *, limit: int, offset: int) -> tuple[int, list[ActivityEvent]]:
        """The total and one page, newest first."""
        with self.db.lock:
            self.db.calls.append("activity.page")
            events = sorted(self.db.activity.get(user_id, {}).values(), key=lambda e: e.id, reverse=True)
            return len(events), events[offset : offset + limit]

    def put_many(self, events: Sequence[ActivityEvent]) -> None:
        """Store events by id."""
        with self.db.lock:
            for event in events:
                self.db.activity.setdefault(event.user_id, {})[event.id] = event

    def count_failure(self, user_id: str, hour: int) -> int:
        """Count one failure of the hour."""
        with self.db.lock:
            key = (user_id, hour)
            self.db.activity_failures[key] = self.db.activity_failures.get(key, 0) + 1
            return self.db.activity_failures[key]

    def add_to_summary(self, summary: ActivityEvent) -> None:
        """The summary, counting one more."""
        with self.db.lock:
            events = self.db.activity.setdefault(summary.user_id, {})
            before = events.get(summary.id)
            events[summary.id] = replace(summary, count=before.count + 1 if before else 1)

    def delete_all(self, user_id: str) -> int:
        """Forget the account's events."""
        with self.db.lock:
            return len(self.db.activity.pop(user_id, {}))


def drain_activity(world: FakeWorld) -> list[ActivityEvent]:
    """What the activity function does with the events queued so far (the outbox stream, at
    once): stores each; the events drained."""
    from activity_api.service import store

    with world.db.lock:
        queued, world.db.outbox_events[:] = list(world.db.outbox_events), []
    for event in queued:
        store(world.deps, event)
    return queued


class FakeConfig:
    """Runtime configuration that tests set directly."""

    def __init__(self) -> None:
        self.switches: set[KillSwitch] = set()
        self.log_level = "INFO"

    def current(self) -> RuntimeConfig:
        """The switches and level as set."""
        return RuntimeConfig(frozenset(self.switches), self.log_level)

    def write_killswitches(
        self, change: Callable[[frozenset[KillSwitch]], frozenset[KillSwitch]]
    ) -> RuntimeConfig:
        """Change the switches."""
        self.switches = set(change(frozenset(self.switches)))
        return self.current()

    def write_log_level(self, name: str) -> RuntimeConfig:
        """Change the level."""
        self.log_level = name
        return self.current()


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = 1_800_000_000.25) -> None:
        self.at = now

    def now(self) -> float:
        """The current fake time."""
        return self.at

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.at += seconds

    def iso(self) -> str:
        """The current fake time, as stored."""
        return iso(self.at)


SETTINGS = Settings.from_environment(
    {
        "USERS_TABLE": "users",
        "SESSIONS_TABLE": "sessions",
        "COUNTERS_TABLE": "counters",
        "TOKENS_TABLE": "tokens",
        "DOMAINS_TABLE": "domains",
        "OUTBOX_TABLE": "outbox",
        "ACTIVITY_TABLE": "activity",
        "KILLSWITCH_PATH": "/nimbus/test/killswitches",
        "LOG_LEVEL_PARAMETER": "/nimbus/test/loglevel",
        "SENDER_EMAIL": "no-reply@nimbus.test",
        "VERIFICATION_URL": "https://files.test/verify?token={token}",
        "DEFAULT_DOMAIN": "nimbus.test",
        "WEBAUTHN_RP_ID": "files.test",
        "WEBAUTHN_ORIGINS": "https://files.test",
    }
)


FAKE_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-4333-8444-555555555555"


class FakeKeys:
    """KMS in memory, as the sealing uses it: each key a random AES-256 key that wraps data keys
    with AES-GCM, the encryption context its associated data (a data key opens only under the key
    and context it was made with, as in KMS). ``calls`` lists every KMS call, in order."""

    def __init__(self, *keys: str) -> None:
        self.master = {arn: os.urandom(32) for arn in keys or (FAKE_KEY,)}
        self.calls: list[str] = []

    def generate_data_key(self, key_id: str, context: Mapping[str, str]) -> tuple[str, bytes, bytes]:
        """A new data key under ``key_id`` (an ARN this fake holds)."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.calls.append("GenerateDataKey")
        if key_id not in self.master:
            raise DependencyError(f"no such KMS key {key_id}")
        key, nonce = os.urandom(32), os.urandom(12)
        wrapped = nonce + AESGCM(self.master[key_id]).encrypt(nonce, key, _context_bytes(context))
        return key_id, key, wrapped

    def decrypt_data_key(self, key_arn: str, encrypted: bytes, context: Mapping[str, str]) -> bytes:
        """The data key ``encrypted`` under ``key_arn``, or SealError as KMS refuses it."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.calls.append("Decrypt")
        if key_arn not in self.master:
            raise SealError("KMS refused the data key: NotFoundException")
        try:
            return AESGCM(self.master[key_arn]).decrypt(
                encrypted[:12], encrypted[12:], _context_bytes(context)
            )
        except (InvalidTag, ValueError) as exc:
            raise SealError("KMS refused the data key: InvalidCiphertextException") from exc


def _context_bytes(context: Mapping[str, str]) -> bytes:
    return repr(sorted(context.items())).encode()


@dataclass
class FakeWorld:
    """A fake deployment: the shared database, every fake port, and the Deps bundle."""

    db: FakeDb
    clock: FakeClock
    config: FakeConfig
    tx: FakeTransactor
    deps: Deps
    keys: FakeKeys = field(default_factory=FakeKeys)

    def round_trips(self) -> int:
        """Store calls made so far (each is one DynamoDB round trip in the adapters)."""
        return len(self.db.calls)


def fake_world(settings: Settings = SETTINGS, **overrides: Any) -> FakeWorld:
    """Fresh fakes wired into a Deps bundle (``overrides`` replace single ports)."""
    db = FakeDb()
    clock = FakeClock()
    config = FakeConfig()
    tx = FakeTransactor(db)
    keys = FakeKeys()
    ports: dict[str, Any] = {
        "settings": settings,
        "clock": clock,
        "config": config,
        "tx": tx,
        "users": FakeUsers(db),
        "sessions": FakeSessions(db),
        "counters": FakeCounters(db),
        "tokens": FakeTokens(db),
        "domains": FakeDomains(db),
        "outbox": FakeOutbox(db),
        "sealer": Sealer(lambda: keys, key_id=FAKE_KEY, stage=settings.stage),
        "activity": FakeActivity(db),
    }
    ports.update(overrides)
    return FakeWorld(db=db, clock=clock, config=config, tx=tx, deps=Deps(**ports), keys=keys)


def ceil_seconds(value: float) -> int:
    """Whole seconds, rounded up (what Retry-After reports)."""
    return math.ceil(value)
