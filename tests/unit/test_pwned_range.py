"""The Have I Been Pwned range client (CONTRACT section 17): only the SHA-1's first 5 hex characters
leave, a suffix is found in a padded answer and the padding's zero counts are not matches, and any
failure or a request still running after the timeout is "unknown", leaving the shipped list's answer.
"""

from __future__ import annotations

import hashlib
import random
import threading

import pytest

from nimbus_core.compromised import is_compromised
from nimbus_core.compromised.pwned_range import PwnedRange, split_sha1, times_seen

# Not in the shipped list; what a user might well have reused from a breached site.
PASSWORD = "Summer2019!Bristol"
PREFIX, SUFFIX = split_sha1(PASSWORD)


def answer(*entries: tuple[str, int], padding: int = 400, seed: int = 5) -> bytes:
    """A range answer as the API sends one: ``SUFFIX:COUNT`` lines, CRLF-separated, uppercase hex,
    with ``padding`` made-up suffixes counted 0 (``Add-Padding: true``), in suffix order."""
    rng = random.Random(seed)
    lines = [(suffix, count) for suffix, count in entries]
    lines += [(f"{rng.getrandbits(140):035X}", 0) for _ in range(padding)]
    return "\r\n".join(f"{suffix}:{count}" for suffix, count in sorted(lines)).encode()


class Recorded:
    """A transport that answers ``body`` and keeps what it was asked."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.asked: list[tuple[str, float]] = []

    def __call__(self, prefix: str, timeout: float) -> bytes:
        self.asked.append((prefix, timeout))
        return self.body


def test_the_prefix_and_suffix_are_the_uppercase_sha1_of_the_utf8_password() -> None:
    digest = hashlib.sha1(PASSWORD.encode(), usedforsecurity=False).hexdigest().upper()
    assert (digest[:5], digest[5:]) == (PREFIX, SUFFIX)
    assert split_sha1("password") == ("5BAA6", "1E4C9B93F3F0682250B6CF8331B7EE68FD8")


def test_only_five_hex_characters_of_the_hash_leave() -> None:
    transport = Recorded(answer())
    PwnedRange(transport, timeout=1.5).count(PASSWORD)
    assert transport.asked == [(PREFIX, 1.5)]


def test_a_suffix_in_the_answer_is_counted() -> None:
    transport = Recorded(answer((SUFFIX, 2413), ("0" * 35, 7)))
    assert PwnedRange(transport).count(PASSWORD) == 2413
    assert is_compromised(PASSWORD, range_client=PwnedRange(transport))


def test_a_lowercase_or_lf_only_answer_still_matches() -> None:
    body = answer((SUFFIX, 3), padding=3).decode().lower().replace("\r\n", "\n").encode()
    assert times_seen(body, SUFFIX) == 3


def test_a_padding_entry_for_the_suffix_is_not_a_match() -> None:
    transport = Recorded(answer((SUFFIX, 0)))
    assert PwnedRange(transport).count(PASSWORD) == 0
    assert not is_compromised(PASSWORD, range_client=PwnedRange(transport))


def test_an_absent_suffix_counts_zero() -> None:
    assert PwnedRange(Recorded(answer(("1" * 35, 99)))).count(PASSWORD) == 0


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>Sign in to the hotel Wi-Fi</body></html>",  # a portal's page answered 200
        b"1E4C9B93F3F0682250B6CF8331B7EE68FD8",  # no count
        b"1E4C9B93F3F0682250B6CF8331B7EE68FD:12",  # 34 characters
        "é".encode() * 40,
    ],
)
def test_an_answer_that_is_not_the_format_is_unknown(body: bytes) -> None:
    assert PwnedRange(Recorded(body)).count(PASSWORD) is None


def test_a_transport_error_is_unknown_and_the_shipped_list_answers() -> None:
    def failing(prefix: str, timeout: float) -> bytes:
        raise ConnectionResetError(104, "Connection reset by peer")

    client = PwnedRange(failing)
    assert client.count(PASSWORD) is None
    assert not is_compromised(PASSWORD, range_client=client)
    assert is_compromised("password", range_client=client)


def test_the_caller_stops_waiting_at_the_timeout_while_the_request_still_runs() -> None:
    release = threading.Event()
    finished = threading.Event()

    def stalled(prefix: str, timeout: float) -> bytes:
        release.wait(30)
        finished.set()
        return answer((SUFFIX, 5))

    client = PwnedRange(stalled, timeout=0.05)
    try:
        assert client.count(PASSWORD) is None
        assert not finished.is_set()  # answered while the request was still stalled
        assert not is_compromised(PASSWORD, range_client=client)
    finally:
        release.set()


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_the_real_transport_without_a_network_is_unknown() -> None:
    # Unit tests run with sockets disabled: the HTTPS transport's connection fails at once.
    assert PwnedRange(timeout=1.5).count(PASSWORD) is None
    assert is_compromised("letmein", range_client=PwnedRange(timeout=1.5))


def test_no_thread_to_be_had_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    # What threading raises when the process has no thread left to start (a fault injected).
    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    transport = Recorded(answer((SUFFIX, 5)))
    monkeypatch.setattr(threading.Thread, "start", refused)
    assert PwnedRange(transport).count(PASSWORD) is None
    assert transport.asked == []
