"""``make password-list``: the artefact holds exactly the first N entries of the pinned file, each
as listed; a tarball other than the pinned one and a list that is not N distinct entries are refused;
and, when the pinned package is in the cache, rebuilding it gives the committed bytes.
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


def test_the_artefact_holds_the_first_entries_as_listed_and_no_others(tmp_path: Path) -> None:
    lines = ["123456", "password", "Password", "qwerty ", "Straße1", "monkey", "dragon"]
    artefact, record = password_list.build(package(tmp_path, lines), count=5)
    values = set(shipped.decode(artefact))
    assert {shipped.fingerprint(p) for p in lines[:5]} == values
    assert not {shipped.fingerprint(p) for p in [*lines[5:], "qwerty", "strasse1"]} & values
    assert (record["entries"], record["first"], record["last"]) == (5, "123456", "Straße1")


@pytest.mark.parametrize(
    "lines", [["123456", "password", "123456"], ["123456", "", "password"], ["123456", "password"]]
)
def test_a_list_that_is_not_n_distinct_entries_is_refused(tmp_path: Path, lines: list[str]) -> None:
    with pytest.raises(ValueError, match="distinct non-empty"):
        password_list.build(package(tmp_path, lines), count=3)


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
