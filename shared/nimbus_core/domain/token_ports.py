"""The ports of secrets stored under the hash of their token: :class:`TokenStore` (email
verification and password recovery links, known devices) and :class:`ChallengeStore`
(second-factor challenges and pending enrolments)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nimbus_core.domain.models import (
        Challenge,
        KnownDevice,
        PendingFactor,
        RecoveryToken,
        User,
        VerificationToken,
    )
    from nimbus_core.domain.ports import CounterState, WriteOp


class TokenStore(Protocol):
    """One-time email verification and password recovery tokens, stored under the hash of their secret."""

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[VerificationToken | None, User | None]:
        """The token and the user it names, in one round trip."""
        ...

    def put_op(self, token: VerificationToken) -> WriteOp:
        """Store a new token."""
        ...

    def consume_op(self, token_hash: str) -> WriteOp:
        """Remove a token that must still exist (single use): INVALID_VERIFICATION_TOKEN_ERROR if not."""
        ...

    def delete_op(self, token_hash: str) -> WriteOp:
        """Remove a token if present."""
        ...

    def get_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """The recovery token, its user and the named second-factor challenge, in one round trip."""
        ...

    def put_recovery_op(self, token: RecoveryToken) -> WriteOp:
        """Store a new recovery token."""
        ...

    def consume_recovery_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Spend a recovery token that must still exist and have fewer than ``max_attempts`` wrong
        answers: INVALID_RECOVERY_TOKEN_ERROR if not."""
        ...

    def count_recovery_failure(self, token_hash: str, *, limit: int) -> int | None:
        """Count a wrong second-factor answer on a recovery token that has fewer than ``limit``:
        how many so far, or None if it is gone or had ``limit`` already."""
        ...

    def delete_recovery_op(self, token_hash: str) -> WriteOp:
        """Remove a recovery token if present."""
        ...

    def get_device(self, token_hash: str) -> KnownDevice | None:
        """A known device by the hash of its token (one read)."""
        ...

    def put_device_op(self, device: KnownDevice) -> WriteOp:
        """Store a new known device."""
        ...

    def delete_device_op(self, token_hash: str) -> WriteOp:
        """Remove a known device if present (replaced at its next sign-in)."""
        ...

    def count_device_failure(
        self, token_hash: str, *, limit: int, window: int, now: float
    ) -> CounterState | None:
        """Count a wrong answer at login on a known device's item; None if the device is gone."""
        ...


class ChallengeStore(Protocol):
    """Second-factor challenges and pending enrolments, stored under the hash of their token."""

    def get_with_user(self, token_hash: str, user_id: str) -> tuple[Challenge | None, User | None]:
        """The challenge and the user it names, in one round trip."""
        ...

    def put_op(self, challenge: Challenge) -> WriteOp:
        """Store a new challenge."""
        ...

    def consume_op(self, token_hash: str, *, max_attempts: int) -> WriteOp:
        """Use a live challenge up (else INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        ...

    def count_failure(self, token_hash: str) -> int | None:
        """Count a wrong answer: how many so far, or None if the challenge is gone."""
        ...

    def get_pending(self, token_hash: str) -> PendingFactor | None:
        """A pending enrolment."""
        ...

    def put_pending_op(self, pending: PendingFactor) -> WriteOp:
        """Store a pending enrolment."""
        ...

    def consume_pending_op(self, token_hash: str) -> WriteOp:
        """Use a pending enrolment up (else INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        ...
