"""The response shapes of CONTRACT section 5, as models for the OpenAPI document.

The routes build their JSON from the records' ``to_public()``; these models describe the same
shapes, and each route names its own in its return annotation (``-> Reply[UserView]``), imported
only under ``if TYPE_CHECKING:``: this module is imported by the OpenAPI document and the tests,
never to answer. The integration tests validate every success a route answers against its view.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    """Base of every response model."""

    model_config = ConfigDict(defer_build=True, extra="forbid")


class UserView(View):
    """The User structure."""

    id: str
    username: str
    email: str
    staff: bool
    domain: str
    subdomain: str | None
    verifiedAt: str | None  # noqa: N815 - the wire names are camelCase
    bannedAt: str | None  # noqa: N815
    banReason: str | None  # noqa: N815
    twoFactorBackupCodeUsedAt: str | None  # noqa: N815
    createdAt: str  # noqa: N815
    updatedAt: str  # noqa: N815


class UserListView(View):
    """GET /users: the total number of users and one page, newest first."""

    count: int
    items: list[UserView]


class SuccessfulAuthView(View):
    """Register and login: the token (shown once), its expiry in Unix seconds, and the known-device
    token (CONTRACT section 8) that later logins from this client present as ``device``."""

    token: str
    exp: int
    device: str


class PasskeyChallengeView(View):
    """A passkey challenge (CONTRACT section 16): the token to answer with, its expiry, and the
    PublicKeyCredentialRequestOptions (JSON form) for ``navigator.credentials.get``."""

    token: str
    exp: int
    challenge: dict[str, Any]


class SuccessView(View):
    """A plain success: ``{code, message}``."""

    code: str
    message: str


class ResetPasswordView(SuccessView):
    """PUT /users/recover: RESET_PASSWORD_SUCCESS, and the new session that signs the owner in (its
    token, shown once, and its expiry in Unix seconds) and a known-device token, as login's
    SuccessfulAuth."""

    token: str
    exp: int
    device: str


class DomainView(View):
    """A domain users may choose."""

    id: str
    subdomains: bool
    createdAt: str  # noqa: N815
    updatedAt: str  # noqa: N815


class DomainListView(View):
    """``{count, items}`` of domains."""

    count: int
    items: list[DomainView]


class ServiceView(View):
    """GET /: the service name and version."""

    name: str
    version: str


class OpenApiDocumentView(View):
    """GET /openapi.json: this API's OpenAPI 3.1 document (``docs/openapi.json``)."""

    model_config = ConfigDict(extra="allow")

    openapi: str
    info: dict[str, object]
    paths: dict[str, object]


class SessionView(View):
    """The Session structure; ``permissionFlags`` is null for a normal session."""

    id: str
    exp: int
    name: str
    permissionFlags: int | None  # noqa: N815
    usedAt: str  # noqa: N815
    createdAt: str  # noqa: N815
    updatedAt: str  # noqa: N815


class SessionListView(View):
    """``{count, items}`` of sessions: ``count`` is every live session, not the page size."""

    count: int
    items: list[SessionView]


class ScopedSessionView(SessionView):
    """A new scoped session: the Session fields plus its token, shown this once."""

    token: str


class CountedSuccessView(SuccessView):
    """A plural success: ``{code, message, count}``."""

    count: int


class SecondFactorView(View):
    """An enrolled second factor: never its secret. ``usedAt`` is null until it first answers a
    second-factor challenge, then the time of its latest answer."""

    id: str
    type: str
    name: str
    passkey: bool  # a passkey: signs its user in alone (POST /login/passkey)
    usedAt: str | None  # noqa: N815
    createdAt: str  # noqa: N815
    updatedAt: str  # noqa: N815


class SecondFactorListView(View):
    """``{count, items}`` of second factors."""

    count: int
    items: list[SecondFactorView]


class TotpSetupView(View):
    """A TOTP factor to confirm: the enrolment token and what the authenticator app needs (once)."""

    token: str
    exp: int
    type: str
    secret: str
    uri: str
    digits: int
    algorithm: str
    period: int


class WebAuthnSetupView(View):
    """A security key to confirm: the enrolment token and the PublicKeyCredentialCreationOptions
    (JSON form, flattened beside the token as the client library expects) for
    ``navigator.credentials.create``."""

    token: str
    exp: int
    type: str
    rp: dict[str, str]
    user: dict[str, str]
    challenge: str
    pubKeyCredParams: list[dict[str, str | int]]  # noqa: N815
    timeout: int
    excludeCredentials: list[dict[str, str | list[str]]]  # noqa: N815
    authenticatorSelection: dict[str, str | bool]  # noqa: N815
    attestation: str
    extensions: dict[str, bool]  # credProps: the browser says whether the key is discoverable


class EnrolledFactorView(View):
    """A confirmed factor; ``codes`` is the first set of backup codes, shown once, when new."""

    id: str
    type: str
    name: str
    passkey: bool
    codes: list[str] | None = None


class BackupCodesView(View):
    """A new set of backup codes, shown once."""

    codes: list[str]


class KillSwitchView(View):
    """One kill switch: its number, name and whether it is enabled."""

    id: int
    name: str
    state: bool


class KillSwitchListView(View):
    """The nine kill switches (CONTRACT section 11)."""

    count: int
    items: list[KillSwitchView]


class LogLevelView(View):
    """The operator's log level."""

    name: str
