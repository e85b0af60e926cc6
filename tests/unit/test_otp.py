"""TOTP (RFC 6238 test vectors, drift, replay steps, secrets of every length) and backup codes.

Codes are checked against tests/totp_reference.py, an HMAC-SHA-1 written there from RFC 4226 with the
standard library only, itself checked here against the RFCs' own vectors."""

from __future__ import annotations

import base64
import io
import logging
import math
import re
import subprocess
import sys
from collections.abc import Iterator

import pyotp
import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from nimbus_core.factors import otp
from tests import totp_reference
from tests.migration.upstream import totp_secret as upstream_totp_secret

# RFC 6238 appendix B, SHA-1 seed "12345678901234567890", 8 digits; our codes are the last 6.
RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()
FULLWIDTH = "\uff11\uff12\uff13\uff14\uff15\uff16"  # digits by isdigit(), not ASCII
RFC_VECTORS = [(59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"), (1234567890, "89005924")]
RFC_VECTORS += [(2000000000, "69279037"), (20000000000, "65353130")]
# RFC 4226 appendix D: HOTP of the same seed for the counters 0 to 9.
RFC_4226_CODES = ["755224", "287082", "359152", "969429", "338314"]
RFC_4226_CODES += ["254676", "287922", "162583", "399871", "520489"]
NOW = 1_800_000_015.0


def test_the_reference_codes_are_the_rfcs_own_vectors() -> None:
    seed = b"12345678901234567890"

    assert [totp_reference.hotp(seed, counter) for counter in range(10)] == RFC_4226_CODES
    assert [totp_reference.totp(RFC_SECRET, at, digits=8) for at, _ in RFC_VECTORS] == [
        eight for _, eight in RFC_VECTORS
    ]


@pytest.mark.parametrize(("at", "eight_digits"), RFC_VECTORS)
@pytest.mark.parametrize("spelling", [RFC_SECRET, RFC_SECRET.lower(), f"{RFC_SECRET}========"])
def test_totp_matches_the_rfc_6238_vectors(at: int, eight_digits: str, spelling: str) -> None:
    assert otp.totp_step(spelling, eight_digits[-6:], at) == at // 30


def test_upstream_secrets_16_characters_of_an_80_bit_key_verify_their_codes() -> None:
    step = int(NOW) // 30
    for _ in range(20):
        secret = upstream_totp_secret()
        assert len(secret) == 16

        assert otp.totp_step(secret, totp_reference.totp(secret, NOW), NOW) == step
        assert otp.totp_step(secret, totp_reference.totp(secret, NOW - 30), NOW) == step - 1
        assert otp.totp_step(secret, totp_reference.totp(secret, NOW + 90), NOW) is None


def _spellings(key: bytes) -> list[str]:
    padded = base64.b32encode(key).decode()
    bare = padded.rstrip("=")
    return [bare, padded, bare.lower(), padded.lower()]


@pytest.mark.parametrize("size", [1, 5, 8, 10, 13, 14, 16, 20, 32, 64, 100])
def test_secrets_of_any_length_and_spelling_verify_as_the_rfc_says(size: int) -> None:
    key = bytes(range(7, 7 + size))
    step = int(NOW) // 30
    code = totp_reference.hotp(key, step)

    for secret in _spellings(key):
        assert otp.totp_step(secret, code, NOW) == step, secret
    assert otp.totp_step(_spellings(key)[0], totp_reference.hotp(key, step + 2), NOW) is None


@pytest.mark.parametrize("secret", ["JBSWY3DPE", "JBSWY3DPEHPK3PX", "jbswy3dpehpk3pxpa"])
def test_a_length_outside_rfc_4648_reads_its_whole_bytes_as_upstreams_decoder_does(secret: str) -> None:
    step = int(NOW) // 30
    key = totp_reference.base32_key(secret)
    assert len(key) == len(secret) * 5 // 8

    assert otp.totp_step(secret, totp_reference.hotp(key, step), NOW) == step


@pytest.fixture
def otp_logs() -> Iterator[io.StringIO]:
    """What the otp module logs (through the functions' logger, service "nimbus")."""
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(LambdaPowertoolsFormatter())
    logging.getLogger("nimbus").addHandler(handler)
    yield sink
    logging.getLogger("nimbus").removeHandler(handler)


# Stored secrets that spell no key: empty, spaces, digits base32 has not, inner padding, a newline,
# non-ASCII letters (some of which upper-case into ASCII ones: "ß" into "SS") and control characters.
UNREADABLE = ["", "A", "=", "JBSW Y3DP", "JBSWY3DP1", "JBSW=Y3DP", "0OIL8900", "JBSWY3DP\n"]
UNREADABLE += ["\u00c9" * 16, "\x00" * 16, "\u00df" * 8, "\ufb00" * 8]


@pytest.mark.parametrize("secret", UNREADABLE)
def test_an_unreadable_stored_secret_is_a_wrong_answer_and_logged_never_an_exception(
    secret: str, otp_logs: io.StringIO
) -> None:
    assert otp.totp_step(secret, "123456", NOW, factor_id="01FACTOR") is None

    logged = otp_logs.getvalue()
    assert "TOTP secret" in logged
    assert "01FACTOR" in logged
    if secret.strip("=A"):
        assert secret not in logged


def test_one_step_of_drift_either_way_and_no_more() -> None:
    secret = otp.new_totp_secret()
    now = 1_800_000_015.0
    step = int(now) // 30
    totp = pyotp.TOTP(secret)

    assert otp.totp_step(secret, totp.at(now), now) == step
    assert otp.totp_step(secret, totp.at(now - 30), now) == step - 1
    assert otp.totp_step(secret, totp.at(now + 30), now) == step + 1
    assert otp.totp_step(secret, totp.at(now - 60), now) is None
    assert otp.totp_step(secret, totp.at(now + 60), now) is None


@pytest.mark.parametrize("bad", ["", "12345", "1234567", "abcdef", FULLWIDTH, " 12345", "12345\n", "-12345"])
def test_malformed_codes_never_match(bad: str) -> None:
    assert otp.totp_step(otp.new_totp_secret(), bad, 1_800_000_000) is None


def test_secrets_are_160_bits_and_the_uri_names_issuer_and_account() -> None:
    secret = otp.new_totp_secret()
    uri = otp.totp_uri(secret, account="alice", issuer="Nimbus")

    assert len(base64.b32decode(secret)) == 20
    assert uri.startswith("otpauth://totp/Nimbus:alice?")
    assert f"secret={secret}" in uri
    assert "issuer=Nimbus" in uri


def test_backup_codes_are_ten_distinct_80_bit_codes() -> None:
    codes = otp.new_backup_codes()

    assert len(codes) == otp.BACKUP_CODES_PER_SET == len(set(codes))
    for code in codes:
        assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}", code)
    assert 16 * math.log2(32) >= 80


def test_backup_codes_are_read_forgivingly_and_hashed() -> None:
    code = otp.new_backup_codes()[0]
    expected = otp.backup_code_hash(code)

    assert expected is not None
    assert code not in expected
    assert otp.backup_code_hash(code.lower().replace("-", " ")) == expected
    assert otp.backup_code_hash(code.replace("-", "")) == expected
    assert otp.backup_code_hash(code[:-1]) is None
    assert otp.backup_code_hash("U" * 16) is None
    assert otp.backup_code_hash("0" * 16) == otp.backup_code_hash("O" * 16)


def test_importing_otp_imports_no_otp_library() -> None:
    probe = "import sys, nimbus_core.factors.otp; print(sorted({'pyotp', 'cryptography'} & {*sys.modules}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
