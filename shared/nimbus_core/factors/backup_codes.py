"""Backup codes as a kind of second factor (:class:`nimbus_core.factors.kinds.FactorKind`): offered
while any is unused and the user has a factor; a code as typed is looked up among the stored hashes
(ours, or a digest imported from upstream: :func:`nimbus_core.factors.otp.backup_code_keys`), and a
right one is spent, compare-and-set, so it works once. A set comes with the first factor, and a new
one replaces the old (:meth:`BackupCodesKind.new_set`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from nimbus_core.factors import otp
from nimbus_core.platform import clock

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.models import Challenge, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer


class BackupCodesKind:
    """Backup codes: one of the set, each good once."""

    name = "backup"
    answered_with: Literal["code", "response"] = "code"

    def held_by(self, user: User) -> bool:
        """Whether ``user`` has unused codes and a factor (the codes only stand in for one)."""
        return bool(user.backup_codes) and user.second_factor_count > 0

    def challenge_options(self, deps: Deps, user: User) -> tuple[dict[str, Any], str] | None:
        """Nothing: the codes need no options."""
        return None

    def carries_over(self, challenge: Challenge) -> bool:
        """Never: a code answers the challenge of its own endpoint."""
        return False

    def verified(
        self, deps: Deps, user: User, answer: Answer, challenge: Challenge, now: float
    ) -> list[WriteOp] | None:
        """The write that spends the code, or None when it is none of the user's unused ones."""
        if answer.code is None:
            return None
        code_hash = next((k for k in otp.backup_code_keys(answer.code) if k in user.backup_codes), None)
        if code_hash is None:
            return None
        return [deps.users.use_backup_code_op(user, code_hash, clock.iso(now))]

    def new_set(self) -> tuple[list[str], list[str]]:
        """A new set: the codes as shown to the user (once), and the hashes stored."""
        codes = otp.new_backup_codes()
        return codes, [h for h in (otp.backup_code_hash(c) for c in codes) if h]


BACKUP_CODES: Final = BackupCodesKind()
