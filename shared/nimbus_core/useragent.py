"""Readable device names for sessions, from the User-Agent, by a maintained parser (ua-parser)."""

from __future__ import annotations

_MAX = 64


def device_name(user_agent: str | None) -> str:
    """E.g. "Firefox 132 on Ubuntu", "curl 8 on an unknown OS"; "Unknown device" without a header."""
    if not user_agent or not user_agent.strip():
        return "Unknown device"
    # Imported here: only register and login name sessions, and the parser costs ~70 ms to import.
    from ua_parser import parse

    result = parse(user_agent[:512])
    agent = result.user_agent
    client = agent.family if agent and agent.family != "Other" else "Unknown client"
    if agent and agent.major and agent.family != "Other":
        client = f"{client} {agent.major}"
    os = result.os
    where = f"on {os.family}" if os and os.family != "Other" else "on an unknown OS"
    return f"{client} {where}"[:_MAX]
