"""The uniqueness keys of usernames and email addresses (CONTRACT section 8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nimbus_core.domain.models import User
    from nimbus_core.domain.user_ports import UserStore

# No account has a longer login name (usernames <= 64, emails <= 254); DynamoDB refuses longer keys.
MAX_LOGIN_NAME = 320


def username_key(username: str) -> str:
    """Usernames are ASCII (``[A-Za-z0-9_.-]``), unique case-insensitively."""
    return username.lower()


def email_key(email: str) -> str:
    """Addresses collide after IDNA-normalising the domain and case-folding the whole address.

    ``str.casefold`` (not ``lower``) makes ``STRASSE@x`` and ``straße@x`` the same key. The domain
    is turned into its ASCII (IDNA) form so Unicode and punycode spellings of it collide too.
    """
    local, at, domain = email.rpartition("@")
    if not at:
        return email.casefold()
    import idna  # email-validator's own dependency: the maintained IDNA 2008 codec

    try:
        domain = idna.encode(domain, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        domain = domain.casefold()
    return f"{local}@{domain}".casefold()


def find_by_login_name(users: UserStore, login_name: str) -> User | None:
    """The account a login name names, as login matches them: a username, or an address (checked
    by the maintained validator, then looked up by its key). None for a name no account can have.
    """
    if not login_name or len(login_name) > MAX_LOGIN_NAME:
        return None
    if "@" not in login_name:
        return users.find_by_username(login_name)
    from email_validator import EmailNotValidError, validate_email

    try:
        email = validate_email(login_name, check_deliverability=False).normalized
    except EmailNotValidError:
        return None
    return users.find_by_email(email)
