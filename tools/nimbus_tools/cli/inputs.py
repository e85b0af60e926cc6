"""Validation of what operators type: kill switch names, log levels, domain names."""

from __future__ import annotations

import re

from nimbus_core.domain.killswitches import KillSwitch, by_id
from nimbus_core.domain.loglevels import LEVELS, normalize
from nimbus_tools.cli.errors import EXIT_USAGE, CliError

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def parse_killswitch(name: str) -> KillSwitch:
    """A kill switch from its name (any case) or its number in canonical decimal (``4``, never
    ``04`` or ``٤``, as the API); unknown names exit 2 listing valid ones."""
    text = name.strip()
    member = by_id(text)  # (ACCOUNT_CREATE is 0, which is falsy: compared with None, not "or")
    if member is None:
        member = KillSwitch.__members__.get(text.upper().replace("-", "_"))
    if member is not None:
        return member
    valid = ", ".join(f"{s.name} ({s.value})" for s in KillSwitch)
    raise CliError(f"unknown kill switch {name!r}; valid: {valid}", EXIT_USAGE)


def parse_loglevel(name: str) -> str:
    """The canonical log level name; anything else exits 2 listing the five levels."""
    level = normalize(name)
    if level is None:
        raise CliError(f"invalid log level {name!r}; valid: {', '.join(LEVELS)}", EXIT_USAGE)
    return level


def normalize_domain(name: str) -> str:
    """A domain as stored: lower-case, no trailing dot, IDNs in punycode; bad syntax exits 2."""
    domain = name.strip().lower()
    if domain.endswith("."):
        domain = domain[:-1]
    try:
        # Internationalised names are stored in their ASCII (punycode) form, as DNS carries them.
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise CliError(f"{name!r} is not a valid domain name", EXIT_USAGE) from None
    labels = domain.split(".")
    valid = (
        0 < len(domain) <= 253
        and all(_LABEL.match(label) for label in labels)
        and not labels[-1].isdigit()  # an IP address is not a domain
    )
    if not valid:
        raise CliError(f"{name!r} is not a valid domain name", EXIT_USAGE)
    return domain
