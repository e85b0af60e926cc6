"""An upstream Cumulonimbus deployment's database, as its Sequelize models make it, and its rows.

``SCHEMA`` is the DDL of the tables ``nimbus import`` reads (quoted camelCase names, as Sequelize
creates them). :class:`Upstream` inserts rows the way upstream computes them: bcrypt password hashes
(``$2b$``), SHA-512 hex digests of 20-hex-character backup codes, TOTP secrets as its otplib makes them
(16 base32 characters, an 80-bit key: see :func:`totp_secret`), WebAuthn
credentials of a real software authenticator (COSE public key, base64url id), and sessions keyed by
their ES256 JWT's ``iat``. Each method returns what a test needs to use the row afterwards (the plain
password, the plain codes, the TOTP secret, the authenticator, the JWT).

:class:`UpstreamSigner` is the deployment's token key: a P-256 key and a self-signed certificate whose
PEM an import is given to keep upstream's sessions valid.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import bcrypt
import jwt
import psycopg
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from tests.passkey_authenticator import SoftwareAuthenticator, b64url

SCHEMA = """
CREATE TABLE "Domains" (
    id VARCHAR(255) PRIMARY KEY,
    subdomains BOOLEAN NOT NULL DEFAULT true,
    "createdAt" TIMESTAMP WITH TIME ZONE NOT NULL,
    "updatedAt" TIMESTAMP WITH TIME ZONE NOT NULL
);

CREATE TABLE "Users" (
    id VARCHAR(255) PRIMARY KEY,
    username VARCHAR(255) NOT NULL UNIQUE,
    email VARCHAR(255) NOT NULL UNIQUE,
    password VARCHAR(255) NOT NULL,
    staff BOOLEAN NOT NULL DEFAULT false,
    domain VARCHAR(255) NOT NULL,
    subdomain VARCHAR(255),
    "verifiedAt" TIMESTAMP WITH TIME ZONE,
    "bannedAt" TIMESTAMP WITH TIME ZONE,
    "twoFactorBackupCodes" VARCHAR(255)[],
    "twoFactorBackupCodeUsedAt" TIMESTAMP WITH TIME ZONE,
    "createdAt" TIMESTAMP WITH TIME ZONE NOT NULL,
    "updatedAt" TIMESTAMP WITH TIME ZONE NOT NULL
);

CREATE TABLE "SecondFactors" (
    id VARCHAR(255) PRIMARY KEY,
    "user" VARCHAR(255) NOT NULL REFERENCES "Users" (id) ON DELETE CASCADE,
    type VARCHAR(255) NOT NULL,
    name VARCHAR(255) NOT NULL,
    secret VARCHAR(255),
    "keyId" VARCHAR(255),
    "publicKey" BYTEA,
    counter INTEGER,
    "deviceType" VARCHAR(255),
    transports VARCHAR(255)[],
    "usedAt" TIMESTAMP WITH TIME ZONE,
    "createdAt" TIMESTAMP WITH TIME ZONE NOT NULL,
    "updatedAt" TIMESTAMP WITH TIME ZONE NOT NULL
);

CREATE TABLE "Sessions" (
    id VARCHAR(255) NOT NULL,
    "user" VARCHAR(255) NOT NULL REFERENCES "Users" (id) ON DELETE CASCADE,
    exp TIMESTAMP WITH TIME ZONE NOT NULL,
    name VARCHAR(255) NOT NULL,
    "permissionFlags" INTEGER,
    "usedAt" TIMESTAMP WITH TIME ZONE,
    "createdAt" TIMESTAMP WITH TIME ZONE NOT NULL,
    "updatedAt" TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (id, "user")
);
"""

TABLES = ("Domains", "Users", "SecondFactors", "Sessions")

SESSION_LIFETIME = timedelta(days=7)
BACKUP_CODE_BYTES = 10  # upstream's SECOND_FACTOR_BACKUP_CODE_LENGTH: 20 hex characters
TOTP_SECRET_BYTES = 10  # otplib 12's authenticator.generateSecret(numberOfBytes = 10)

_USER_COLUMNS = (
    "id",
    "username",
    "email",
    "password",
    "staff",
    "domain",
    "subdomain",
    "verifiedAt",
    "bannedAt",
    "createdAt",
    "updatedAt",
)


def milliseconds(moment: datetime) -> datetime:
    """``moment`` in UTC, cut to milliseconds: what a JavaScript ``Date`` (and so Sequelize) stores."""
    if moment.tzinfo is None:
        raise ValueError("upstream timestamps are timezone-aware")
    moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def now() -> datetime:
    """The current time as upstream would store it (UTC, milliseconds)."""
    return milliseconds(datetime.now(UTC))


class _SnowflakeIds:
    """Decimal ids from the millisecond clock shifted left by 22 bits plus a sequence, like upstream's.

    Strictly increasing within the process, so ids made in the same millisecond never collide.
    """

    def __init__(self) -> None:
        self._last = 0
        self._sequence = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> str:
        candidate = int(time.time() * 1000) << 22 | (next(self._sequence) & 0x3FFFFF)
        with self._lock:
            self._last = max(candidate, self._last + 1)
            return str(self._last)


new_id = _SnowflakeIds()


class UpstreamSigner:
    """The upstream deployment's session key: P-256, with a self-signed certificate for its public half."""

    def __init__(self, rp_id: str = "localhost") -> None:
        """A new key; ``rp_id`` is the deployment's host name, which its tokens carry as ``iss``."""
        self.rp_id = rp_id
        self.private_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, rp_id)])
        issued = datetime.now(UTC) - timedelta(days=1)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.private_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(issued)
            .not_valid_after(issued + timedelta(days=3650))
            .sign(self.private_key, hashes.SHA256())
        )

    @property
    def certificate_pem(self) -> str:
        """The certificate in PEM, as upstream keeps it in ``certs/jwt.crt``."""
        return self.certificate.public_bytes(Encoding.PEM).decode()

    def token(self, user_id: str, iat: int, exp: int) -> str:
        """An ES256 session token as upstream issues it: header ``{alg: ES256, typ: JWT}``, signed
        by OpenSSL's ECDSA as upstream's jose signs through Node's WebCrypto, so S is left as it
        comes (high in about half the tokens, as in upstream's)."""
        claims = {"sub": user_id, "iat": iat, "exp": exp, "iss": self.rp_id}
        return jwt.encode(claims, self.private_key, algorithm="ES256")


@dataclass(frozen=True)
class UpstreamUser:
    """A user row and the plain password its hash was made from."""

    id: str
    username: str
    email: str
    password: str
    hash: str
    created_at: datetime


def totp_secret() -> str:
    """A TOTP secret as upstream makes one: ``authenticator.generateSecret()`` of
    @otplib/preset-default-async 12.0.1, its default and the only call upstream makes.

    otplib takes 10 random bytes as hex, and its thirty-two plugin encodes
    ``Buffer.from(hex, 'hex').toString('ascii')``: Node's ASCII decoding clears each byte's high bit,
    so the secret spells 10 bytes below 0x80. Base32 without its ``=``: 16 upper-case characters.
    """
    key = bytes(byte & 0x7F for byte in secrets.token_bytes(TOTP_SECRET_BYTES))
    return base64.b32encode(key).decode().rstrip("=")


def bcrypt_hash(password: str, cost: int) -> str:
    """``$2b$<cost>$...`` of the password's first 72 UTF-8 bytes (all that bcrypt reads)."""
    salt = bcrypt.gensalt(rounds=cost, prefix=b"2b")
    return bcrypt.hashpw(password.encode()[:72], salt).decode()


def _user_id(user: UpstreamUser | str) -> str:
    return user if isinstance(user, str) else user.id


class Upstream:
    """Rows of an upstream deployment in one database, written as upstream's code would write them.

    The connection is in autocommit mode: every row is visible at once to another connection (the
    importer's).
    """

    def __init__(self, connection: psycopg.Connection[Any], url: str) -> None:
        """Wrap an open connection to the database at ``url``."""
        self.connection = connection
        self.url = url
        self._session_iats: dict[str, set[int]] = {}

    @classmethod
    def connect(cls, url: str) -> Self:
        """Connect (autocommit) to the database at ``url``."""
        return cls(psycopg.connect(url, autocommit=True), url)

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()

    def create_schema(self) -> None:
        """Create the upstream tables (:data:`SCHEMA`)."""
        with self.connection.transaction():
            self.connection.execute(SCHEMA)

    # -- rows ---------------------------------------------------------------------------------------

    def add_domain(self, id: str, subdomains: bool = True, created_at: datetime | None = None) -> str:
        """A domain users may pick (with subdomains unless ``subdomains=False``); returns its id."""
        created = milliseconds(created_at) if created_at is not None else now()
        self.connection.execute(
            'INSERT INTO "Domains" (id, subdomains, "createdAt", "updatedAt") VALUES (%s, %s, %s, %s)',
            (id, subdomains, created, created),
        )
        return id

    def add_user(
        self,
        username: str,
        email: str | None = None,
        password: str = "correct horse",
        *,
        cost: int = 4,
        staff: bool = False,
        domain: str = "example.com",
        subdomain: str | None = None,
        verified: bool = True,
        banned: bool = False,
        created_at: datetime | None = None,
        user_id: str | None = None,
    ) -> UpstreamUser:
        """A user with a bcrypt hash of ``password`` (cost 4 by default: upstream's 15 is for people).

        ``verified`` sets verifiedAt (to the creation time), ``banned`` sets bannedAt (to now). The
        domain row is not created: add it with :meth:`add_domain` when the test needs it.
        """
        user = UpstreamUser(
            id=user_id or new_id(),
            username=username,
            email=email or f"{username}@example.com",
            password=password,
            hash=bcrypt_hash(password, cost),
            created_at=milliseconds(created_at) if created_at is not None else now(),
        )
        row = (
            user.id,
            user.username,
            user.email,
            user.hash,
            staff,
            domain,
            subdomain,
            user.created_at if verified else None,
            now() if banned else None,
            user.created_at,
            user.created_at,
        )
        columns = ", ".join(f'"{column}"' for column in _USER_COLUMNS)
        placeholders = ", ".join(["%s"] * len(_USER_COLUMNS))
        self.connection.execute(f'INSERT INTO "Users" ({columns}) VALUES ({placeholders})', row)  # noqa: S608
        return user

    def add_backup_codes(self, user: UpstreamUser | str, count: int = 10) -> list[str]:
        """Give the user ``count`` new backup codes (replacing any); returns the plain codes.

        Upstream stores only the SHA-512 hex digest of each code's text.
        """
        codes = [secrets.token_hex(BACKUP_CODE_BYTES) for _ in range(count)]
        digests = [hashlib.sha512(code.encode()).hexdigest() for code in codes]
        self.connection.execute(
            'UPDATE "Users" SET "twoFactorBackupCodes" = %s, "updatedAt" = %s WHERE id = %s',
            (digests, now(), _user_id(user)),
        )
        return codes

    def add_totp(self, user: UpstreamUser | str, name: str = "Phone") -> tuple[str, str]:
        """A TOTP second factor; returns (factor id, base32 secret)."""
        factor_id, secret, created = new_id(), totp_secret(), now()
        self.connection.execute(
            'INSERT INTO "SecondFactors" (id, "user", type, name, secret, "createdAt", "updatedAt") '
            "VALUES (%s, %s, 'totp', %s, %s, %s, %s)",
            (factor_id, _user_id(user), name, secret, created, created),
        )
        return factor_id, secret

    def add_webauthn(
        self, user: UpstreamUser | str, name: str = "Key", authenticator: SoftwareAuthenticator | None = None
    ) -> tuple[str, SoftwareAuthenticator]:
        """A WebAuthn second factor for a software authenticator (a new ES256 one by default).

        Returns (factor id, authenticator); the authenticator's user handle becomes the user id's
        bytes, as upstream registered ``userID: user.id``, unless it already had one.
        """
        authenticator = authenticator or SoftwareAuthenticator()
        if authenticator.user_handle is None:
            authenticator.user_handle = _user_id(user).encode()
        factor_id, created = new_id(), now()
        self.connection.execute(
            'INSERT INTO "SecondFactors" (id, "user", type, name, "keyId", "publicKey", counter, '
            '"deviceType", transports, "createdAt", "updatedAt") '
            "VALUES (%s, %s, 'webauthn', %s, %s, %s, %s, 'singleDevice', %s, %s, %s)",
            (
                factor_id,
                _user_id(user),
                name,
                b64url(authenticator.credential_id),
                authenticator.cose_public_key(),
                authenticator.sign_count,
                ["usb"],
                created,
                created,
            ),
        )
        return factor_id, authenticator

    def add_session(
        self,
        user: UpstreamUser | str,
        signer: UpstreamSigner,
        *,
        iat: int | None = None,
        exp: int | None = None,
        name: str = "Firefox on Linux",
        permission_flags: int | None = None,
        used_at: datetime | None = None,
    ) -> tuple[str, int]:
        """A session and its token; returns (JWT, iat).

        Upstream's session id is the token's ``iat`` in decimal, so two sessions of one user need two
        different seconds: without ``iat``, the first second before now that this user has no session
        for. ``exp`` defaults to seven days after ``iat``.
        """
        owner = _user_id(user)
        taken = self._session_iats.setdefault(owner, set())
        if iat is None:
            iat = int(time.time())
            while iat in taken:
                iat -= 1
        exp = exp if exp is not None else iat + int(SESSION_LIFETIME.total_seconds())
        created = datetime.fromtimestamp(iat, UTC)
        used = milliseconds(used_at) if used_at is not None else None
        self.connection.execute(
            'INSERT INTO "Sessions" (id, "user", exp, name, "permissionFlags", "usedAt", "createdAt", '
            '"updatedAt") VALUES (%s, %s, %s, %s, %s, %s, %s, %s)',
            (
                str(iat),
                owner,
                datetime.fromtimestamp(exp, UTC),
                name,
                permission_flags,
                used,
                created,
                used or created,
            ),
        )
        taken.add(iat)
        return signer.token(owner, iat, exp), iat

    def bulk_users(self, n: int, *, cost: int = 4) -> None:
        """Insert ``n`` verified users at once (COPY) for load tests; all share one password hash.

        Their usernames are ``bulk<batch>_<i>`` (a new batch per call), their password "correct horse".
        """
        password_hash = bcrypt_hash("correct horse", cost)
        batch = secrets.token_hex(4)
        created = now()
        columns = ", ".join(f'"{column}"' for column in _USER_COLUMNS)
        with (
            self.connection.transaction(),
            self.connection.cursor() as cursor,
            cursor.copy(f'COPY "Users" ({columns}) FROM STDIN') as copy,
        ):
            for i in range(n):
                username = f"bulk{batch}_{i}"
                copy.write_row(
                    (
                        new_id(),
                        username,
                        f"{username}@example.com",
                        password_hash,
                        False,
                        "example.com",
                        None,
                        created,
                        None,
                        created,
                        created,
                    )
                )
