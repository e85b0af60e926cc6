"""The port of the tokens table: :class:`TokenStore`, one store for every single-use secret kept
under the hash of its token (second-factor challenges, pending enrolments, mailed verification and
recovery links: the kinds of :mod:`nimbus_core.domain.secret_kinds`), and for known devices.

Every kind is kept the same way, so one set of methods serves them all, each named for what it
returns: ``read`` (the secret), ``read_with_user`` (the secret and the user it names, one round
trip), ``put_op`` (store it, new), ``take_op`` (use it up: it must still be there and, where wrong
answers are counted, not worn out), ``drop_op`` (remove it if present) and ``count_wrong_answer``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nimbus_core.domain.models import Challenge, KnownDevice, RecoveryToken, User
    from nimbus_core.domain.ports import CounterState, WriteOp
    from nimbus_core.domain.secret_kinds import SecretKind, SingleUseSecret


class TokenStore(Protocol):
    """Single-use secrets of every kind, and known devices, stored under the hash of their token."""

    def read[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> R | None:
        """The secret of ``kind`` stored under ``token_hash`` (one strongly consistent read)."""
        ...

    def read_with_user[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, user_id: str
    ) -> tuple[R | None, User | None]:
        """The secret of ``kind`` and the user ``user_id``, in one round trip."""
        ...

    def read_recovery(
        self, token_hash: str, user_id: str, *, challenge_hash: str | None = None
    ) -> tuple[RecoveryToken | None, User | None, Challenge | None]:
        """A recovery token, its user and (when named) the second-factor challenge, in one round trip."""
        ...

    def put_op[R: SingleUseSecret](self, kind: SecretKind[R], secret: R) -> WriteOp:
        """Store a new secret of ``kind`` (its key must be new)."""
        ...

    def take_op[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, max_attempts: int | None = None
    ) -> WriteOp:
        """Use a secret up: it must still be there and, with ``max_attempts``, have fewer wrong
        answers counted, else the transaction fails with ``kind.gone`` (single use: of two
        concurrent takes one fails)."""
        ...

    def drop_op[R: SingleUseSecret](self, kind: SecretKind[R], token_hash: str) -> WriteOp:
        """Remove a secret if present (a newer one supersedes it)."""
        ...

    def count_wrong_answer[R: SingleUseSecret](
        self, kind: SecretKind[R], token_hash: str, *, limit: int | None = None
    ) -> int | None:
        """Count a wrong answer on a secret (with ``limit``: only one that has fewer, so concurrent
        answers never count past it): how many so far, or None if it is gone (or at ``limit``)."""
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
