"""TOTP from an authenticator app as a kind of second factor (:class:`nimbus_core.factors.kinds.FactorKind`):
answered with a 6-digit code (:mod:`nimbus_core.factors.otp` does the arithmetic), checked against
each of the user's TOTP seeds (opened only then: :mod:`nimbus_core.factors.seeds`); a right code
moves the factor's last used time step, compare-and-set, so a code is never accepted twice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from nimbus_core.factors import otp, seeds
from nimbus_core.platform import clock

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.models import Challenge, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer


class TotpKind:
    """TOTP: a code from an authenticator app."""

    name = "totp"
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


TOTP: Final = TotpKind()
