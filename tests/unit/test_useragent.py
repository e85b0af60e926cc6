"""Session names from the User-Agent: the trimmed parser (no device table) reads what ua-parser's
default parser reads."""

from __future__ import annotations

import pytest
from ua_parser import Domain, parse

from nimbus_core.useragent import _parser, device_name

AGENTS = [
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36",
    "curl/8.5.0",
    "Cumulonimbus-Wrapper/5.1.0",
    "pytest/9.2",
]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_trimmed_parser_reads_the_browser_and_os_like_the_default_one(agent: str) -> None:
    trimmed = _parser()(agent, Domain.USER_AGENT | Domain.OS)
    full = parse(agent)
    assert (trimmed.user_agent, trimmed.os) == (full.user_agent, full.os)


def test_device_names() -> None:
    assert [device_name(a) for a in AGENTS] == [
        "Firefox 132 on Ubuntu",
        "Chrome 131 on Windows",
        "Mobile Safari 17 on iOS",
        "Chrome Mobile 131 on Android",
        "curl 8 on an unknown OS",
        "Cumulonimbus-Wrapper 5 on an unknown OS",
        "pytest 9 on an unknown OS",
    ]
    assert device_name(None) == device_name("  ") == "Unknown device"
