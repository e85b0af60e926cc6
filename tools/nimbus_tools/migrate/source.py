"""Reading an upstream Cumulonimbus database (PostgreSQL, CONTRACT section 15): on a read-only
connection (not even a mistake of ours can write), users in pages by keyset (``createdAt``, ``id``:
as cheap at the end of a large table as at its start), each page's factors and sessions with it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True, slots=True)
class UpstreamFactor:
    """A row of ``"SecondFactors"``."""

    id: str
    type: str
    name: str
    secret: str | None
    key_id: str | None
    public_key: bytes | None
    counter: int | None
    used_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class UpstreamSession:
    """A row of ``"Sessions"`` (its id is the token's ``iat``)."""

    id: str
    exp: datetime
    name: str
    permission_flags: int | None
    used_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class UpstreamAccount:
    """A row of ``"Users"``, with its factors and sessions."""

    id: str
    username: str
    email: str
    password: str
    staff: bool
    domain: str
    subdomain: str | None
    verified_at: datetime | None
    banned_at: datetime | None
    backup_codes: list[str]
    backup_code_used_at: datetime | None
    created_at: datetime
    updated_at: datetime
    factors: list[UpstreamFactor] = field(default_factory=list)
    sessions: list[UpstreamSession] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class UpstreamDomain:
    """A row of ``"Domains"``."""

    id: str
    subdomains: bool
    created_at: datetime
    updated_at: datetime


_TIMES = '"createdAt" AS created_at, "updatedAt" AS updated_at'
_USERS = f"""
SELECT id, username, email, password, staff, domain, subdomain, "verifiedAt" AS verified_at,
       "bannedAt" AS banned_at, coalesce("twoFactorBackupCodes", '{{}}') AS backup_codes,
       "twoFactorBackupCodeUsedAt" AS backup_code_used_at, {_TIMES}
FROM "Users" WHERE ("createdAt", id) > (%s, %s) ORDER BY "createdAt", id LIMIT %s
"""  # noqa: S608 - no input in it
_FACTORS = f"""
SELECT "user" AS owner, id, type, name, secret, "keyId" AS key_id, "publicKey" AS public_key, counter,
       "usedAt" AS used_at, {_TIMES}
FROM "SecondFactors" WHERE "user" = ANY(%s) ORDER BY "createdAt", id
"""  # noqa: S608 - no input in it
# Only sessions that can still authenticate: an expired one would never be used again.
_SESSIONS = f"""
SELECT "user" AS owner, id, exp, name, "permissionFlags" AS permission_flags, "usedAt" AS used_at, {_TIMES}
FROM "Sessions" WHERE "user" = ANY(%s) AND exp > now() ORDER BY "createdAt", id
"""  # noqa: S608 - no input in it
_EPOCH = datetime.fromisoformat("0001-01-01T00:00:00+00:00")
Row = TypeVar("Row", UpstreamFactor, UpstreamSession)


class UpstreamSource(AbstractContextManager["UpstreamSource"]):
    """An upstream database, opened read-only (closed at the end of a ``with``)."""

    def __init__(self, url: str) -> None:
        """Connect to ``url`` (``postgresql://...``); nothing is read yet."""
        import psycopg

        self._connection: psycopg.Connection[Any] = psycopg.connect(url, autocommit=False)
        self._connection.read_only = True  # every transaction of this connection: READ ONLY

    def close(self) -> None:
        """Close the connection (nothing was written, so nothing to commit)."""
        self._connection.rollback()
        self._connection.close()

    def __exit__(self, *_: object) -> None:
        self.close()

    def counts(self) -> dict[str, int]:
        """How many users, factors, unexpired sessions and domains the source holds."""
        with self._connection.cursor() as cursor:
            cursor.execute(
                'SELECT (SELECT count(*) FROM "Users"), (SELECT count(*) FROM "SecondFactors"),'
                ' (SELECT count(*) FROM "Sessions" WHERE exp > now()), (SELECT count(*) FROM "Domains")'
            )
            row = cursor.fetchone() or (0, 0, 0, 0)
        return dict(zip(("users", "factors", "sessions", "domains"), (int(n) for n in row), strict=True))

    def domains(self) -> list[UpstreamDomain]:
        """Every domain."""
        from psycopg.rows import class_row

        with self._connection.cursor(row_factory=class_row(UpstreamDomain)) as cursor:
            return cursor.execute(f'SELECT id, subdomains, {_TIMES} FROM "Domains" ORDER BY id').fetchall()  # noqa: S608

    def names(self) -> Iterator[tuple[str, str, str]]:
        """Every user's (id, username, email), streamed: what a collision between accounts of the
        source is found from before anything is written."""
        with self._connection.cursor(name="nimbus_names") as cursor:
            cursor.itersize = 5000
            cursor.execute('SELECT id, username, email FROM "Users"')
            for user_id, username, email in cursor:
                yield str(user_id), str(username), str(email)
        self._connection.rollback()

    def pages(self, size: int) -> Iterator[list[UpstreamAccount]]:
        """Every user with their factors and unexpired sessions, oldest first, ``size`` at a time."""
        from psycopg.rows import class_row

        after: tuple[datetime, str] = (_EPOCH, "")
        while True:
            with self._connection.cursor(row_factory=class_row(UpstreamAccount)) as cursor:
                users = cursor.execute(_USERS, (*after, size)).fetchall()
            ids = [user.id for user in users]
            factors = self._owned(_FACTORS, ids, UpstreamFactor)
            sessions = self._owned(_SESSIONS, ids, UpstreamSession)
            self._connection.rollback()  # end the read-only transaction between pages
            if not users:
                return
            yield [replace(u, factors=factors.get(u.id, []), sessions=sessions.get(u.id, [])) for u in users]
            after = (users[-1].created_at, users[-1].id)

    def _owned(self, query: str, ids: list[str], kind: type[Row]) -> dict[str, list[Row]]:
        """The rows of ``query`` (factors or sessions of the users ``ids``), by their user."""
        from psycopg.rows import dict_row

        owned: dict[str, list[Row]] = defaultdict(list)
        with self._connection.cursor(row_factory=dict_row) as cursor:
            for row in cursor.execute(query, (ids,)) if ids else ():
                owned[row.pop("owner")].append(kind(**row))
        return owned
