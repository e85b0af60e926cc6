"""Security notices (CONTRACT section 14): the mail that tells a user a sensitive change was made.

A notice is queued in the outbox by the change's own transaction (never optional: a change that
lands has told its user, a change that fails has told nobody). It says what changed, when, and, for
a change the user made, from which IP address and device (the session's name); then what to do if
it was not them. It carries no link and no secret, so nothing in it can act on the account, and
every value in its HTML is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from nimbus_core.accounts import activity
from nimbus_core.accounts.mail_templates import new_sign_in_notice, security_notice
from nimbus_core.domain.activity import ActivityEvent
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.models import Email, Session, User, iso_to_epoch
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.scopes import Scope
from nimbus_core.platform import clock


class Notice(Enum):
    """The changes that are notified: (outbox kind, subject, what the notice says changed)."""

    PASSWORD_CHANGED = (
        "password-changed",
        "Your password was changed",
        "The password of your account was changed.",
    )
    EMAIL_CHANGED = (
        "email-changed",
        "Your email address was changed",
        "The email address of your account was changed; mail about the account now goes to the new address.",
    )
    FACTOR_ADDED = ("factor-added", "A second factor was added", "A second factor was added to your account.")
    FACTOR_REMOVED = (
        "factor-removed",
        "A second factor was removed",
        "A second factor was removed from your account.",
    )
    BACKUP_CODES_REGENERATED = (
        "backup-codes",
        "New backup codes were made",
        "A new set of backup codes was made for your account; the previous codes no longer work.",
    )
    SCOPED_SESSION_CREATED = (
        "api-key-created",
        "An API key was created",
        "A scoped session (API key) was created for your account.",
    )
    STAFF_GRANTED = ("staff-granted", "You are now staff", "Your account was given staff permissions.")
    STAFF_REMOVED = (
        "staff-removed",
        "You are no longer staff",
        "Your account's staff permissions were removed.",
    )
    # CONTRACT section 17: mailed by a sign-in from a device the account did not know (its text is
    # mail_templates.new_sign_in_notice; the mail function sends at most one an hour per account).
    # CONTRACT section 17: a login whose password is in the compromised-password list (the mail
    # function sends at most one a week per account).
    PASSWORD_COMPROMISED = (
        "password-compromised",
        "Your password appears in breached-password lists",
        "Your account was signed in to with a password found in lists of passwords leaked by data "
        "breaches, which attackers try first on every site.",
    )
    NEW_SIGN_IN = (
        "new-sign-in",
        "New sign-in to your account",
        "Your account was signed in to from a device it has not been signed in from before.",
    )

    @property
    def kind(self) -> str:
        """The outbox kind of the message (``notice-<name>``)."""
        return f"notice-{self.value[0]}"


_ADVICE_USER = (
    'If this was not you, reset your password at once (use "Forgot password?" on the login page), '
    "sign out every other session, and contact us by replying to this email."
)
_ADVICE_STAFF = "If you did not expect this, contact us by replying to this email."
_ADVICE_COMPROMISED = (
    "Choose a new password now (Account, then Password, in the console), one you use nowhere else, "
    "and sign out every session you do not recognise."
)
COMPROMISED_NOTICE_INTERVAL = 7 * 24 * 3600  # at most one compromised-password notice a week


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change, as the notice tells it."""

    # "user" (one of the account's sessions), "staff", "recovery" (the emailed link), or "operator"
    # (the operator tool, run with the deployment's AWS credentials rather than through the API)
    kind: str
    source_ip: str | None = None
    device: str | None = None
    session_id: str | None = None

    @classmethod
    def user(cls, source_ip: str, session: Session) -> Actor:
        """The user, from one of their sessions (named as the session list shows it)."""
        return cls("user", source_ip, session.display_name, session.id)

    @classmethod
    def recovery(cls, source_ip: str) -> Actor:
        """Whoever opened the recovery link mailed to the account's address."""
        return cls("recovery", source_ip)

    def describe(self) -> str:
        """The notice's "by whom" line."""
        if self.kind == "staff":
            return "By: a member of our staff."
        if self.kind == "operator":
            return "By: an operator of this service, with its operator tool."
        if self.kind == "recovery":
            return f"By: the password recovery link mailed to you, opened from IP address {self.source_ip}."
        return f'By: you, from IP address {self.source_ip}, device "{self.device}".'


STAFF = Actor("staff")
OPERATOR = Actor("operator")


def mask_email(address: str) -> str:
    """``a***@example.com``: enough for its owner to recognise the address, not to learn it."""
    local, at, domain = address.rpartition("@")
    if not at:
        return "***"
    return f"{local[:1]}***@{domain}"


def scope_names(flags: int) -> str:
    """The scopes of ``permissionFlags``, by name."""
    names = [scope.name for scope in Scope if scope.name and flags & scope.value]
    return ", ".join(names) or "none"


def compose(
    user: User,
    notice: Notice,
    *,
    actor: Actor,
    now: float,
    details: Sequence[str] = (),
    to: str | None = None,
) -> Email:
    """The notice of ``notice`` for ``user``, to ``to`` (by default the account's address)."""
    _, subject, what = notice.value
    return security_notice(
        to=to or user.email,
        username=user.username,
        subject=subject,
        what=what,
        details=list(details),
        when=clock.iso(now),
        by=actor.describe(),
        advice=_advice(notice),
    )


def _advice(notice: Notice) -> str:
    if notice in {Notice.STAFF_GRANTED, Notice.STAFF_REMOVED}:
        return _ADVICE_STAFF
    return _ADVICE_COMPROMISED if notice is Notice.PASSWORD_COMPROMISED else _ADVICE_USER


def notice_op(
    deps: Deps,
    user: User,
    notice: Notice,
    *,
    actor: Actor,
    now: float,
    details: Sequence[str] = (),
    to: str | None = None,
) -> WriteOp:
    """The outbox write of a notice, to commit in the change's own transaction; the same item
    carries the change to the account's activity."""
    email = compose(user, notice, actor=actor, now=now, details=details, to=to)
    event = activity.by(user.id, notice.value[0], actor=actor, now=now, details=details)
    return deps.outbox.enqueue_op(email, now=now, kind=notice.kind, user_id=user.id, event=event)


# How a sign-in proved the account, as its notice says it (an answer's kind: the password was
# checked first).
_METHODS = {
    "password": "your password",
    "totp": "your password and a code from your authenticator app",
    "backup": "your password and a backup code",
    "webauthn": "your password and a security key",
    "passkey": "a passkey",
}
# A sign-in within this long of the last notice mails none; registration counts as one (its
# verification mail went out then), so the sign-ins of an account's first hour mail none.
NEW_SIGN_IN_INTERVAL = 3600


def new_sign_in_due(user: User, *, known_device: bool, now: float) -> bool:
    """Whether a sign-in of ``user`` mails the new sign-in notice: it presented no known device of
    theirs, and the account is over an hour old. The hourly bound between notices is the mail
    function's (:func:`nimbus_core.adapters.outbox.DynamoOutbox.admit`): the sign-in reads
    nothing for it, so it costs no round trip and can never fail a sign-in."""
    if known_device:
        return False
    try:
        return now - iso_to_epoch(user.created_at) >= NEW_SIGN_IN_INTERVAL
    except ValueError:  # a creation time no release writes: the notice goes, the sign-in never fails
        return True


def new_sign_in_op(deps: Deps, user: User, event: ActivityEvent, *, now: float) -> WriteOp:
    """The outbox write of the new sign-in notice for the sign-in ``event`` records: when, from which
    IP and device, by which method, and the console's sessions page (a plain link: no token). The
    same item carries ``event`` to the account's activity, in place of the item it would have had."""
    email = new_sign_in_notice(
        to=user.email,
        username=user.username,
        when=clock.iso(now),
        ip=event.ip or "unknown",
        device=event.device or _device_of(event.user_agent),
        method=_METHODS.get(event.method or "", event.method or "unknown"),
        sessions_url=deps.settings.sessions_url,
    )
    kind = Notice.NEW_SIGN_IN.kind
    return deps.outbox.enqueue_op(email, now=now, kind=kind, user_id=user.id, event=event)


def _device_of(user_agent: str | None) -> str:
    """The device a User-Agent names (the parser loads with the first notice that needs it)."""
    from nimbus_core.domain.useragent import device_name

    return device_name(user_agent)
