"""The response shapes of CONTRACT section 5: the type of every success a route answers.

Each route names its own in its return annotation (``-> Reply[UserView]``), imported only under
``if TYPE_CHECKING:``, and :class:`~nimbus_core.http.responses.Reply` carries a payload of that
type, so mypy checks what a route answers. They are ``TypedDict`` classes, typing only, and closed
(PEP 728: no key beyond their own), as those of :mod:`nimbus_core.domain.views`, which hold the
records' public JSON (``to_public()``) and the answers built below this layer; this module names
those too, so a route finds every view here. The OpenAPI document's schemas are built from these
classes (``nimbus_tools.openapi``), and the integration tests validate every success a route
answers against its view.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict

from nimbus_core.domain.views import (
    ActivityEventView,
    DomainView,
    PasskeyChallengeView,
    SecondFactorView,
    SessionFields,
    SessionView,
    SignInFields,
    SuccessfulAuthView,
    UserView,
)

__all__ = [
    "ActivityEventView",
    "ActivityListView",
    "BackupCodesView",
    "CountedSuccessView",
    "DomainListView",
    "DomainView",
    "EnrolledFactorView",
    "KillSwitchListView",
    "KillSwitchView",
    "LogLevelView",
    "OpenApiDocumentView",
    "PasskeyChallengeView",
    "ResetPasswordView",
    "ScopedSessionView",
    "SecondFactorListView",
    "SecondFactorView",
    "ServiceView",
    "SessionListView",
    "SessionView",
    "SuccessView",
    "SuccessfulAuthView",
    "TotpSetupView",
    "UserListView",
    "UserView",
    "WebAuthnSetupView",
]


class UserListView(TypedDict, closed=True):
    """GET /users: the total number of users and one page, newest first."""

    count: int
    items: list[UserView]


class SuccessFields(TypedDict):
    """The keys of a plain success (open: the base of the closed views that hold them)."""

    code: str
    message: str


class SuccessView(SuccessFields, closed=True):
    """A plain success: ``{code, message}``."""


class CountedSuccessView(SuccessFields, closed=True):
    """A plural success: ``{code, message, count}``."""

    count: int


class ResetPasswordView(SuccessFields, SignInFields, closed=True):
    """PUT /users/recover: RESET_PASSWORD_SUCCESS, and the new session that signs the owner in (its
    token, shown once, and its expiry in Unix seconds) and a known-device token, as login's
    SuccessfulAuth."""


class DomainListView(TypedDict, closed=True):
    """``{count, items}`` of domains."""

    count: int
    items: list[DomainView]


class ServiceView(TypedDict, closed=True):
    """GET /: the service name and version."""

    name: str
    version: str


# More keys than these three (the whole document), which PEP 728 spells ``extra_items=object``:
# mypy reads ``closed=`` but not yet ``extra_items=``, hence the ignore; pydantic reads both.
class OpenApiDocumentView(TypedDict, extra_items=object):  # type: ignore[call-arg]
    """GET /openapi.json: this API's OpenAPI 3.1 document (``docs/openapi.json``)."""

    openapi: str
    info: dict[str, object]
    paths: dict[str, object]


class ActivityListView(TypedDict, closed=True):
    """``{count, items}`` of an account's activity, newest first: ``count`` is every event kept."""

    count: int
    items: list[ActivityEventView]


class SessionListView(TypedDict, closed=True):
    """``{count, items}`` of sessions: ``count`` is every live session, not the page size."""

    count: int
    items: list[SessionView]


class ScopedSessionView(SessionFields, closed=True):
    """A new scoped session: the Session fields plus its token, shown this once."""

    token: str


class SecondFactorListView(TypedDict, closed=True):
    """``{count, items}`` of second factors."""

    count: int
    items: list[SecondFactorView]


class TotpSetupView(TypedDict, closed=True):
    """A TOTP factor to confirm: the enrolment token and what the authenticator app needs (once)."""

    token: str
    exp: int
    type: str
    secret: str
    uri: str
    digits: int
    algorithm: str
    period: int


class WebAuthnSetupView(TypedDict, closed=True):
    """A security key to confirm: the enrolment token and the PublicKeyCredentialCreationOptions
    (JSON form, flattened beside the token as the client library expects) for
    ``navigator.credentials.create``."""

    token: str
    exp: int
    type: str
    rp: dict[str, str]
    user: dict[str, str]
    challenge: str
    pubKeyCredParams: list[dict[str, str | int]]
    timeout: int
    excludeCredentials: list[dict[str, str | list[str]]]
    authenticatorSelection: dict[str, str | bool]
    attestation: str
    extensions: dict[str, bool]  # credProps: the browser says whether the key is discoverable


class EnrolledFactorView(TypedDict, closed=True):
    """A confirmed factor; ``codes`` is the first set of backup codes, shown once, when new."""

    id: str
    type: str
    name: str
    passkey: bool
    codes: NotRequired[list[str] | None]


class BackupCodesView(TypedDict, closed=True):
    """A new set of backup codes, shown once."""

    codes: list[str]


class KillSwitchView(TypedDict, closed=True):
    """One kill switch: its number, name and whether it is enabled."""

    id: int
    name: str
    state: bool


class KillSwitchListView(TypedDict, closed=True):
    """The nine kill switches (CONTRACT section 11)."""

    count: int
    items: list[KillSwitchView]


class LogLevelView(TypedDict, closed=True):
    """The operator's log level."""

    name: str
