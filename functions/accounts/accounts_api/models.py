"""Request bodies of the account endpoints (``password`` and ``2fa`` are the guard's: reverification).

The account changes' bodies are shared with the staff endpoints: :mod:`nimbus_core.http.account_bodies`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from nimbus_core.http.account_bodies import (
    ChangeDomainBody,
    ChangeEmailBody,
    ChangePasswordBody,
    ChangeUsernameBody,
)
from nimbus_core.http.validation import Body, Pagination

__all__ = [
    "ChangeDomainBody",
    "ChangeEmailBody",
    "ChangePasswordBody",
    "ChangeUsernameBody",
    "DomainsQuery",
    "VerifyEmailBody",
]


class VerifyEmailBody(Body):
    """PUT /users/verify."""

    token: Annotated[str, Field(max_length=256)]


class DomainsQuery(Pagination):
    """GET /domains: pagination only."""
