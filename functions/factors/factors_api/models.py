"""Request bodies of the second-factor endpoints (``password`` and ``2fa`` are the guard's)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from nimbus_core.http.validation import Body, IdList, Name, Pagination

Token = Annotated[str, Field(max_length=128)]


class ConfirmTotpBody(Body):
    """POST /users/me/2fa/totp/confirm: the enrolment token, a name, and a code from the app."""

    token: Token
    name: Name
    code: Annotated[str, Field(max_length=16)]


class StartWebAuthnBody(Body):
    """POST /users/me/2fa/webauthn: ``passkey`` asks for a passkey (CONTRACT section 16)."""

    passkey: bool = False


class ConfirmWebAuthnBody(Body):
    """POST /users/me/2fa/webauthn/confirm: the enrolment token, a name, and the browser's
    ``PublicKeyCredential.toJSON()`` from ``navigator.credentials.create``."""

    token: Token
    name: Name
    response: dict[str, Any]


class DeleteFactorsBody(Body):
    """DELETE /users/me/2fa: at most 50 ids."""

    ids: IdList


class FactorsQuery(Pagination):
    """GET /users/me/2fa: pagination only."""
