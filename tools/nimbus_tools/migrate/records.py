"""Upstream rows as Nimbus records (CONTRACT section 15), or why one cannot be imported: nothing is
guessed. Accounts keep their ids, names, addresses, domains, flags and timestamps; the bcrypt hash
as it is (argon2id at the first login), backup-code digests under their legacy key, and each live
session under upstream's own id (its token's ``iat``, which the token names)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nimbus_core.domain.models import Domain, SecondFactor, Session, User
from nimbus_core.domain.scopes import ALL_BITS
from nimbus_core.factors.otp import legacy_backup_code_key
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import is_id, is_upstream_session_id
from nimbus_core.sessions import passwords
from nimbus_core.sessions.upstream_tokens import UPSTREAM_SECRET_HASH
from nimbus_tools.migrate.source import UpstreamAccount, UpstreamDomain, UpstreamFactor, UpstreamSession

_USERNAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SHA512_HEX = re.compile(r"[0-9a-fA-F]{128}")
_BASE32 = re.compile(r"[A-Z2-7]+=*")
_MAX_NAME = 64


class RefusedError(Exception):
    """An account that cannot be imported as it is, and why."""


@dataclass(frozen=True, slots=True)
class Account:
    """One upstream account as Nimbus stores it, and the sessions of it that cannot be kept (why)."""

    user: User
    sessions: list[Session]
    dropped: dict[str, str] = field(default_factory=dict)  # upstream session id -> why


def stamp(moment: datetime) -> str:
    """An upstream timestamp in the API's form (UTC, milliseconds)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return iso(aware.timestamp())


def account(row: UpstreamAccount, *, now: float) -> Account:
    """The Nimbus user and live sessions of ``row``; :class:`RefusedError` when a rule is broken."""
    if not is_id(row.id):
        raise RefusedError(f"id {row.id!r} is not an id Nimbus can keep (decimal digits)")
    if not _USERNAME.fullmatch(row.username):
        raise RefusedError(f"username {row.username!r} breaks the rule ^[A-Za-z0-9_.-]{{1,64}}$")
    email = _email(row.email)
    if not passwords.is_bcrypt(row.password):
        raise RefusedError("its password is not a bcrypt hash")
    if not all(map(_SHA512_HEX.fullmatch, row.backup_codes)):
        raise RefusedError("a backup code is not a SHA-512 hex digest")
    codes = dict.fromkeys(map(legacy_backup_code_key, row.backup_codes), True)
    factors = {f.id: _factor(f) for f in row.factors}
    user = User(
        id=row.id,
        username=row.username,
        email=email,
        password_hash=row.password,
        created_at=stamp(row.created_at),
        updated_at=stamp(row.updated_at),
        domain=row.domain,
        subdomain=row.subdomain or None,
        staff=row.staff,
        verified_at=stamp(row.verified_at) if row.verified_at else None,
        banned_at=stamp(row.banned_at) if row.banned_at else None,
        two_factor_backup_code_used_at=stamp(row.backup_code_used_at) if row.backup_code_used_at else None,
        second_factors=factors,
        # Backup codes without a factor answer nothing (CONTRACT section 9): not carried over.
        backup_codes=codes if factors else {},
    )
    sessions: list[Session] = []
    dropped: dict[str, str] = {}
    for upstream_session in row.sessions:
        kept = _session(row.id, upstream_session, now)
        if isinstance(kept, Session) and user.banned_at:
            # A banned user has no sessions (CONTRACT 3): kept, they would work again after an unban.
            kept = "the account is banned"
        if isinstance(kept, Session):
            sessions.append(kept)
        elif kept:
            dropped[upstream_session.id] = kept
    return Account(user, sessions, dropped)


def domain(row: UpstreamDomain) -> Domain:
    """A domain as Nimbus offers it."""
    return Domain(
        id=row.id,
        subdomains=row.subdomains,
        created_at=stamp(row.created_at),
        updated_at=stamp(row.updated_at),
    )


def _email(address: str) -> str:
    from email_validator import EmailNotValidError, validate_email

    if len(address) > 254:
        raise RefusedError(f"address {address!r} is not valid")
    try:
        # Normalised as register normalises it: the same address, in the form Nimbus stores.
        return validate_email(address, check_deliverability=False).normalized
    except EmailNotValidError:
        raise RefusedError(f"address {address!r} is not valid") from None


def _factor(row: UpstreamFactor) -> SecondFactor:
    common = {
        "id": row.id,
        "name": row.name[:_MAX_NAME] or row.type,
        "created_at": stamp(row.created_at),
        "updated_at": stamp(row.updated_at),
        "used_at": stamp(row.used_at) if row.used_at else None,
    }
    if not is_id(row.id):
        raise RefusedError(f"second factor id {row.id!r} is not an id Nimbus can keep")
    if row.type == "totp":
        if not row.secret or not _BASE32.fullmatch(row.secret.upper()):
            raise RefusedError(f"TOTP factor {row.id} has no usable secret")
        return SecondFactor(type="totp", secret=row.secret.upper(), **common)  # type: ignore[arg-type]
    if row.type == "webauthn":
        if not row.key_id or not row.public_key:
            raise RefusedError(f"security key {row.id} has no credential id or public key")
        key = base64.urlsafe_b64encode(row.public_key).rstrip(b"=").decode()
        return SecondFactor(
            type="webauthn",
            credential_id=row.key_id.rstrip("="),
            public_key=key,
            sign_count=row.counter or 0,
            **common,  # type: ignore[arg-type]
        )
    raise RefusedError(f"second factor {row.id} has an unknown type {row.type!r}")


def _session(user_id: str, row: UpstreamSession, now: float) -> Session | str:
    """The session a live upstream row becomes, or why it cannot be kept ("" when it has simply
    expired since it was read)."""
    exp = int(row.exp.timestamp())
    if exp <= now:
        return ""
    if not is_upstream_session_id(row.id):
        # Its token names the session by str(iat): another spelling would name nothing.
        return "its id is not a token's iat"
    flags = row.permission_flags
    if flags is not None and not 1 <= flags <= ALL_BITS:
        return f"permissionFlags {flags} are not scopes Nimbus knows (never widened or guessed)"
    created = stamp(row.created_at)
    return Session(
        user_id=user_id,
        id=row.id,  # upstream's own: a client that kept it finds the session under it
        secret_hash=UPSTREAM_SECRET_HASH,
        name=(row.name.strip() or "Upstream session")[:_MAX_NAME],
        exp=exp,
        created_at=created,
        updated_at=stamp(row.updated_at),
        used_at=stamp(row.used_at) if row.used_at else created,
        permission_flags=flags,
    )
