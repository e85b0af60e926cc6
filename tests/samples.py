"""Sample records for tests, built from the domain models (never hand-written items)."""

from __future__ import annotations

from nimbus_core.domain.models import User

STAMP = "2027-01-15T08:00:00.250Z"


def sample_user(user_id: str, username: str, *, staff: bool = False, email: str | None = None) -> User:
    """A user as register would store it (the password hash is a placeholder, never verified)."""
    return User(
        id=user_id,
        username=username,
        email=email or f"{username.lower()}@example.com",
        password_hash="$argon2id$v=19$m=19456,t=2,p=1$placeholder$placeholder",
        created_at=STAMP,
        updated_at=STAMP,
        domain="nimbus.test",
        staff=staff,
    )


PASSWORD = "correct horse battery"
NEW_PASSWORD = "another secret"
# A valid request body of each body model the API documents (its OpenAPI schema name), as bench and
# the fault matrix send them (bench/scenarios.py). "{...}" is filled per request: "{username}" an
# account's name (or a name that is none), "{name}" a name never used before, "{domain}" the default
# domain, "{uid}", "{sid}" and "{factor}" the ids the request is about, "{token}" a mailed or
# enrolment token; a value that is only a placeholder takes the filled value's type.
REQUEST_BODIES: dict[str, dict[str, object]] = {
    "RegisterBody": {"username": "{username}", "email": "{username}@example.com", "password": PASSWORD},
    "LoginBody": {"username": "{username}", "password": PASSWORD},
    "PasskeyLoginBody": {"token": "{token}", "response": "{response}"},
    "RecoverBody": {"username": "{username}"},
    "ResetPasswordBody": {
        "token": "{token}",
        "newPassword": NEW_PASSWORD,
        "confirmNewPassword": NEW_PASSWORD,
    },
    "VerifyEmailBody": {"token": "{token}"},
    "ChangeUsernameBody": {"username": "{name}"},
    "ChangeEmailBody": {"email": "{name}@example.org"},
    "ChangePasswordBody": {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD},
    "ChangeDomainBody": {"domain": "{domain}", "subdomain": "me"},
    "RenameSessionBody": {"name": "Renamed"},
    "DeleteSessionsBody": {"ids": ["{sid}"]},
    "CreateScopedSessionBody": {"name": "CI", "permissionFlags": 4},
    "ConfirmTotpBody": {"token": "{token}", "name": "New", "code": "{code}"},
    "StartWebAuthnBody": {},
    "ConfirmWebAuthnBody": {"token": "{token}", "name": "New", "response": "{response}"},
    "DeleteFactorsBody": {"ids": ["{factor}"]},
    "BanBody": {"reason": "Spam"},
    "DeleteUsersBody": {"ids": ["{uid}"]},
    "SetLogLevelBody": {"name": "{level}"},
}
