"""Request bodies of the auth endpoints."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from nimbus_core.http.validation import Body, EmailAddress, Username, trim

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


def _required_without_2fa(value: str | None, info: ValidationInfo) -> str | None:
    # The answer to a second-factor challenge names the user by its token (CONTRACT section 9);
    # any other login needs both fields.
    if value is None and info.data.get("two_factor") is None:
        raise PydanticCustomError("missing", "Field required")
    return value


class LoginBody(Body):
    """POST /login. ``username`` may also be an email address. Passwords are never trimmed. The
    second request of a challenge carries ``2fa`` instead; ``username`` and ``password`` are then
    ignored (the client library repeats ``username``)."""

    # Declared first: the other fields' validators look at it.
    two_factor: dict[str, Any] | None = Field(None, alias="2fa")
    username: Annotated[
        str | None, BeforeValidator(trim), AfterValidator(_required_without_2fa), Field(validate_default=True)
    ] = None
    password: Annotated[str | None, AfterValidator(_required_without_2fa), Field(validate_default=True)] = (
        None
    )
    remember_me: bool | None = Field(None, alias="rememberMe")
    # A known-device token a sign-in answered (CONTRACT section 8); an unknown one changes nothing.
    device: Annotated[str | None, Field(max_length=128)] = None


def _required_with_token(value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
    # Half an answer is a 400 at body validation (order of checks step 6), never counted.
    if value is None and info.data.get("token") is not None:
        raise PydanticCustomError("missing", "Field required")
    return value


class PasskeyLoginBody(Body):
    """POST /login/passkey: ``{}`` asks for a challenge; ``{token, response, rememberMe?}``
    answers it with the browser's ``PublicKeyCredential.toJSON()`` of ``navigator.credentials.get``
    (a ``response`` without its ``token`` is refused by the route)."""

    # Declared first: the response's validator looks at it.
    token: Annotated[str | None, Field(max_length=128)] = None
    response: Annotated[
        dict[str, Any] | None, AfterValidator(_required_with_token), Field(validate_default=True)
    ] = None
    remember_me: bool | None = Field(None, alias="rememberMe")

    @property
    def asks_for_challenge(self) -> bool:
        """Whether this is the first step (nothing to prove yet, not counted by the limit)."""
        return self.token is None


class RecoverBody(Body):
    """POST /users/recover: a username or an email address, matched as login matches them."""

    username: Annotated[str, BeforeValidator(trim)]


class ResetPasswordBody(Body):
    """PUT /users/recover: the mailed token and the new password, twice (never trimmed); ``2fa``
    answers the second-factor challenge of an account that has a factor."""

    token: str
    new_password: Password = Field(alias="newPassword")
    confirm_new_password: Annotated[str, Field(max_length=64)] = Field(alias="confirmNewPassword")
    two_factor: dict[str, Any] | None = Field(None, alias="2fa")

    @model_validator(mode="after")
    def _confirmation_matches(self) -> ResetPasswordBody:
        if self.confirm_new_password != self.new_password:
            raise PydanticCustomError("passwords_do_not_match", "passwords do not match")
        return self
