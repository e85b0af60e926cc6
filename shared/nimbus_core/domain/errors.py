"""Every error the API can answer, with its stable code, message and HTTP status (CONTRACT section 6).

Services raise :class:`NimbusError`; :mod:`nimbus_core.http.responses` is the one place that turns
one into an HTTP response. Code never matches on message text.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nimbus_core.domain.ports import WriteOp


class _Coded(Enum):
    """An enum of (HTTP status, message) pairs named by their stable code."""

    @property
    def status(self) -> int:
        """The HTTP status this code is answered with."""
        return int(self.value[0])

    @property
    def message(self) -> str:
        """The fixed human-readable message."""
        return str(self.value[1])


class ErrorCode(_Coded):
    """Code -> (HTTP status, message)."""

    INVALID_ENDPOINT_ERROR = (404, "Invalid Endpoint")
    INVALID_BODY_ERROR = (400, "Invalid Body")
    MISSING_FIELDS_ERROR = (400, "Missing Fields")
    INVALID_FIELDS_ERROR = (400, "Invalid Fields")
    BODY_TOO_LARGE_ERROR = (400, "Body Too Large")
    INVALID_SESSION_ERROR = (401, "Invalid Session")
    INSUFFICIENT_PERMISSIONS_ERROR = (403, "Insufficient Permissions")
    ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR = (401, "Endpoint Requires Second Factor")
    USER_REQUIRES_SECOND_FACTOR_ERROR = (400, "User Requires Second Factor")
    INVALID_USER_ERROR = (404, "Invalid User")
    INVALID_USERNAME_ERROR = (400, "Invalid Username")
    INVALID_EMAIL_ERROR = (400, "Invalid Email")
    INVALID_PASSWORD_ERROR = (401, "Invalid Password")
    PASSWORDS_DO_NOT_MATCH_ERROR = (400, "Passwords Do Not Match")
    INSECURE_PASSWORD_ERROR = (400, "Insecure Password")
    USER_EXISTS_ERROR = (409, "User Exists")
    BANNED_ERROR = (403, "Banned")
    EMAIL_NOT_VERIFIED_ERROR = (400, "Email Not Verified")
    EMAIL_ALREADY_VERIFIED_ERROR = (400, "Email Already Verified")
    INVALID_VERIFICATION_TOKEN_ERROR = (400, "Invalid Verification Token")
    INVALID_RECOVERY_TOKEN_ERROR = (400, "Invalid Recovery Token")
    INVALID_DOMAIN_ERROR = (404, "Invalid Domain")
    SUBDOMAIN_NOT_ALLOWED_ERROR = (400, "Subdomain Not Allowed")
    SUBDOMAIN_TOO_LONG_ERROR = (400, "Subdomain Too Long")
    SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR = (401, "Second Factor Challenge Required")
    INVALID_SECOND_FACTOR_ERROR = (404, "Invalid Second Factor")
    INVALID_SECOND_FACTOR_METHOD_ERROR = (400, "Invalid Second Factor Method")
    INVALID_SECOND_FACTOR_RESPONSE_ERROR = (401, "Invalid Second Factor Response")
    INVALID_LOGLEVEL_ERROR = (400, "Invalid LogLevel")
    SERVICE_UNAVAILABLE_ERROR = (503, "Service Unavailable")
    RATELIMITED_ERROR = (429, "You Have Been Ratelimited. Please Try Again Later.")
    INTERNAL_SERVER_ERROR = (500, "Internal Server Error")


class SuccessCode(_Coded):
    """Code -> (HTTP status, message) of the plain successes (CONTRACT section 7)."""

    DELETE_USER_SUCCESS = (200, "User Successfully Deleted")
    DELETE_USERS_SUCCESS = (200, "Users Successfully Deleted")
    DELETE_SESSION_SUCCESS = (200, "Session Successfully Deleted")
    DELETE_SESSIONS_SUCCESS = (200, "Sessions Successfully Deleted")
    SEND_VERIFICATION_EMAIL_SUCCESS = (201, "Verification Email Successfully Sent")
    VERIFY_EMAIL_SUCCESS = (200, "Successfully Verified Email")
    DELETE_SECOND_FACTOR_SUCCESS = (200, "Second Factor Successfully Deleted")
    DELETE_SECOND_FACTORS_SUCCESS = (200, "Second Factors Successfully Deleted")
    SEND_RECOVERY_EMAIL_SUCCESS = (201, "Recovery Email Successfully Sent")
    RESET_PASSWORD_SUCCESS = (200, "Password Successfully Reset")


class NimbusError(Exception):
    """An expected failure with a contract error code and optional extra body fields.

    ``status`` overrides the table's status where the contract allows two (INVALID_SESSION_ERROR is
    404 for an unknown session id). ``headers`` carries e.g. ``Retry-After`` on a 429.
    """

    def __init__(
        self,
        code: ErrorCode,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(code.name)
        self.code = code
        self.status = status or code.status
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The JSON error body: ``{code, message}`` plus the extra fields."""
        return {"code": self.code.name, "message": self.code.message, **self.extra}


class UserChangedError(Exception):
    """The user item changed between the read a write was built from and its commit (a concurrent
    rename, address change or deletion): never an answer, the caller re-reads the user and builds
    the write again (:func:`nimbus_core.accounts.account_changes.on_fresh_user`).

    ``first_landed``: raised by the second transaction of ``Transactor.commit_joined``'s fallback,
    after its ``first`` writes committed (a challenge answer is then recorded already).
    """

    def __init__(self, *, first_landed: bool = False) -> None:
        super().__init__("the user changed since it was read")
        self.first_landed = first_landed


class DependencyError(Exception):
    """AWS (or another dependency) failed in a way no rule can handle: answered as a bare 500.

    Adapters raise it in place of botocore's exceptions, so services can tell "the store said no"
    (a :class:`NimbusError`) from "the store is down" without importing botocore.
    """


class RateLimitedError(NimbusError):
    """A 429: the HTTP layer adds ``Retry-After`` (and, for endpoint limits, ``RateLimit-*``)."""

    def __init__(
        self, *, retry_after: int, account_lock: bool = False, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(ErrorCode.RATELIMITED_ERROR, headers=headers)
        self.retry_after = retry_after
        # The per-account failure lock is a different limit from the endpoint's per-IP/user window,
        # so its 429 must not carry that window's RateLimit-* headers (CONTRACT section 8).
        self.account_lock = account_lock


class ChallengeRequiredError(NimbusError):
    """The 401 that asks for a second factor. Not counted by the endpoint's rate limit (the answer
    that completes it is), so answering never costs a second hit.

    ``writes`` store the challenge. They are committed by whoever answers the request (the HTTP
    guard, :func:`nimbus_core.http.steps.challenge.store_challenge`), together with the rate
    limit's give-back, in one transaction.
    """

    def __init__(
        self,
        *,
        token: str,
        exp: int,
        types: list[str],
        challenge: dict[str, Any] | None,
        writes: list[WriteOp],
    ) -> None:
        extra: dict[str, Any] = {"token": token, "exp": exp, "types": types}
        if challenge is not None:
            extra["challenge"] = challenge
        super().__init__(ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR, **extra)
        self.writes = writes
