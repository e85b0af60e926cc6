"""The shipped compromised-password list (CONTRACT section 17): the 100,000 most common passwords are
found exactly as listed, whatever their length, and so are the next most common of the lengths a new
password may have, down to the 100,000th of those; nothing else is, whatever the input; the committed
file is the one its record describes.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import random
import secrets
import subprocess
import sys
from collections.abc import Callable

import pytest

from nimbus_core.compromised import is_compromised, is_listed, shipped

RECORD = json.loads(shipped.ARTEFACT.with_suffix(".json").read_text())
# Ranks 1-5, 16, 810 and 3,068 of the ranking, then ranks 99,991 to 100,000 (whatever their length).
LISTED = ["123456", "password", "12345678", "qwerty", "123456789", "letmein", "PASSWORD", "Password1"]
LAST_TEN = ["07031967", "070297", "070278", "07021958", "07021957"]
LAST_TEN += ["07021954", "070191", "070175", "070171", "070162"]
# Past rank 100,000, only the lengths a new password may have (8 to 64 characters) are kept: ranks
# 100,001 and 100,002, 256,361, 256,365 and 256,366, and 256,368 and 256,371 (the last kept).
LONG_ENOUGH = ["07012006", "07011963", "troop4life", "trondheim", "trondhei", "tron8766", "tromboni"]
# Ranks 100,003 to 100,006 (shorter than 8), 256,360 and 256,370 (shorter), and 256,372 to
# 256,375: the first of 8 characters or more beyond the 100,000th of those.
NOT_KEPT = ["070105", "0700", "069069", "0668", "troope1", "tron1"]
NOT_KEPT += ["trombeld", "trolololo", "trololol", "trolly10"]


@pytest.mark.parametrize("password", [*LISTED, *LAST_TEN])
def test_a_password_of_the_100000_most_common_is_found_whatever_its_length(password: str) -> None:
    assert is_listed(password)
    assert is_compromised(password)


@pytest.mark.parametrize("password", LONG_ENOUGH)
def test_past_them_a_password_of_a_new_passwords_length_is_found_to_the_cut(password: str) -> None:
    assert is_listed(password)


@pytest.mark.parametrize("password", NOT_KEPT)
def test_past_them_a_shorter_password_or_one_past_the_cut_is_not_found(password: str) -> None:
    assert not is_listed(password)


@pytest.mark.parametrize("password", ["password ", " password", "passw0rd!Q7", "qwerty\x00", "Qwerty1234!x"])
def test_a_password_is_compared_exactly_as_given(password: str) -> None:
    assert not is_listed(password)


def test_strong_random_passwords_are_not_found() -> None:
    assert not any(is_listed(secrets.token_urlsafe(16)) for _ in range(1_000))


def test_no_false_positive_among_50000_random_passwords_of_real_lengths() -> None:
    rng = random.Random(20261129)
    # 8 to 20 printable characters (base85 of random bytes): the lengths people choose, none of
    # them a list entry (each has 51 bits or more), so any hit would be a fingerprint collision.
    lengths = rng.choices(range(8, 21), k=50_000)
    text = base64.b85encode(rng.randbytes(sum(lengths))).decode()
    starts = itertools.accumulate(lengths, initial=0)
    passwords = [text[start : start + length] for start, length in zip(starts, lengths, strict=False)]
    assert len(set(passwords)) == 50_000
    assert [password for password in passwords if is_listed(password)] == []


@pytest.mark.parametrize(
    "password",
    [
        "x" * 72 + "password",  # past bcrypt's 72 bytes
        "p" * 64,  # the contract's longest password
        "🔑" * 64,  # 256 UTF-8 bytes
        "pass\x00word",
        "\x00",
        "",
        "密码123456",  # "password123456" in Chinese
        "\ud800\udfff",  # lone surrogates, which a JSON body can carry
    ],
)
def test_any_string_is_answered_without_raising(password: str) -> None:
    assert is_listed(password) is False
    assert is_compromised(password) is False


def test_the_committed_list_is_the_one_its_record_describes() -> None:
    data = shipped.ARTEFACT.read_bytes()
    assert hashlib.sha256(data).hexdigest() == RECORD["artefact_sha256"]
    assert len(data) == RECORD["artefact_bytes"] == shipped.HEADER.size + 8 * RECORD["entries"]
    values = shipped.decode(data)
    assert len(values) == RECORD["entries"] >= 100_000
    assert all(a < b for a, b in itertools.pairwise(values))
    assert is_listed(RECORD["first"])
    assert is_listed(RECORD["last"])


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-8],  # one entry short of its count
        lambda data: b"NOTNIMBU" + data[8:],  # another file
        lambda data: data[:10],  # shorter than the header
    ],
)
def test_a_damaged_list_file_is_refused_not_read(damage: Callable[[bytes], bytes]) -> None:
    data = shipped.ARTEFACT.read_bytes()
    with pytest.raises(ValueError, match="compromised-password list"):
        shipped.decode(damage(data))


def test_importing_the_check_reads_no_list_and_loads_no_http_client() -> None:
    # A fresh interpreter, as a cold start: importing costs nothing that only a check needs.
    probe = (
        "import sys; from nimbus_core.compromised import is_compromised, shipped, pwned_range; "
        "print(shipped.fingerprints.cache_info().currsize, "
        "sorted({'http.client', 'ssl', 'urllib.request'} & set(sys.modules)))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.split(maxsplit=1) == ["0", "[]\n"]
