"""TOTP seeds as stored: sealed under the stage's KMS key (``deps.sealer``), each bound to its user
and to its factor (or, while being enrolled, to its pending enrolment), so a sealed seed copied
onto another user or factor does not open (docs/security.md, "Sealed secrets").

A seed that does not open is a wrong answer, logged as an error (the factor, never the seed), as an
unreadable plaintext one is. Seeds stored in plaintext before sealing existed are read as they are
until ``nimbus totp reseal`` seals them.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import PendingFactor, SecondFactor, User
from nimbus_core.domain.ports import SealError

_log = Logger(child=True)


def pending_binding(pending_hash: str) -> str:
    """The factor a pending enrolment's seed is bound to: the enrolment (its token's hash)."""
    return f"pending:{pending_hash}"


def seal_factor_seed(deps: Deps, user_id: str, factor_id: str, seed: str) -> str:
    """``seed`` sealed for ``user_id``'s factor ``factor_id``."""
    return deps.sealer.seal(seed, user_id=user_id, factor_id=factor_id)


def seal_pending_seed(deps: Deps, user_id: str, pending_hash: str, seed: str) -> str:
    """``seed`` sealed for ``user_id``'s pending enrolment ``pending_hash``."""
    return deps.sealer.seal(seed, user_id=user_id, factor_id=pending_binding(pending_hash))


def factor_seed(deps: Deps, user: User, factor: SecondFactor) -> str | None:
    """The seed of ``user``'s TOTP ``factor``: its sealed one opened, else a plaintext one stored
    before sealing; None when there is none or it does not open."""
    sealed = user.totp_secrets.get(factor.id)
    if sealed is None:
        return factor.secret
    return _opened(deps, sealed, user_id=user.id, factor_id=factor.id, what=factor.id)


def pending_seed(deps: Deps, pending: PendingFactor) -> str | None:
    """The seed a pending TOTP enrolment shows (None when it has none or it does not open)."""
    if pending.secret is None or not deps.sealer.is_sealed(pending.secret):
        return pending.secret
    binding = pending_binding(pending.hash)
    return _opened(deps, pending.secret, user_id=pending.user_id, factor_id=binding, what="pending")


def _opened(deps: Deps, sealed: str, *, user_id: str, factor_id: str, what: str) -> str | None:
    try:
        return deps.sealer.unseal(sealed, user_id=user_id, factor_id=factor_id)
    except SealError as refused:
        _log.error(
            "sealed TOTP secret does not open: the answer is refused",
            extra={"factor": what, "reason": str(refused)},
        )
        return None
