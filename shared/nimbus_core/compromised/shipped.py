"""The shipped compromised-password list: 64-bit fingerprints of the listed passwords, sorted, in
``fingerprints.bin`` beside this module (written by ``make password-list``; its source, licence and
checksums in ``fingerprints.json``, docs/decisions/2026-11-29-compromised-password-list.md for why).

The file is a 16-byte header (``MAGIC``, format version, count; little-endian) and then ``count``
unsigned 64-bit little-endian integers in ascending order. A lookup hashes the password once and
binary-searches the array: no per-entry objects, so a container holds the list in the file's size.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from array import array
from bisect import bisect_left
from functools import cache
from pathlib import Path

ARTEFACT = Path(__file__).with_name("fingerprints.bin")
MAGIC = b"NIMBUSPW"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sII")  # magic, format version, count


def fingerprint(password: str) -> int:
    """The list's 64-bit fingerprint of ``password``: BLAKE2b with an 8-byte digest of its UTF-8
    bytes, read as an unsigned big-endian integer. Lone surrogates (which JSON can carry) are
    encoded as they stand rather than refused, so every ``str`` has a fingerprint."""
    data = password.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def encode(fingerprints: list[int]) -> bytes:
    """The artefact's bytes for ``fingerprints`` (sorted and made unique here)."""
    values = array("Q", sorted(set(fingerprints)))
    if sys.byteorder == "big":
        values.byteswap()
    return HEADER.pack(MAGIC, FORMAT_VERSION, len(values)) + values.tobytes()


def decode(data: bytes) -> array[int]:
    """The sorted fingerprints of an artefact's bytes; ValueError when they are not one."""
    if len(data) < HEADER.size:
        raise ValueError("compromised-password list: shorter than its header")
    magic, version, count = HEADER.unpack_from(data)
    if magic != MAGIC or version != FORMAT_VERSION:
        raise ValueError(f"compromised-password list: unknown format {magic!r} v{version}")
    if len(data) != HEADER.size + 8 * count:
        raise ValueError(f"compromised-password list: {len(data)} bytes for {count} entries")
    values = array("Q")
    values.frombytes(data[HEADER.size :])
    if sys.byteorder == "big":
        values.byteswap()
    return values


@cache
def fingerprints() -> array[int]:
    """The shipped list's fingerprints, read from ``ARTEFACT`` once per process (first use)."""
    return decode(ARTEFACT.read_bytes())


def is_listed(password: str) -> bool:
    """Whether ``password``, exactly as given, is in the shipped list. A password not in the list is
    reported listed only if its fingerprint equals one of the list's: count / 2**64 per lookup, for
    the shipped 160,670 entries about one chance in 1.1e14."""
    values = fingerprints()
    wanted = fingerprint(password)
    index = bisect_left(values, wanted)
    return index < len(values) and values[index] == wanted
