"""Reading an upstream Cumulonimbus database (PostgreSQL, CONTRACT section 15), read-only and in pages.

The connection is opened read-only (every transaction it starts is ``READ ONLY``, so not even a
mistake of ours can write), and users are read in pages by keyset (``createdAt``, ``id``): a page
costs the same at the end of a large table as at its start, and a run that stops can simply run
again. Each page's factors and sessions are read with it, by the page's user ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

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


_USERS = """
SELECT id, username, email, password, staff, domain, subdomain, "verifiedAt", "bannedAt",
       "twoFactorBackupCodes", "twoFactorBackupCodeUsedAt", "createdAt", "updatedAt"
FROM "Users"
WHERE ("createdAt", id) > (%s, %s)
ORDER BY "createdAt", id
LIMIT %s
"""
_FACTORS = """
SELECT "user", id, type, name, secret, "keyId", "publicKey", counter, "usedAt", "createdAt", "updatedAt"
FROM "SecondFactors" WHERE "user" = ANY(%s) ORDER BY "createdAt", id
"""
# Only sessions that can still authenticate: an expired one would never be used again.
_SESSIONS = """
SELECT "user", id, exp, name, "permissionFlags", "usedAt", "createdAt", "updatedAt"
FROM "Sessions" WHERE "user" = ANY(%s) AND exp > now() ORDER BY "createdAt", id
"""
_EPOCH = datetime.fromisoformat("0001-01-01T00:00:00+00:00")


class UpstreamSource:
    """An upstream database, opened read-only."""

    def __init__(self, url: str) -> None:
        """Connect to ``url`` (``postgresql://...``); nothing is read yet."""
        import psycopg

        self._connection: psycopg.Connection[Any] = psycopg.connect(url, autocommit=False)
        self._connection.read_only = True  # every transaction of this connection: READ ONLY

    def close(self) -> None:
        """Close the connection (nothing was written, so nothing to commit)."""
        self._connection.rollback()
        self._connection.close()

    def __enter__(self) -> UpstreamSource:
        return self

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
        with self._connection.cursor() as cursor:
            cursor.execute('SELECT id, subdomains, "createdAt", "updatedAt" FROM "Domains" ORDER BY id')
            return [UpstreamDomain(*row) for row in cursor.fetchall()]

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
        after: tuple[datetime, str] = (_EPOCH, "")
        while True:
            with self._connection.cursor() as cursor:
                cursor.execute(_USERS, (*after, size))
                rows = cursor.fetchall()
                if not rows:
                    self._connection.rollback()
                    return
                ids = [str(row[0]) for row in rows]
                cursor.execute(_FACTORS, (ids,))
                factors: dict[str, list[UpstreamFactor]] = {}
                for user_id, *values in cursor.fetchall():
                    factors.setdefault(str(user_id), []).append(_factor(values))
                cursor.execute(_SESSIONS, (ids,))
                sessions: dict[str, list[UpstreamSession]] = {}
                for user_id, *values in cursor.fetchall():
                    sessions.setdefault(str(user_id), []).append(_session(values))
            self._connection.rollback()  # end the read-only transaction between pages
            yield [_account(row, factors.get(str(row[0]), []), sessions.get(str(row[0]), [])) for row in rows]
            after = (rows[-1][11], str(rows[-1][0]))


def _account(row: Any, factors: list[UpstreamFactor], sessions: list[UpstreamSession]) -> UpstreamAccount:
    (user_id, username, email, password, staff, domain, subdomain, verified, banned, codes, codes_used) = row[
        :11
    ]
    return UpstreamAccount(
        id=str(user_id),
        username=str(username),
        email=str(email),
        password=str(password),
        staff=bool(staff),
        domain=str(domain),
        subdomain=subdomain,
        verified_at=verified,
        banned_at=banned,
        backup_codes=list(codes or []),
        backup_code_used_at=codes_used,
        created_at=row[11],
        updated_at=row[12],
        factors=factors,
        sessions=sessions,
    )


def _factor(values: list[Any]) -> UpstreamFactor:
    factor_id, kind, name, secret, key_id, public_key, counter, used_at, created_at, updated_at = values
    return UpstreamFactor(
        id=str(factor_id),
        type=str(kind),
        name=str(name),
        secret=secret,
        key_id=key_id,
        public_key=bytes(public_key) if public_key is not None else None,
        counter=counter,
        used_at=used_at,
        created_at=created_at,
        updated_at=updated_at,
    )


def _session(values: list[Any]) -> UpstreamSession:
    session_id, exp, name, flags, used_at, created_at, updated_at = values
    return UpstreamSession(
        id=str(session_id),
        exp=exp,
        name=str(name),
        permission_flags=flags,
        used_at=used_at,
        created_at=created_at,
        updated_at=updated_at,
    )
