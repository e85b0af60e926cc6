"""Readable device names for sessions, from the User-Agent, by a maintained parser (ua-parser)."""

from __future__ import annotations

import re

_MAX = 64
# RFC 9110 product token at the start of the header ("Cumulonimbus-Wrapper/5.1.0", "node"): the
# client names itself when the parser's browser/bot tables do not know it.
_PRODUCT = re.compile(r"([A-Za-z][A-Za-z0-9._-]{0,39})(?:/v?(\d{1,6})[0-9A-Za-z.+-]*)?(?=[\s;(]|$)")


def device_name(user_agent: str | None) -> str:
    """E.g. "Firefox 132 on Ubuntu", "curl 8 on an unknown OS", "Cumulonimbus-Wrapper 5 on an
    unknown OS"; "Unknown device" without a header."""
    if not user_agent or not user_agent.strip():
        return "Unknown device"
    # Imported here: only register and login name sessions, and the parser costs ~70 ms to import.
    from ua_parser import parse

    user_agent = user_agent.strip()[:512]
    result = parse(user_agent)
    agent = result.user_agent
    if agent and agent.family != "Other":
        client = f"{agent.family} {agent.major}" if agent.major else agent.family
    else:
        client = _product(user_agent)
    os = result.os
    where = f"on {os.family}" if os and os.family != "Other" else "on an unknown OS"
    return f"{client} {where}"[:_MAX]


def _product(user_agent: str) -> str:
    match = _PRODUCT.match(user_agent)
    if match is None:
        return "Unknown client"
    name, major = match.groups()
    return f"{name} {major}" if major else name
