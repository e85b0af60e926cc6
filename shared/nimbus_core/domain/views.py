"""The public JSON of the records and of the answers built below the HTTP layer (CONTRACT section 5),
as the types that build it: ``User.to_public()`` returns a :class:`UserView`, and mypy checks
each key and value where the dict is written.

Typing only: these are ``TypedDict`` classes, so what answers a request imports this module under
``if TYPE_CHECKING:`` alone and nothing joins a cold start. ``closed=True`` (PEP 728) says a view has
no keys beyond its own: mypy refuses an extra key, and the OpenAPI document (built from the same
classes in ``nimbus_tools.openapi``) says ``additionalProperties: false``. A closed view takes no
new keys in a subclass, so views that share keys share an open base (``SessionFields``).

The answers the routes build themselves (the plain successes, the lists) are
:mod:`nimbus_core.http.views`, which names these too: a route names all its views from there.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class UserView(TypedDict, closed=True):
    """The User structure."""

    id: str
    username: str
    email: str
    staff: bool
    domain: str
    subdomain: str | None
    verifiedAt: str | None
    bannedAt: str | None
    banReason: str | None
    twoFactorBackupCodeUsedAt: str | None
    createdAt: str
    updatedAt: str


class SessionFields(TypedDict):
    """The keys of the Session structure (open: the base of the closed views that hold them)."""

    id: str
    exp: int
    name: str
    permissionFlags: int | None
    usedAt: str
    createdAt: str
    updatedAt: str


class SessionView(SessionFields, closed=True):
    """The Session structure; ``permissionFlags`` is null for a normal session."""


class SignInFields(TypedDict):
    """What a sign-in shows once (open: the base of the closed views that hold it): the session's
    token, its expiry in Unix seconds, and the known-device token (CONTRACT section 8)."""

    token: str
    exp: int
    device: str


class SuccessfulAuthView(SignInFields, closed=True):
    """Register and login: the token (shown once), its expiry in Unix seconds, and the known-device
    token (CONTRACT section 8) that later logins from this client present as ``device``; a login
    whose password is in the compromised-password list also says ``passwordCompromised: true``
    (CONTRACT section 17)."""

    passwordCompromised: NotRequired[bool]


class PasskeyChallengeView(TypedDict, closed=True):
    """A passkey challenge (CONTRACT section 16): the token to answer with, its expiry, and the
    PublicKeyCredentialRequestOptions (JSON form) for ``navigator.credentials.get``."""

    token: str
    exp: int
    challenge: dict[str, object]


class DomainView(TypedDict, closed=True):
    """A domain users may choose."""

    id: str
    subdomains: bool
    createdAt: str
    updatedAt: str


class SecondFactorView(TypedDict, closed=True):
    """An enrolled second factor: never its secret. ``usedAt`` is null until it first answers a
    second-factor challenge, then the time of its latest answer."""

    id: str
    type: str
    name: str
    passkey: bool  # a passkey: signs its user in alone (POST /login/passkey)
    usedAt: str | None
    createdAt: str
    updatedAt: str


class ActivityEventView(TypedDict, closed=True):
    """The ActivityEvent structure (CONTRACT section 17): ``count`` is how many failures a
    ``more-failures`` event stands for (1 for every other event)."""

    id: str
    type: str
    at: str
    ip: str | None
    device: str | None
    method: str | None
    outcome: str
    code: str | None
    sessionId: str | None
    count: int
    details: list[str]
