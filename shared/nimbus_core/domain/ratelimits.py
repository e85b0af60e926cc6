"""The endpoint rate limits of the seed (its Limits table), with their "not counted" responses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Per(Enum):
    """What a limit counts by."""

    IP = "ip"  # requestContext.http.sourceIp as API Gateway reports it, never a header
    USER = "user"
    SESSION = "session"  # a failure limit counted on the session item (reverification)
    DEVICE = "device"  # a failure limit counted on a known device's item (login)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``limit`` counted requests per ``window`` seconds; responses in ``not_counted`` give theirs back."""

    name: str
    limit: int
    window: int
    per: Per
    not_counted: frozenset[int] = frozenset()


REGISTER = RateLimit("register", 1, 6 * 3600, Per.IP, frozenset({409, 500}))
LOGIN = RateLimit("login", 4, 5 * 60, Per.IP, frozenset({404}))
CHANGE_USERNAME = RateLimit("username", 3, 24 * 3600, Per.USER, frozenset({409, 500}))
CHANGE_EMAIL = RateLimit("email", 3, 24 * 3600, Per.USER, frozenset({409, 500}))
RESEND_VERIFICATION = RateLimit("verify-resend", 1, 5 * 60, Per.USER, frozenset({500}))
CHANGE_PASSWORD = RateLimit("password", 5, 24 * 3600, Per.USER, frozenset({500}))
CHANGE_DOMAIN = RateLimit("domain", 20, 3600, Per.USER, frozenset({500}))
CREATE_SCOPED_SESSION = RateLimit("scoped-session", 4, 5 * 60, Per.IP)
# CONTRACT section 16: the answers of passkey sign-ins (the challenge step is not counted), and the
# challenges a signed-in user asks for to reverify with a passkey.
PASSKEY_LOGIN = RateLimit("passkey-login", 10, 5 * 60, Per.IP)
PASSKEY_REVERIFY = RateLimit("passkey-reverify", 10, 5 * 60, Per.USER, frozenset({400}))
# Account recovery (CONTRACT section 14): the request and the reset, per IP. A challenge answered
# with a second factor is not counted (the guard gives it back), so a reset costs one hit.
RECOVER = RateLimit("recover", 5, 3600, Per.IP)
RESET_PASSWORD = RateLimit("recover-reset", 10, 15 * 60, Per.IP, frozenset({500}))
# Recovery emails per account, counted silently on the user item: beyond it the request is
# answered as every other (201) and no mail goes out.
RECOVERY_MAILS = RateLimit("recovery-mails", 3, 24 * 3600, Per.USER)

# Failed password and second-factor answers at login per account, whatever the IP (CONTRACT
# section 8). The login lock: it holds logins only, never recovery or a signed-in reverification.
ACCOUNT_AUTH_FAILURES = RateLimit("auth-failures", 10, 15 * 60, Per.USER)
# Failed passwords and second-factor answers at login with a known device (CONTRACT section 8),
# counted on the device's item: such a login is not held by the account's lock, and past this limit
# the device no longer lifts it.
DEVICE_AUTH_FAILURES = RateLimit("device-failures", 5, 15 * 60, Per.DEVICE)
# Failed passwords and second-factor answers at reverification, per session (counted on the session
# item, which the authentication read brings).
REVERIFY_FAILURES = RateLimit("reverify-failures", 5, 15 * 60, Per.SESSION)
# Wrong second-factor answers one recovery token takes before it is void (the account has at most
# RECOVERY_MAILS tokens a window, so this bounds guessing through recovery).
RECOVERY_WRONG_ANSWERS = 10
