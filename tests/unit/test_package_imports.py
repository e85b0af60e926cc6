"""The shape of the shared core and the functions, held by reading their source (nothing is imported).

- Each package of ``nimbus_core`` imports only the packages its docstring's last line names
  (``May import: platform, domain.``): every import counts, lazy and annotation-only ones too, so a
  package's docstring is the whole truth about what it depends on.
- No function group imports another (each deploys alone, with only the SharedLayer beside it).
- No module of the product or of its scaffolding is over 400 lines, and no function over 60.
- The scaffolding stays at most 0.75 times the size of the product, in lines of Python.

What counts as what, for the ratio:

- **Product**: what ships or what an operator runs as part of Nimbus: ``shared/`` (the core, in the
  SharedLayer), ``functions/`` (the Lambda handlers), ``tools/nimbus_tools/cli`` (the ``nimbus``
  operator tool the brief names: "operate it with its nimbus tool") and
  ``tools/nimbus_tools/migrate`` (the importer from an upstream deployment, a product feature).
- **Scaffolding**: what exists only to build, run locally, measure or check the product: the rest
  of ``tools/`` (the local API, template reading, OpenAPI generation, moto glue, deploy checks) and
  ``bench/``.
- Tests are neither: they are counted by what they prove, not by size. Lines are counted as
  ``find DIR -name '*.py' | xargs cat | wc -l`` counts them, blank lines and docstrings included.
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
PRODUCT_DIRS = ("shared", "functions", "tools/nimbus_tools/cli", "tools/nimbus_tools/migrate")
SCAFFOLDING_DIRS = ("tools", "bench")  # less what of them PRODUCT_DIRS names
MAX_SCAFFOLDING_RATIO = 0.75
PACKAGES = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
GROUPS = sorted(p.name for p in FUNCTIONS.glob("*/*_api"))
_RULE = re.compile(r"^May import: (?P<names>.+)\.$", re.M)

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def product_and_scaffolding(root: Path) -> tuple[list[Path], list[Path]]:
    """The Python modules of the product and of its scaffolding under ``root`` (module docstring)."""
    product = sorted({p for d in PRODUCT_DIRS for p in (root / d).rglob("*.py")})
    scaffolding = sorted({p for d in SCAFFOLDING_DIRS for p in (root / d).rglob("*.py")} - set(product))
    return product, scaffolding


def lines(paths: list[Path]) -> int:
    """The lines of ``paths`` together."""
    return sum(len(p.read_text().splitlines()) for p in paths)


def scaffolding_ratio(root: Path) -> float:
    """The scaffolding's lines over the product's, under ``root``."""
    product, scaffolding = product_and_scaffolding(root)
    return lines(scaffolding) / lines(product)


PRODUCT, SCAFFOLDING = product_and_scaffolding(REPO)


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


def test_no_module_of_the_product_or_its_scaffolding_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in [*PRODUCT, *SCAFFOLDING]
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_function_of_the_product_or_its_scaffolding_is_over_60_lines() -> None:
    long = {
        f"{path.relative_to(REPO)}:{node.lineno} {node.name}": length
        for path in [*PRODUCT, *SCAFFOLDING]
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


def test_the_scaffolding_is_at_most_three_quarters_of_the_product() -> None:
    product, scaffolding = lines(PRODUCT), lines(SCAFFOLDING)
    assert scaffolding <= MAX_SCAFFOLDING_RATIO * product, (
        f"scaffolding {scaffolding:,} lines against the product's {product:,}: "
        f"{scaffolding / product:.2f}x, over {MAX_SCAFFOLDING_RATIO}x"
    )


def test_the_ratio_counts_the_operator_tools_as_product_and_sees_scaffolding_grow(tmp_path: Path) -> None:
    def module(path: str, count: int) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n" * count)

    module("shared/nimbus_core/core.py", 60)
    module("functions/auth/auth_api/app.py", 20)
    module("tools/nimbus_tools/cli/main.py", 10)
    module("tools/nimbus_tools/migrate/importer.py", 10)
    module("tools/nimbus_tools/local/server.py", 40)
    module("bench/calls.py", 35)
    assert scaffolding_ratio(tmp_path) == 0.75
    module("bench/more.py", 1)
    assert scaffolding_ratio(tmp_path) > MAX_SCAFFOLDING_RATIO
