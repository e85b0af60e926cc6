"""TOTP (RFC 6238 test vectors, drift, replay steps) and backup codes."""

from __future__ import annotations

import base64
import math
import re
import subprocess
import sys

import pyotp
import pytest

from nimbus_core import otp

# RFC 6238 appendix B, SHA-1 seed "12345678901234567890", 8 digits; our codes are the last 6.
RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()
FULLWIDTH = "\uff11\uff12\uff13\uff14\uff15\uff16"  # digits by isdigit(), not ASCII
RFC_VECTORS = [(59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"), (1234567890, "89005924")]


@pytest.mark.parametrize(("at", "eight_digits"), RFC_VECTORS)
def test_totp_matches_the_rfc_6238_vectors(at: int, eight_digits: str) -> None:
    assert otp.totp_step(RFC_SECRET, eight_digits[-6:], at) == at // 30


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


def test_importing_otp_does_not_import_pyotp() -> None:
    probe = "import sys, nimbus_core.otp; print('pyotp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
