"""The system emails: plain text and HTML, with every user-supplied value escaped in the HTML."""

from __future__ import annotations

from html import escape

from nimbus_core.domain.models import Email


def verification_email(*, to: str, username: str, link: str, valid_hours: int) -> Email:
    """The email that carries a verification link."""
    text = (
        f"Hello {username},\n\n"
        f"Please verify your email address by opening this link:\n\n{link}\n\n"
        f"The link is valid for {valid_hours} hours and can be used once.\n"
        "If you did not ask for this, ignore this email.\n"
    )
    html = (
        f"<p>Hello {escape(username)},</p>"
        f'<p>Please verify your email address: <a href="{escape(link, quote=True)}">verify my email</a>.</p>'
        f"<p>The link is valid for {valid_hours} hours and can be used once. "
        "If you did not ask for this, ignore this email.</p>"
    )
    return Email(to=to, subject="Verify your email address", text=text, html=html)


def ban_email(*, to: str, username: str, reason: str) -> Email:
    """The ban notice: the username and the reason staff gave (escaped in the HTML)."""
    text = (
        f"Hello {username},\n\n"
        "Your account has been banned by our staff, and every session of it has been signed out.\n\n"
        f"Reason: {reason}\n\n"
        "If you believe this is a mistake, reply to this email.\n"
    )
    html = (
        f"<p>Hello {escape(username)},</p>"
        "<p>Your account has been banned by our staff, and every session of it has been signed out.</p>"
        f"<p>Reason: {escape(reason)}</p>"
        "<p>If you believe this is a mistake, reply to this email.</p>"
    )
    return Email(to=to, subject="Your account has been banned", text=text, html=html)


def recovery_email(*, to: str, username: str, link: str, valid_minutes: int) -> Email:
    """The email that carries a password recovery link (CONTRACT section 14)."""
    text = (
        f"Hello {username},\n\n"
        "Someone asked to reset the password of your account. To choose a new one, open this link:\n\n"
        f"{link}\n\n"
        f"The link is valid for {valid_minutes} minutes and can be used once. Resetting the password "
        "signs out every session of the account.\n"
        "If you did not ask for this, ignore this email: your password stays as it is.\n"
    )
    html = (
        f"<p>Hello {escape(username)},</p>"
        "<p>Someone asked to reset the password of your account. "
        f'<a href="{escape(link, quote=True)}">Choose a new password</a>.</p>'
        f"<p>The link is valid for {valid_minutes} minutes and can be used once. Resetting the password "
        "signs out every session of the account.</p>"
        "<p>If you did not ask for this, ignore this email: your password stays as it is.</p>"
    )
    return Email(to=to, subject="Reset your password", text=text, html=html)


def security_notice(
    *, to: str, username: str, subject: str, what: str, details: list[str], when: str, by: str, advice: str
) -> Email:
    """A security notice: what changed (``what`` and ``details``), when, by whom (``by``), and what to
    do if it was not them. It carries no link and no secret: nothing in it acts on the account."""
    lines = "".join(f"  {line}\n" for line in details)
    text = (
        f"Hello {username},\n\n{what}\n\n"
        + (f"{lines}\n" if details else "")
        + f"When: {when}\n{by}\n\n{advice}\n"
    )
    items = "".join(f"<li>{escape(line)}</li>" for line in details)
    html = (
        f"<p>Hello {escape(username)},</p><p>{escape(what)}</p>"
        + (f"<ul>{items}</ul>" if details else "")
        + f"<p>When: {escape(when)}<br>{escape(by)}</p><p>{escape(advice)}</p>"
    )
    return Email(to=to, subject=subject, text=text, html=html)


def new_sign_in_notice(
    *, to: str, username: str, when: str, ip: str, device: str, method: str, sessions_url: str
) -> Email:
    """The new sign-in notice (CONTRACT section 17): a sign-in from a device the account's sign-ins
    had not made known; when, from where, on which device, how, and where to see and end sessions.
    ``sessions_url`` is the console's sessions page: it carries no token and acts on nothing."""
    text = (
        f"Hello {username},\n\n"
        "Your account was signed in to from a device it has not been signed in from before.\n\n"
        f"When: {when}\nFrom: IP address {ip}\nDevice: {device}\nHow: {method}\n\n"
        "If this was you, there is nothing to do.\n"
        f"If it was not you, see and end your sessions on {sessions_url} (after logging in), reset "
        'your password at once (use "Forgot password?" on the login page), and contact us by replying '
        "to this email.\n"
    )
    html = (
        f"<p>Hello {escape(username)},</p>"
        "<p>Your account was signed in to from a device it has not been signed in from before.</p>"
        f"<p>When: {escape(when)}<br>From: IP address {escape(ip)}<br>Device: {escape(device)}<br>"
        f"How: {escape(method)}</p>"
        "<p>If this was you, there is nothing to do.</p>"
        f'<p>If it was not you, <a href="{escape(sessions_url, quote=True)}">see and end your sessions</a> '
        "(after logging in), reset your password at once (use &quot;Forgot password?&quot; on the login "
        "page), and contact us by replying to this email.</p>"
    )
    return Email(to=to, subject="New sign-in to your account", text=text, html=html)
