"""Request bodies of the auth endpoints."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from nimbus_core.validation import Body, EmailAddress, Username, trim

Password = Annotated[str, Field(min_length=8, max_length=64)]


class RegisterBody(Body):
    """POST /register."""

    username: Username
    email: EmailAddress
    password: Password
    confirm_password: str | None = Field(None, alias="confirmPassword")
    remember_me: bool | None = Field(None, alias="rememberMe")

    @model_validator(mode="after")
    def _confirmation_matches(self) -> RegisterBody:
        # Part of body validation (order of checks step 6), so a typo never uses up the rate limit.
        if self.confirm_password is not None and self.confirm_password != self.password:
            raise PydanticCustomError("passwords_do_not_match", "passwords do not match")
        return self


class LoginBody(Body):
    """POST /login. ``username`` may also be an email address. Passwords are never trimmed."""

    username: Annotated[str, BeforeValidator(trim)]
    password: str
    remember_me: bool | None = Field(None, alias="rememberMe")
