"""The shape of the shared core and the functions, held by reading their source (nothing is imported).

- Each package of ``nimbus_core`` imports only the packages its docstring's last line names
  (``May import: platform, domain.``): every import counts, lazy and annotation-only ones too, so a
  package's docstring is the whole truth about what it depends on.
- No function group imports another (each deploys alone, with only the SharedLayer beside it).
- No module of the product is over 400 lines, and no function over 60.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "shared" / "nimbus_core"
FUNCTIONS = REPO / "functions"
PRODUCT = sorted([*CORE.rglob("*.py"), *FUNCTIONS.rglob("*.py")])
PACKAGES = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
GROUPS = sorted(p.name for p in FUNCTIONS.glob("*/*_api"))
_RULE = re.compile(r"^May import: (?P<names>.+)\.$", re.M)

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


@cache
def allowed(package: str) -> frozenset[str]:
    """The packages ``package``'s docstring says it may import."""
    doc = ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text())) or ""
    found = _RULE.search(doc)
    assert found, f"nimbus_core.{package}'s docstring does not end with 'May import: ...'"
    names = found["names"]
    return frozenset() if names == "nothing else of nimbus_core" else frozenset(names.split(", "))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of the file (lazy and TYPE_CHECKING ones too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def core_packages(modules: set[str]) -> set[str]:
    """The ``nimbus_core`` packages among ``modules`` (``nimbus_core.domain.models`` -> ``domain``)."""
    return {m.split(".")[1] for m in modules if m.startswith("nimbus_core.") and m.split(".")[1] in PACKAGES}


def test_every_core_package_names_what_it_may_import_and_only_known_packages() -> None:
    for package in PACKAGES:
        assert allowed(package) <= set(PACKAGES) - {package}, package


@pytest.mark.parametrize("package", PACKAGES)
def test_a_core_package_imports_only_what_its_docstring_allows(package: str) -> None:
    strays = {
        f"{path.relative_to(CORE)} imports nimbus_core.{other}"
        for path in (CORE / package).rglob("*.py")
        for other in core_packages(imported(path)) - {package} - allowed(package)
    }
    assert not strays, sorted(strays)


def test_no_module_of_the_core_sits_outside_a_package() -> None:
    assert sorted(p.name for p in CORE.glob("*.py")) == ["__init__.py"]


def test_the_function_groups_never_import_each_other() -> None:
    strays = {
        f"{path.relative_to(FUNCTIONS)} imports {name}"
        for group in GROUPS
        for path in FUNCTIONS.glob(f"*/{group}/*.py")
        for name in imported(path)
        if name.split(".")[0] in set(GROUPS) - {group}
    }
    assert not strays, sorted(strays)


def test_the_core_never_imports_a_function_group() -> None:
    strays = {
        f"{path.relative_to(CORE)} imports {name}"
        for path in CORE.rglob("*.py")
        for name in imported(path)
        if name.split(".")[0] in GROUPS
    }
    assert not strays, sorted(strays)


def test_no_product_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in PRODUCT
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_product_function_is_over_60_lines() -> None:
    long = {
        f"{path.relative_to(REPO)}:{node.lineno} {node.name}": length
        for path in PRODUCT
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, long


def test_the_rules_see_a_stray_import_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from nimbus_core.http.guard import Request\n"
        "def f():\n    from auth_api import routes\n" + "    x = 1\n" * 70
    )
    assert core_packages(imported(stray)) == {"http"}
    assert "auth_api" in {name.split(".")[0] for name in imported(stray)}
    (node,) = [n for n in ast.walk(ast.parse(stray.read_text())) if isinstance(n, ast.FunctionDef)]
    assert (node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES
