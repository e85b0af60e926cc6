"""Readable device names for sessions, from the User-Agent, by a maintained parser (ua-parser)."""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ua_parser import Parser

_MAX = 64
MAX_USER_AGENT = 512  # what is kept of a User-Agent (stored with its session, and parsed)
# RFC 9110 product token at the start of the header ("Cumulonimbus-Wrapper/5.1.0", "node"): the
# client names itself when the parser's browser/bot tables do not know it.
_PRODUCT = re.compile(r"([A-Za-z][A-Za-z0-9._-]{0,39})(?:/v?(\d{1,6})[0-9A-Za-z.+-]*)?(?=[\s;(]|$)")


def device_name(user_agent: str | None) -> str:
    """E.g. "Firefox 132 on Ubuntu", "curl 8 on an unknown OS", "Cumulonimbus-Wrapper 5 on an
    unknown OS"; "Unknown device" without a header."""
    if not user_agent or not user_agent.strip():
        return "Unknown device"
    from ua_parser import Domain

    user_agent = user_agent.strip()[:MAX_USER_AGENT]
    result = trimmed_parser()(user_agent, Domain.USER_AGENT | Domain.OS)
    agent = result.user_agent
    if agent and agent.family != "Other":
        client = f"{agent.family} {agent.major}" if agent.major else agent.family
    else:
        client = _product(user_agent)
    os = result.os
    where = f"on {os.family}" if os and os.family != "Other" else "on an unknown OS"
    return f"{client} {where}"[:_MAX]


@cache
def trimmed_parser() -> Parser:
    """ua-parser's default stack (its fastest resolver behind its cache) without the device table.

    Imported and built at the first session named, not at import: only register and login name
    sessions. The default parser (``ua_parser.parse``) compiles all three tables at its first use;
    device names are never shown here, and the device table alone is more than half of that build,
    so it gets no patterns at all.
    """
    from ua_parser import BasicResolver, Cache, CachingResolver, Parser, load_lazy_builtins
    from ua_parser import RegexResolver as Compiled  # None without ua-parser-rs (the [regex] extra)

    user_agents, systems, _devices = load_lazy_builtins()
    resolver = (Compiled or BasicResolver)((user_agents, systems, []))
    return Parser(CachingResolver(resolver, Cache(2000)))


def _product(user_agent: str) -> str:
    match = _PRODUCT.match(user_agent)
    if match is None:
        return "Unknown client"
    name, major = match.groups()
    return f"{name} {major}" if major else name
