"""TOTP from an authenticator app as a kind of second factor (:class:`nimbus_core.factors.kinds.FactorKind`):
answered with a 6-digit code (:mod:`nimbus_core.factors.otp` does the arithmetic), checked against
each of the user's TOTP seeds (opened only then: :mod:`nimbus_core.factors.seeds`); a right code
moves the factor's last used time step, compare-and-set, so a code is never accepted twice.

Enrolled in two steps: a new 160-bit seed is shown once (and its ``otpauth://`` URI) and kept sealed
with the pending enrolment; a code from the app confirms it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from typing_extensions import TypedDict

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.factors import otp, seeds
from nimbus_core.platform import clock

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.models import Challenge, PendingFactor, SecondFactor, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer


ISSUER: Final = "Nimbus"


class TotpShown(TypedDict, closed=True):
    """What a TOTP enrolment shows once: the seed, its ``otpauth://`` URI and the app's settings."""

    secret: str
    uri: str
    digits: int
    algorithm: str
    period: int


class TotpKind:
    """TOTP: a code from an authenticator app."""

    name = "totp"
    factor_type: Literal["totp", "webauthn"] = "totp"
    answered_with: Literal["code", "response"] = "code"

    def held_by(self, user: User) -> bool:
        """Whether ``user`` has a TOTP factor."""
        return any(f.type == self.name for f in user.second_factors.values())

    def challenge_options(self, deps: Deps, user: User) -> tuple[dict[str, Any], str] | None:
        """Nothing: the app needs no options."""
        return None

    def carries_over(self, challenge: Challenge) -> bool:
        """Never: a code answers the challenge of its own endpoint."""
        return False

    def verified(
        self, deps: Deps, user: User, answer: Answer, challenge: Challenge, now: float
    ) -> list[WriteOp] | None:
        """The write that moves the matching factor's last step, or None."""
        if answer.code is None:
            return None
        for factor in user.second_factors.values():
            # Each seed is opened only when a code is checked against it (sealed: docs/security.md).
            seed = seeds.factor_seed(deps, user, factor) if factor.type == self.name else None
            if seed:
                step = otp.totp_step(seed, answer.code, now, factor_id=factor.id)
                if step is not None and step > factor.last_step:
                    return [deps.users.use_totp_step_op(user, factor.id, step, clock.iso(now))]
        return None

    def started(
        self, deps: Deps, user: User, token_hash: str, *, passkey: bool
    ) -> tuple[dict[str, Any], TotpShown]:
        """A new seed: kept sealed for the enrolment (the tokens table never holds it in the clear),
        shown once with what an authenticator app needs."""
        secret = otp.new_totp_secret()
        shown: TotpShown = {
            "secret": secret,
            "uri": otp.totp_uri(secret, account=user.username, issuer=ISSUER),
            "digits": otp.TOTP_DIGITS,
            "algorithm": otp.TOTP_ALGORITHM,
            "period": otp.TOTP_PERIOD,
        }
        return {"secret": seeds.seal_pending_seed(deps, user.id, token_hash, secret)}, shown

    def confirmed(
        self, deps: Deps, user: User, pending: PendingFactor, proof: object, *, factor_id: str, now: float
    ) -> tuple[dict[str, Any], str | None]:
        """The factor a right code from the app enrols (its step already used), with its seed sealed
        for it; a wrong code is 401."""
        seed = seeds.pending_seed(deps, pending)
        step = otp.totp_step(seed, proof, now) if seed and isinstance(proof, str) else None
        if seed is None or step is None:
            raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
        return {"last_step": step}, seeds.seal_factor_seed(deps, user.id, factor_id, seed)

    def label(self, factor: SecondFactor) -> str:
        """An authenticator app."""
        return "Authenticator app"


TOTP: Final = TotpKind()
