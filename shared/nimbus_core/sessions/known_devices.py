"""Known devices (CONTRACT section 8, OWASP's device cookies): every sign-in answers a device token;
a login that presents a valid one for the account it names is not held by the account's login lock,
and its wrong answers are limited on the device instead. Someone who knows only a username can lock
the account's logins, but never from the owner's own browser.

A token is 256 random bits, stored as its SHA-256 under ``DEVICE#<hash>`` (tokens table), bound to
its user and to the user's session generation: revoking every session (sign out everywhere, a
password change or reset, a ban) revokes every device too. It lives 180 days, and each sign-in that
presents it replaces it with a new one.
"""

from __future__ import annotations

import secrets

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import KnownDevice, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.ratelimits import DEVICE_AUTH_FAILURES
from nimbus_core.platform import clock
from nimbus_core.sessions.tokens import hash_secret

DEVICE_DAYS = 180
# The tokens we issue are 43 characters (32 bytes, base64url); anything much longer is no token of
# ours and is not looked up.
MAX_DEVICE_TOKEN = 128


def presented(deps: Deps, token: str | None) -> KnownDevice | None:
    """The stored device a login's ``device`` names, if any (one read; none without a token). It
    still has to be valid for the account the login turns out to name: :func:`lifts_lock`."""
    if not token or len(token) > MAX_DEVICE_TOKEN:
        return None
    return deps.tokens.get_device(hash_secret(token))


def lifts_lock(device: KnownDevice | None, user: User, now: float) -> KnownDevice | None:
    """``device`` when it lets this login of ``user`` past the account's login lock; else None (an
    unknown, expired, revoked, exhausted or other account's device changes nothing)."""
    if device is not None and device.lifts_lock_for(user, failure_limit=DEVICE_AUTH_FAILURES.limit, now=now):
        return device
    return None


def recognised(device: KnownDevice | None, user: User, now: float) -> bool:
    """Whether a sign-in of ``user`` presented a known device of theirs (CONTRACT section 17: such a
    sign-in mails no new sign-in notice). A device out of wrong answers is still theirs."""
    return device is not None and device.valid_for(user, now=now)


def issue(
    deps: Deps, user: User, now: float, *, replacing: KnownDevice | None = None
) -> tuple[str, list[WriteOp]]:
    """A new device token for a sign-in of ``user`` (as ``user`` will be stored: its session
    generation), and the writes that store it and drop the one it replaces, for the sign-in's own
    transaction."""
    token = secrets.token_urlsafe(32)
    device = KnownDevice(
        hash=hash_secret(token),
        user_id=user.id,
        generation=user.session_generation,
        created_at=clock.iso(now),
        exp=int(now) + DEVICE_DAYS * 86400,
    )
    ops = [deps.tokens.put_device_op(device)]
    if replacing is not None and replacing.user_id == user.id:
        ops.append(deps.tokens.delete_device_op(replacing.hash))
    return token, ops
