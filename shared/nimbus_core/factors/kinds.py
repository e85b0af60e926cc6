"""One strategy per kind of second factor, behind one interface, dispatched once.

A kind says what a challenge needs from it (:class:`FactorKind`): whether a user has it, what it
puts in a challenge's options, how its answer is checked and which writes record a right one (its
replay guard moved). The challenge itself (:mod:`nimbus_core.factors.challenges`) knows no kind by
name: it looks the answer's ``type`` up in :data:`KINDS` once and asks that strategy. A kind that
is enrolled on its own (:class:`EnrolledKind`, in :data:`ENROLLED`) also says what its pending
enrolment keeps and shows, and how its confirmation makes the factor.

- TOTP from an authenticator app (:mod:`nimbus_core.factors.totp`), answered with a code;
- security keys and passkeys (:mod:`nimbus_core.factors.security_keys`), answered with a WebAuthn
  assertion;
- backup codes (:mod:`nimbus_core.factors.backup_codes`), answered with a code, offered while any
  is unused and the user has a factor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from nimbus_core.factors.backup_codes import BACKUP_CODES
from nimbus_core.factors.security_keys import WEBAUTHN
from nimbus_core.factors.totp import TOTP

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.models import Challenge, PendingFactor, SecondFactor, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer


class FactorKind(Protocol):
    """What a second-factor challenge needs from one kind of factor."""

    @property
    def name(self) -> str:
        """The ``type`` an answer names it by, and a challenge's ``types`` list it by."""
        ...

    @property
    def answered_with(self) -> Literal["code", "response"]:
        """What the ``2fa`` object carries for it: a ``code`` or a WebAuthn ``response``."""
        ...

    def held_by(self, user: User) -> bool:
        """Whether ``user`` may answer a challenge with this kind."""
        ...

    def challenge_options(self, deps: Deps, user: User) -> tuple[dict[str, Any], str] | None:
        """What a challenge for ``user`` carries for this kind, and what it keeps to check the
        answer against (WebAuthn request options and their challenge); None for nothing."""
        ...

    def carries_over(self, challenge: Challenge) -> bool:
        """Whether an answer of this kind may answer, on the session's reverification, a
        ``challenge`` issued for another endpoint of that session."""
        ...

    def verified(
        self, deps: Deps, user: User, answer: Answer, challenge: Challenge, now: float
    ) -> list[WriteOp] | None:
        """The writes that record a right ``answer`` to ``challenge`` (the kind's replay guard
        moved, compare-and-set), or None for a wrong one."""
        ...


class EnrolledKind[S](FactorKind, Protocol):
    """A kind enrolled on its own, in two steps (backup codes come with the first factor); ``S`` is
    what its enrolment shows once (a TypedDict: the setup view holds it beside the token)."""

    @property
    def factor_type(self) -> Literal["totp", "webauthn"]:
        """The ``type`` of its pending enrolments and of its factors."""
        ...

    def started(self, deps: Deps, user: User, token_hash: str, *, passkey: bool) -> tuple[dict[str, Any], S]:
        """A new enrolment for ``user`` (its token's hash ``token_hash``): what the pending enrolment
        keeps of this kind (its fields of :class:`PendingFactor`), and what the answer shows once."""
        ...

    def confirmed(
        self, deps: Deps, user: User, pending: PendingFactor, proof: object, *, factor_id: str, now: float
    ) -> tuple[dict[str, Any], str | None]:
        """The factor ``proof`` enrols (its fields of :class:`SecondFactor` of this kind) and its
        sealed secret, if it keeps one; else 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR."""
        ...

    def label(self, factor: SecondFactor) -> str:
        """What a notice calls ``factor``'s kind."""
        ...


# In the order a challenge lists them: the enrolled kinds, then backup codes.
KINDS: Final[dict[str, FactorKind]] = {kind.name: kind for kind in (TOTP, WEBAUTHN, BACKUP_CODES)}
ENROLLED: Final[dict[str, EnrolledKind[Any]]] = {kind.factor_type: kind for kind in (TOTP, WEBAUTHN)}


def held_kinds(user: User) -> list[FactorKind]:
    """The kinds ``user`` may answer a challenge with (CONTRACT section 9's ``types``)."""
    return [kind for kind in KINDS.values() if kind.held_by(user)]
