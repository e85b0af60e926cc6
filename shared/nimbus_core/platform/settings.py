"""Deployment configuration, read once per container from the environment the template sets.

A plain dataclass read by hand, not a pydantic model: the settings are on every request's path and
importing pydantic is a large share of a cold start (it loads only with the first body to validate).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Any, Literal, cast
from urllib.parse import urlsplit

UserVerification = Literal["required", "preferred", "discouraged"]


class SettingsError(ValueError):
    """The environment does not hold usable settings (a deployment mistake: the function cannot start)."""


def _text(value: str) -> str:
    return value


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value.strip())
        if number < low or (high is not None and number > high):
            raise ValueError(f"not within {low}..{'' if high is None else high}")
        return number

    return parse


_POSITIVE = _whole(1)
_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "f", "n"})


def _flag(value: str) -> bool:
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError("not a boolean")


def _user_verification(value: str) -> UserVerification:
    if value not in ("required", "preferred", "discouraged"):
        raise ValueError("not one of required, preferred, discouraged")
    return cast("UserVerification", value)


def _env(name: str, parse: Callable[[str], Any] = _text) -> dict[str, Any]:
    """Field metadata: the environment variable a setting is read from, and how it is parsed."""
    return {"env": name, "parse": parse}


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything fixed per deployment. Runtime-changeable settings (kill switches, log level) live in SSM."""

    stage: str = field(default="dev", metadata=_env("STAGE"))
    users_table: str = field(metadata=_env("USERS_TABLE"))
    sessions_table: str = field(metadata=_env("SESSIONS_TABLE"))
    counters_table: str = field(metadata=_env("COUNTERS_TABLE"))
    tokens_table: str = field(metadata=_env("TOKENS_TABLE"))
    domains_table: str = field(metadata=_env("DOMAINS_TABLE"))
    outbox_table: str = field(metadata=_env("OUTBOX_TABLE"))
    activity_table: str = field(metadata=_env("ACTIVITY_TABLE"))
    # Only the mail function is given its dead-letter queue; the other functions never send to it.
    mail_dead_letter_queue_url: str = field(default="", metadata=_env("MAIL_DEAD_LETTER_QUEUE_URL"))
    killswitch_path: str = field(metadata=_env("KILLSWITCH_PATH"))  # one parameter per switch below it
    log_level_parameter: str = field(metadata=_env("LOG_LEVEL_PARAMETER"))
    sender_email: str = field(metadata=_env("SENDER_EMAIL"))
    verification_url: str = field(metadata=_env("VERIFICATION_URL"))
    # The link in recovery emails ({token} is replaced): the page that asks for the new password.
    recovery_url: str = field(
        default="http://localhost:3000/console/recover?token={token}", metadata=_env("RECOVERY_URL")
    )
    # The console's sessions page, named in new sign-in notices (a plain link: it carries no token).
    sessions_url: str = field(default="http://localhost:3000/console/sessions", metadata=_env("SESSIONS_URL"))
    default_domain: str = field(metadata=_env("DEFAULT_DOMAIN"))
    session_hours: int = field(default=24, metadata=_env("SESSION_HOURS", _POSITIVE))
    remember_me_days: int = field(default=30, metadata=_env("REMEMBER_ME_DAYS", _POSITIVE))
    scoped_session_hours: int = field(default=24, metadata=_env("SCOPED_SESSION_HOURS", _POSITIVE))
    long_lived_session_days: int = field(default=3650, metadata=_env("LONG_LIVED_SESSION_DAYS", _POSITIVE))
    verification_token_hours: int = field(default=24, metadata=_env("VERIFICATION_TOKEN_HOURS", _POSITIVE))
    recovery_token_minutes: int = field(default=30, metadata=_env("RECOVERY_TOKEN_MINUTES", _POSITIVE))
    # New passwords are also looked up in Have I Been Pwned's range API (CONTRACT section 17).
    pwned_passwords_range: bool = field(default=False, metadata=_env("PWNED_PASSWORDS_RANGE", _flag))
    staff_require_second_factor: bool = field(
        default=True, metadata=_env("STAFF_REQUIRE_SECOND_FACTOR", _flag)
    )
    # WebAuthn: the relying-party id keys are scoped to (a host name), the name authenticators show,
    # the origins (comma-separated) allowed to use the keys, and the user verification asked for.
    webauthn_rp_id: str = field(default="localhost", metadata=_env("WEBAUTHN_RP_ID"))
    webauthn_rp_name: str = field(default="Nimbus", metadata=_env("WEBAUTHN_RP_NAME"))
    webauthn_origins: str = field(default="http://localhost:3000", metadata=_env("WEBAUTHN_ORIGINS"))
    webauthn_user_verification: UserVerification = field(
        default="preferred", metadata=_env("WEBAUTHN_USER_VERIFICATION", _user_verification)
    )
    # The X.509 certificate (PEM) of the key an upstream deployment signed its session tokens with:
    # with it, those tokens keep authenticating their imported sessions; without it, none does.
    upstream_jwt_certificate: str = field(default="", metadata=_env("UPSTREAM_JWT_CERTIFICATE"))
    # The KMS key new TOTP secrets are sealed under (its ARN; an id or alias works too). Seeds sealed
    # under an older key name theirs, and open while the function's role may still Decrypt with it.
    totp_key: str = field(default="", metadata=_env("TOTP_KEY_ARN"))
    metrics_namespace: str = field(default="Nimbus", metadata=_env("POWERTOOLS_METRICS_NAMESPACE"))
    # How long a function trusts its copy of the kill switches and log level (CONTRACT: at most 10 s).
    config_cache_seconds: int = field(default=10, metadata=_env("CONFIG_CACHE_SECONDS", _whole(0, 10)))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        """The settings from environment variables (the others are ignored); ``SettingsError``
        names every variable that is missing or unusable."""
        values: dict[str, Any] = {}
        problems: list[str] = []
        for setting in fields(cls):
            name, parse = setting.metadata["env"], setting.metadata["parse"]
            if name not in environ:
                if setting.default is MISSING and setting.default_factory is MISSING:
                    problems.append(f"{name} is missing")
                continue
            try:
                values[setting.name] = parse(environ[name])
            except ValueError as exc:
                problems.append(f"{name}={environ[name]!r}: {exc}")
        if problems:
            raise SettingsError("unusable settings: " + "; ".join(problems))
        return cls(**values)

    def environment(self) -> dict[str, str]:
        """The environment variables that give these settings (what the template sets)."""
        return {setting.metadata["env"]: _spell(getattr(self, setting.name)) for setting in fields(self)}

    def relying_party(self) -> RelyingParty:
        """The WebAuthn relying party of this deployment (``ValueError`` if the settings are unusable)."""

        origins = tuple(o.strip() for o in self.webauthn_origins.split(",") if o.strip())
        return RelyingParty(
            id=self.webauthn_rp_id,
            name=self.webauthn_rp_name,
            origins=origins,
            user_verification=self.webauthn_user_verification,
        )


def _spell(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@cache
def get_settings() -> Settings:
    """The settings of this container, parsed once. Tests call ``get_settings.cache_clear()``."""
    return Settings.from_environment(os.environ)


_USER_VERIFICATION = frozenset({"required", "preferred", "discouraged"})


def _check_origin(origin: str, rp_id: str) -> None:
    parts = urlsplit(origin)
    host = parts.hostname or ""
    local = host == "localhost"
    if (
        parts.scheme not in ("https", "http")
        or (parts.scheme == "http" and not local)
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
        or origin != origin.lower()
        or not (host == rp_id or host.endswith(f".{rp_id}"))
    ):
        raise ValueError(f"origin {origin!r} is not a scheme://host[:port] origin on rp id {rp_id!r}")


@dataclass(frozen=True, slots=True)
class RelyingParty:
    """Who we are to authenticators: the rp id keys are scoped to, and the origins allowed to use them.

    ``id`` is a bare host ("files.example", "localhost"); every origin must be ``https://`` (or
    ``http://localhost``) on that host or a subdomain of it, as browsers require.
    """

    id: str
    name: str
    origins: tuple[str, ...]
    user_verification: str  # "required" | "preferred" | "discouraged"

    def __post_init__(self) -> None:
        if not self.id or self.id != self.id.lower() or "/" in self.id or ":" in self.id:
            raise ValueError(f"relying party id must be a lower-case host name, not {self.id!r}")
        if not self.name:
            raise ValueError("relying party name must not be empty")
        if not self.origins:
            raise ValueError("relying party needs at least one allowed origin")
        for origin in self.origins:
            _check_origin(origin, self.id)
        if self.user_verification not in _USER_VERIFICATION:
            raise ValueError(f"user_verification must be one of {sorted(_USER_VERIFICATION)}")
