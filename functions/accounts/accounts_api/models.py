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
from nimbus_core.http.validation import EVERY_ITEM, MAX_PAGE_SIZE, Body, Pagination, WholeListLimit

__all__ = [
    "ActivityQuery",
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
    """GET /domains: pagination, and ``limit=-1`` for every domain (the client library's
    ``limit: 'all'``, which upstream's web frontend sends for its domain pickers)."""

    limit: WholeListLimit = MAX_PAGE_SIZE

    def page_limit(self) -> int | None:
        """The most domains the page holds; None for every one."""
        return None if self.limit == EVERY_ITEM else self.limit


class ActivityQuery(Pagination):
    """GET /users/me/activity: pagination only."""
