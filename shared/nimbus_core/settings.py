"""Deployment configuration, read once per container from the environment the template sets."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from nimbus_core.passkeys import RelyingParty


class Settings(BaseModel):
    """Everything fixed per deployment. Runtime-changeable settings (kill switches, log level) live in SSM."""

    # defer_build: the validator is built when the container first reads its settings, not at import.
    model_config = ConfigDict(frozen=True, populate_by_name=True, defer_build=True)

    stage: str = Field("dev", alias="STAGE")
    users_table: str = Field(alias="USERS_TABLE")
    sessions_table: str = Field(alias="SESSIONS_TABLE")
    counters_table: str = Field(alias="COUNTERS_TABLE")
    tokens_table: str = Field(alias="TOKENS_TABLE")
    domains_table: str = Field(alias="DOMAINS_TABLE")
    outbox_table: str = Field(alias="OUTBOX_TABLE")
    # Only the mail function is given its dead-letter queue; the other functions never send to it.
    mail_dead_letter_queue_url: str = Field("", alias="MAIL_DEAD_LETTER_QUEUE_URL")
    killswitch_parameter: str = Field(alias="KILLSWITCH_PARAMETER")
    log_level_parameter: str = Field(alias="LOG_LEVEL_PARAMETER")
    sender_email: str = Field(alias="SENDER_EMAIL")
    verification_url: str = Field(alias="VERIFICATION_URL")
    default_domain: str = Field(alias="DEFAULT_DOMAIN")
    session_hours: int = Field(24, alias="SESSION_HOURS", gt=0)
    remember_me_days: int = Field(30, alias="REMEMBER_ME_DAYS", gt=0)
    scoped_session_hours: int = Field(24, alias="SCOPED_SESSION_HOURS", gt=0)
    long_lived_session_days: int = Field(3650, alias="LONG_LIVED_SESSION_DAYS", gt=0)
    verification_token_hours: int = Field(24, alias="VERIFICATION_TOKEN_HOURS", gt=0)
    staff_require_second_factor: bool = Field(True, alias="STAFF_REQUIRE_SECOND_FACTOR")
    # WebAuthn: the relying-party id keys are scoped to (a host name), the name authenticators show,
    # the origins (comma-separated) allowed to use the keys, and the user verification asked for.
    webauthn_rp_id: str = Field("localhost", alias="WEBAUTHN_RP_ID")
    webauthn_rp_name: str = Field("Nimbus", alias="WEBAUTHN_RP_NAME")
    webauthn_origins: str = Field("http://localhost:3000", alias="WEBAUTHN_ORIGINS")
    webauthn_user_verification: Literal["required", "preferred", "discouraged"] = Field(
        "preferred", alias="WEBAUTHN_USER_VERIFICATION"
    )
    metrics_namespace: str = Field("Nimbus", alias="POWERTOOLS_METRICS_NAMESPACE")
    # How long a function trusts its copy of the kill switches and log level (CONTRACT: at most 10 s).
    config_cache_seconds: int = Field(10, alias="CONFIG_CACHE_SECONDS", ge=0, le=10)

    def relying_party(self) -> RelyingParty:
        """The WebAuthn relying party of this deployment (``ValueError`` if the settings are unusable)."""
        from nimbus_core.passkeys import RelyingParty

        origins = tuple(o.strip() for o in self.webauthn_origins.split(",") if o.strip())
        return RelyingParty(
            id=self.webauthn_rp_id,
            name=self.webauthn_rp_name,
            origins=origins,
            user_verification=self.webauthn_user_verification,
        )


@cache
def get_settings() -> Settings:
    """The settings of this container, parsed once. Tests call ``get_settings.cache_clear()``."""
    return Settings.model_validate({k: v for k, v in os.environ.items() if k in _ENV_NAMES})


_ENV_NAMES = frozenset(f.alias for f in Settings.model_fields.values() if f.alias)
