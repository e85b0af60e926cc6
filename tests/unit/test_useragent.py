"""Session names from the User-Agent: the trimmed parser (no device table) reads what ua-parser's
default parser reads, and an unnamed session is shown with the device of the User-Agent it keeps."""

from __future__ import annotations

import pytest
from ua_parser import Domain, parse

from nimbus_core.domain.models import Session
from nimbus_core.domain.useragent import device_name, trimmed_parser
from nimbus_core.platform.ids import new_id
from nimbus_core.sessions.session_issuer import new_session
from tests.samples import sample_user

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
    trimmed = trimmed_parser()(agent, Domain.USER_AGENT | Domain.OS)
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


def _session(name: str | None, user_agent: str | None) -> Session:
    user = sample_user(new_id(), "alice")
    return new_session(user, name=name, user_agent=user_agent, lifetime=60, now=1_800_000_000).session


def test_an_unnamed_session_is_shown_with_the_device_of_its_user_agent() -> None:
    session = _session(None, "  curl/8.5.0 ")

    assert (session.name, session.user_agent) == (None, "curl/8.5.0")
    assert session.to_public()["name"] == "curl 8 on an unknown OS"


def test_a_given_name_wins_and_no_user_agent_is_kept() -> None:
    session = _session("laptop", "curl/8.5.0")

    assert (session.user_agent, session.to_public()["name"]) == (None, "laptop")


def test_a_session_without_user_agent_is_an_unknown_device() -> None:
    assert _session(None, None).to_public()["name"] == "Unknown device"


def test_only_the_first_512_characters_of_a_user_agent_are_kept() -> None:
    session = _session(None, "x" * 5000)

    assert session.user_agent == "x" * 512
