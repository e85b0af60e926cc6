"""The system emails: plain text and HTML, with every user-supplied value escaped in the HTML."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape


@dataclass(frozen=True, slots=True)
class Email:
    """One outgoing message."""

    to: str
    subject: str
    text: str
    html: str


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
