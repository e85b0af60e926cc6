"""The README is a door (short, the two commands first) and the docs hold together: every contract
section the code cites is restated in docs/contract.md, and every relative link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nimbus_tools.template import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
CITED = re.compile(r"CONTRACT(?: sections?)? ((?:\d+(?:, | and | or |-)?)+)")
SOURCES = ("shared", "functions", "tools", "tests", "bench", "console", "docs")
SUFFIXES = {".py", ".js", ".yaml", ".toml", ".md"}


def _sources() -> list[Path]:
    found = [REPO_ROOT / name for name in ("README.md", "template.yaml", "Makefile", "pyproject.toml")]
    for top in SOURCES:
        found += [p for p in (REPO_ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in found if "node_modules" not in p.parts and p.name != "contract.md"]


def test_the_readme_is_at_most_200_lines_and_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```")[1]

    assert len(text.splitlines()) <= 200
    assert "make serve" in first_block
    assert "make test" in first_block
    assert text.index("```") < text.index("\n## ")  # before any section


def test_every_contract_section_the_code_cites_is_restated_in_the_docs() -> None:
    headings = set(re.findall(r"^## (\d+)\. ", (REPO_ROOT / "docs" / "contract.md").read_text("utf-8"), re.M))
    cited: dict[str, set[str]] = {}
    for path in _sources():
        for match in CITED.finditer(path.read_text(encoding="utf-8", errors="replace")):
            for number in re.findall(r"\d+", match.group(1)):
                cited.setdefault(number, set()).add(str(path.relative_to(REPO_ROOT)))

    assert cited, "the scan found no citation at all"
    missing = {n: sorted(paths)[:3] for n, paths in cited.items() if n not in headings}
    assert not missing


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]

    broken = [t for t in local if t and not (page.parent / t).exists()]
    assert not broken


# `tests/integration/test_x.py::test_name`, or `test_x.py::test_name` for a file named before.
_TEST_REFERENCE = re.compile(r"`(?:tests/[\w/]+/)?(test_\w+\.py)(?:::(test_\w+))?`")


def test_every_test_the_trust_boundaries_name_exists() -> None:
    """docs/security.md ties each trust-boundary line to a test: each one it names must be there."""
    text = (REPO_ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split("## Trust boundaries", 1)[1].split("\n## ", 1)[0]
    named = _TEST_REFERENCE.findall(section)
    missing = []
    for file_name, test_name in named:
        files = list((REPO_ROOT / "tests").rglob(file_name))
        if len(files) != 1:
            missing.append(f"{file_name}: {len(files)} files of that name")
        elif test_name and not re.search(rf"^def {test_name}\(", files[0].read_text("utf-8"), re.M):
            missing.append(f"{file_name}::{test_name}")
    assert len(named) >= 15
    assert missing == []
