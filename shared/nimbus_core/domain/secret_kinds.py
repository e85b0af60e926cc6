"""The kinds of single-use secret kept in the tokens table under the hash of their token: the
second-factor challenge, the pending enrolment, the mailed email-verification link and the mailed
password-recovery link. One store (:class:`nimbus_core.domain.token_ports.TokenStore`) keeps every
kind the same way; a kind says which record it holds, the ``kind`` its items are tagged with, and
the error that taking one that is gone (used, expired or worn out by wrong answers) answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from nimbus_core.domain.errors import ErrorCode
from nimbus_core.domain.models import Challenge, PendingFactor, RecoveryToken, VerificationToken

type SingleUseSecret = Challenge | PendingFactor | VerificationToken | RecoveryToken


@dataclass(frozen=True, slots=True)
class SecretKind[R: SingleUseSecret]:
    """One kind of single-use secret: its record type, its items' ``kind`` tag, and the error a
    take of one that is gone fails with."""

    name: str
    record: type[R]
    gone: ErrorCode


CHALLENGE: Final = SecretKind("challenge", Challenge, ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
ENROLMENT: Final = SecretKind("enrol", PendingFactor, ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
EMAIL_VERIFICATION: Final = SecretKind(
    "verify-email", VerificationToken, ErrorCode.INVALID_VERIFICATION_TOKEN_ERROR
)
RECOVERY: Final = SecretKind("recovery", RecoveryToken, ErrorCode.INVALID_RECOVERY_TOKEN_ERROR)
