"""Second-factor rules: enrol TOTP (two steps), regenerate backup codes, list and remove factors.

Factors live in the user item (see ``nimbus_core.domain.models.SecondFactor``), so reading them costs no
round trip beyond authentication, and every change is one conditional write of that item.
Enrolment is two-step: the reverified request stores a *pending* factor (the TOTP seed, or the
WebAuthn creation challenge; 10 minutes, bound to the user and the session) and shows the seed or
the creation options once; confirming with a code from the app (or the key's attestation) enrols
it, with the first set of backup codes when the user has none, in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nimbus_core.accounts.notices import Actor, Notice, notice_op
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import PendingFactor, SecondFactor, User
from nimbus_core.domain.pending_answer import NO_ANSWER, PendingAnswer
from nimbus_core.domain.secret_kinds import ENROLMENT
from nimbus_core.factors.backup_codes import BACKUP_CODES
from nimbus_core.factors.kinds import ENROLLED, EnrolledKind
from nimbus_core.factors.security_keys import WEBAUTHN
from nimbus_core.factors.totp import TOTP
from nimbus_core.platform import clock, ids
from nimbus_core.sessions.auth import Caller
from nimbus_core.sessions.tokens import hash_secret

if TYPE_CHECKING:
    from nimbus_core.http.views import TotpSetupView, WebAuthnSetupView

PENDING_SECONDS = 600
MAX_FACTORS = 10


def start_totp(deps: Deps, caller: Caller, now: float, *, answer: PendingAnswer = NO_ANSWER) -> TotpSetupView:
    """Store a pending TOTP factor (with the reverification ``answer``) and answer what an
    authenticator app needs (shown once)."""
    token, exp, shown = _start(deps, caller, TOTP, now, answer=answer)
    return {"token": token, "exp": exp, "type": TOTP.name, **shown}


def confirm_totp(
    deps: Deps, caller: Caller, *, token: str, name: str, code: str, now: float, actor: Actor
) -> tuple[SecondFactor, list[str] | None]:
    """Enrol the pending TOTP factor if ``code`` is right: the factor, and the first backup codes
    (shown once) when the user had none; the notice naming ``actor`` goes in the same write. Wrong
    or stale token, or wrong code: 401."""
    return _confirm(deps, caller, TOTP, token=token, name=name, proof=code, now=now, actor=actor)


def start_webauthn(
    deps: Deps, caller: Caller, now: float, *, passkey: bool = False, answer: PendingAnswer = NO_ANSWER
) -> WebAuthnSetupView:
    """Store a pending security key (the creation challenge, with the reverification ``answer``)
    and answer the enrolment token with the options for ``navigator.credentials.create`` (the
    user's keys excluded). A ``passkey`` is asked to be discoverable and to verify its user."""
    token, exp, shown = _start(deps, caller, WEBAUTHN, now, passkey=passkey, answer=answer)
    return {"token": token, "exp": exp, "type": WEBAUTHN.name, **shown}


def confirm_webauthn(
    deps: Deps,
    caller: Caller,
    *,
    token: str,
    name: str,
    response: dict[str, Any],
    now: float,
    actor: Actor,
) -> tuple[SecondFactor, list[str] | None]:
    """Enrol the security key that answered the pending creation options: the factor, and the first
    backup codes when the user had none (with the notice naming ``actor``). A stale token, a
    refused attestation (py_webauthn: challenge, origin, rp id, user presence and verification as
    configured, algorithm; for a passkey, user verification and a key the browser does not call
    non-discoverable) or a key the user has already: 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR; a
    key whose credential id any account has stored already: 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR
    (its claim, written with the enrolment)."""
    return _confirm(deps, caller, WEBAUTHN, token=token, name=name, proof=response, now=now, actor=actor)


def _start[S](
    deps: Deps,
    caller: Caller,
    kind: EnrolledKind[S],
    now: float,
    *,
    passkey: bool = False,
    answer: PendingAnswer = NO_ANSWER,
) -> tuple[str, int, S]:
    """Store a pending enrolment of ``kind`` (10 minutes, bound to the user and the session):
    its token, its expiry and what the kind shows once."""
    user, token = caller.user, ids.new_secret()
    token_hash = hash_secret(token)
    kept, shown = kind.started(deps, user, token_hash, passkey=passkey)
    pending = PendingFactor(
        hash=token_hash,
        user_id=user.id,
        session_id=caller.session.id,
        type=kind.factor_type,
        created_at=clock.iso(now),
        exp=int(now) + PENDING_SECONDS,
        **kept,
    )
    answer.commit(deps.tx, [deps.tokens.put_op(ENROLMENT, pending)])
    return token, pending.exp, shown


def _confirm(
    deps: Deps,
    caller: Caller,
    kind: EnrolledKind[Any],
    *,
    token: str,
    name: str,
    proof: object,
    now: float,
    actor: Actor,
) -> tuple[SecondFactor, list[str] | None]:
    """Enrol the factor ``proof`` confirms for the caller's pending enrolment of ``kind``."""
    pending = _pending(deps, caller, token, kind.factor_type, now)
    factor_id = ids.new_id()
    fields, sealed = kind.confirmed(deps, caller.user, pending, proof, factor_id=factor_id, now=now)
    stamp = clock.iso(now)
    factor = SecondFactor(
        id=factor_id, type=kind.factor_type, name=name, created_at=stamp, updated_at=stamp, **fields
    )
    return factor, _enrol(deps, caller.user, pending, factor, actor=actor, now=now, sealed_secret=sealed)


def _pending(deps: Deps, caller: Caller, token: str, kind: str, now: float) -> PendingFactor:
    """The caller's live pending enrolment of ``kind`` named by ``token``, or 401."""
    pending = deps.tokens.read(ENROLMENT, hash_secret(token))
    if (
        pending is None
        or pending.type != kind
        or pending.user_id != caller.user.id
        or pending.session_id != caller.session.id
        or pending.exp <= now
    ):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    return pending


def _enrol(
    deps: Deps,
    user: User,
    pending: PendingFactor,
    factor: SecondFactor,
    *,
    actor: Actor,
    now: float,
    sealed_secret: str | None = None,
) -> list[str] | None:
    """Add ``factor`` (with its ``sealed_secret``, a TOTP seed), use the pending enrolment up and
    queue the notice, in one transaction; with the first set of backup codes (returned, shown once)
    when the user has none."""
    codes, hashes = (None, None) if user.backup_codes else BACKUP_CODES.new_set()
    claim = [deps.users.claim_credential_op(user, factor)] if factor.credential_id else []
    deps.tx.commit(
        [
            deps.tokens.take_op(ENROLMENT, pending.hash),
            deps.users.add_factor_op(
                user, factor, max_factors=MAX_FACTORS, backup_codes=hashes, sealed_secret=sealed_secret
            ),
            *claim,
            notice_op(deps, user, Notice.FACTOR_ADDED, actor=actor, now=now, details=[_factor_line(factor)]),
        ]
    )
    return codes


def _factor_line(factor: SecondFactor) -> str:
    """A factor as a notice names it: its kind and the name its owner gave it."""
    return f'{ENROLLED[factor.type].label(factor)} "{factor.name}"'


def regenerate_backup_codes(
    deps: Deps, caller: Caller, *, actor: Actor, now: float, answer: PendingAnswer = NO_ANSWER
) -> list[str]:
    """A new set of backup codes (the old ones stop working), with the notice naming ``actor`` and
    the reverification ``answer`` in the same write; only for a user with a factor."""
    user = caller.user
    if user.second_factor_count == 0:
        raise NimbusError(ErrorCode.USER_REQUIRES_SECOND_FACTOR_ERROR)
    codes, hashes = BACKUP_CODES.new_set()
    notice = notice_op(deps, user, Notice.BACKUP_CODES_REGENERATED, actor=actor, now=now)
    answer.commit(deps.tx, [deps.users.set_backup_codes_op(user, hashes), notice])
    return codes


def list_factors(user: User, *, limit: int, offset: int) -> tuple[int, list[SecondFactor]]:
    """The user's factors, newest first: the total and one page (no read: they came with the user)."""
    factors = sorted(user.second_factors.values(), key=lambda f: f.id, reverse=True)
    return len(factors), factors[offset : offset + limit]


def get_factor(user: User, factor_id: str) -> SecondFactor:
    """One of the user's factors, or 404 INVALID_SECOND_FACTOR_ERROR (another user's included)."""
    factor = user.second_factors.get(factor_id)
    if factor is None:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_ERROR)
    return factor


def remove_factors(
    deps: Deps,
    user: User,
    factor_ids: Sequence[str],
    *,
    actor: Actor,
    now: float,
    answer: PendingAnswer = NO_ANSWER,
) -> int:
    """Remove the user's factors among ``factor_ids`` (unknown ones skipped); how many. Removing
    the last factor removes the backup codes too. One notice naming ``actor`` and every factor
    removed goes in the same write, with the reverification ``answer`` (recorded by the route
    when nothing was removed)."""
    known = [fid for fid in dict.fromkeys(factor_ids) if fid in user.second_factors]
    if known:
        details = [_factor_line(user.second_factors[fid]) for fid in known]
        if len(known) == user.second_factor_count and user.backup_codes:
            details.append("Your backup codes, which only work with a second factor.")
        notice = notice_op(deps, user, Notice.FACTOR_REMOVED, actor=actor, now=now, details=details)
        released = deps.users.release_credentials_ops(user, known)
        answer.commit(deps.tx, [deps.users.remove_factors_op(user, known), *released, notice])
    return len(known)


def remove_factor(
    deps: Deps, user: User, factor_id: str, *, actor: Actor, now: float, answer: PendingAnswer = NO_ANSWER
) -> None:
    """Remove one factor (with its notice and the reverification ``answer``), or 404
    INVALID_SECOND_FACTOR_ERROR."""
    get_factor(user, factor_id)
    remove_factors(deps, user, [factor_id], actor=actor, now=now, answer=answer)
