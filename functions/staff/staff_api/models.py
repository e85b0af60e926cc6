"""Request bodies and queries of the staff account endpoints (``password`` and ``2fa`` are the
guard's: reverification of the staff member).

The account changes' bodies are shared with the accounts endpoints (:mod:`nimbus_core.http.account_bodies`)
and named here, where the staff routes' policies find them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from nimbus_core.http.account_bodies import (
    ChangeDomainBody,
    ChangeEmailBody,
    ChangePasswordBody,
    ChangeUsernameBody,
)
from nimbus_core.http.request_input import printable
from nimbus_core.http.validation import Body, IdList, Pagination, trim

__all__ = [
    "ActivityQuery",
    "BanBody",
    "ChangeDomainBody",
    "ChangeEmailBody",
    "ChangePasswordBody",
    "ChangeUsernameBody",
    "DeleteUsersBody",
    "UsersQuery",
]

MAX_REASON = 512


class UsersQuery(Pagination):
    """GET /users: pagination only."""


class ActivityQuery(Pagination):
    """GET /users/:id/activity: pagination only."""


def _readable(value: str) -> str:
    # Line breaks and tabs are text; other control and format characters (NUL, bidi overrides)
    # would forge what staff and the user read.
    if not printable(value.replace("\n", " ").replace("\t", " ")):
        raise PydanticCustomError("unprintable", "control characters are not allowed")
    return value


class BanBody(Body):
    """PUT /users/:id/ban: the reason shown to staff and mailed to the user (1..512 characters)."""

    reason: Annotated[
        str, BeforeValidator(trim), Field(min_length=1, max_length=MAX_REASON), AfterValidator(_readable)
    ]


class DeleteUsersBody(Body):
    """DELETE /users: at most 50 ids; unknown ones are skipped."""

    ids: IdList
