"""Request bodies of account changes, the same for the user themselves (AccountsFunction) and for
staff (StaffFunction); ``password`` and ``2fa`` are the guard's (reverification)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from nimbus_core.http.validation import Body, EmailAddress, Username, trim

Password = Annotated[str, Field(min_length=8, max_length=64)]
MAX_SUBDOMAIN = 63


class ChangeUsernameBody(Body):
    """PUT /users/me/username and PUT /users/:id/username."""

    username: Username


class ChangeEmailBody(Body):
    """PUT /users/me/email and PUT /users/:id/email."""

    email: EmailAddress


class ChangePasswordBody(Body):
    """PUT /users/me/password and PUT /users/:id/password. Passwords are never trimmed."""

    new_password: Password = Field(alias="newPassword")
    confirm_new_password: Annotated[str, Field(max_length=64)] = Field(alias="confirmNewPassword")

    @model_validator(mode="after")
    def _confirmation_matches(self) -> ChangePasswordBody:
        # Body validation (order of checks step 6): a typo never uses up the rate limit.
        if self.confirm_new_password != self.new_password:
            raise PydanticCustomError("passwords_do_not_match", "passwords do not match")
        return self


def normalize_subdomain(value: str) -> str | None:
    """CONTRACT section 8: lower-case, spaces become ``-``, other characters outside ``[a-z0-9-]``
    dropped, repeated and edge dashes removed; None when nothing is left."""
    text = re.sub(r"[^a-z0-9-]", "", value.lower().replace(" ", "-"))
    text = re.sub(r"-{2,}", "-", text).strip("-")
    return text or None


def _subdomain(value: str | None) -> str | None:
    if value is None:
        return None
    normalized = normalize_subdomain(value)
    if normalized is not None and len(normalized) > MAX_SUBDOMAIN:
        raise PydanticCustomError("subdomain_too_long", "subdomain too long")
    return normalized


def _domain(value: str) -> str:
    return value.strip().lower().rstrip(".")


class ChangeDomainBody(Body):
    """PUT /users/me/domain and PUT /users/:id/domain."""

    domain: Annotated[
        str, BeforeValidator(trim), AfterValidator(_domain), Field(min_length=1, max_length=253)
    ]
    subdomain: Annotated[str | None, AfterValidator(_subdomain)] = None
