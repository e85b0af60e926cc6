"""`sam build` as `make build` runs it, into temporary directories: the layers and functions it
produces hold arm64 code only, the DepsLayer installs exactly what uv.lock pins, and every wheel is
checked against its hash (a tampered hash, or a requirements file without hashes, fails the build).

It downloads wheels from PyPI (through pip's configured index), so it is a phase of its own
(`make build-check`), beside the end-to-end tests in `make test`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nimbus_tools.template import REPO_ROOT

SAM = REPO_ROOT / ".tools" / "sam" / "bin" / "sam"
# The pip settings `make build` gives SAM's python_pip workflow (read the file for why).
PIP_CONFIG = REPO_ROOT / "layers" / "pip.conf"
DEPS_REQUIREMENTS = Path("layers") / "deps" / "requirements.txt"
# What a build needs from the checkout (a tampered build works on a copy of these).
SOURCES = ("template.yaml", "layers", "shared", "functions")

# ELF header: e_machine, a little-endian 16-bit field at offset 18 (both targets are little-endian).
ELF_MAGIC = b"\x7fELF"
EM_AARCH64 = 183
EM_X86_64 = 62

# A requirement line as uv exports it: "name==version", maybe "; marker", then "\" before its hashes.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Build:
    """One `sam build` run: where it built, and how it ended."""

    build_dir: Path
    returncode: int
    output: str


def _start_build(template_dir: Path, work_dir: Path, *resources: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PIP_CONFIG_FILE": str(PIP_CONFIG), "SAM_CLI_TELEMETRY": "0"}
    command = [
        str(SAM),
        "build",
        *resources,
        "--template-file",
        str(template_dir / "template.yaml"),
        "--build-dir",
        str(work_dir / "build"),
        # Cached and parallel, as samconfig.toml builds, but with caches of its own (SAM keeps
        # dependencies in .aws-sam/deps under the working directory): never a layer that a build
        # with other settings left behind.
        "--cached",
        "--cache-dir",
        str(work_dir / "cache"),
        "--parallel",
    ]
    work_dir.mkdir(parents=True)
    return subprocess.Popen(
        command,
        cwd=work_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen[str], work_dir: Path) -> Build:
    output, _ = process.communicate(timeout=900)
    return Build(work_dir / "build", process.returncode, output)


def _copy_sources(destination: Path) -> Path:
    destination.mkdir(parents=True)
    for name in SOURCES:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, destination / name)
    return destination


def _lock_packages() -> dict[str, dict[str, object]]:
    lock = tomllib.loads((REPO_ROOT / "uv.lock").read_text(encoding="utf-8"))
    return {_normalize(package["name"]): package for package in lock["package"]}


def _arm64_wheel_hashes(package: str) -> list[str]:
    """The sha256 digests uv.lock records for ``package``'s manylinux aarch64 wheels."""
    wheels = _lock_packages()[package]["wheels"]
    assert isinstance(wheels, list)
    return [wheel["hash"].removeprefix("sha256:") for wheel in wheels if "aarch64" in wheel["url"]]


def _requirement_pins(requirements: str) -> dict[str, str]:
    return {
        _normalize(match[1]): match[2] for line in requirements.splitlines() if (match := _PIN.match(line))
    }


def _tampered_arm64_hashes(requirements: str, package: str) -> str:
    """``requirements`` with every arm64 wheel hash of ``package`` changed (its other wheels' kept)."""
    hashes = _arm64_wheel_hashes(package)
    assert hashes, f"uv.lock lists no aarch64 wheel of {package}"
    for digest in hashes:
        assert digest in requirements, f"{digest} ({package}) is not in {DEPS_REQUIREMENTS}"
        requirements = requirements.replace(digest, digest[::-1])
    return requirements


def _without_hashes(requirements: str) -> str:
    """``requirements`` as it was exported before it carried hashes (``uv export --no-hashes``)."""
    lines = (line for line in requirements.splitlines() if not line.lstrip().startswith("--hash="))
    return "\n".join(line.removesuffix("\\").rstrip() for line in lines) + "\n"


@dataclass(frozen=True)
class Builds:
    """The checkout's build, and two builds of copies whose DepsLayer requirements were tampered."""

    checkout: Build
    tampered_arm64_hash: Build
    no_hashes: Build


# The native package whose arm64 wheels' hashes are tampered with: pip never downloads its x86_64
# wheel first (whose hash is intact) and then fetches the arm64 one unchecked.
TAMPERED_PACKAGE = "cryptography"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builds]:
    """Run the three builds at once (they mostly wait on downloads), then hand them to the tests."""
    if not SAM.exists():
        pytest.fail(f"{SAM} is missing: run `make build-check` (it installs the SAM CLI)")
    root = tmp_path_factory.mktemp("sam-build")
    requirements = (REPO_ROOT / DEPS_REQUIREMENTS).read_text(encoding="utf-8")

    tampered = _copy_sources(root / "tampered-src")
    (tampered / DEPS_REQUIREMENTS).write_text(_tampered_arm64_hashes(requirements, TAMPERED_PACKAGE))
    unhashed = _copy_sources(root / "unhashed-src")
    (unhashed / DEPS_REQUIREMENTS).write_text(_without_hashes(requirements))

    started = [
        (_start_build(REPO_ROOT, root / "checkout"), root / "checkout"),
        (_start_build(tampered, root / "tampered", "DepsLayer"), root / "tampered"),
        (_start_build(unhashed, root / "unhashed", "DepsLayer"), root / "unhashed"),
    ]
    try:
        yield Builds(*(_finish(process, work_dir) for process, work_dir in started))
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def checkout(builds: Builds) -> Build:
    """The checkout's own build, which must have succeeded."""
    assert builds.checkout.returncode == 0, builds.checkout.output
    return builds.checkout


def _elf_machine(path: Path) -> int | None:
    with path.open("rb") as file:
        header = file.read(20)
    if len(header) < 20 or not header.startswith(ELF_MAGIC):
        return None
    return int.from_bytes(header[18:20], "little")


def _fields(path: Path, name: str) -> list[str]:
    """The values of header field ``name`` in a wheel's WHEEL or METADATA file (email-style headers)."""
    headers = path.read_text(encoding="utf-8").split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in headers.splitlines() if line.startswith(f"{name}:")]


def test_every_native_library_in_the_build_is_arm64(checkout: Build) -> None:
    machines = {
        path.relative_to(checkout.build_dir): machine
        for path in checkout.build_dir.rglob("*")
        if path.is_file() and not path.is_symlink() and (machine := _elf_machine(path)) is not None
    }

    # The DepsLayer has native code (cryptography, pydantic-core, argon2, bcrypt, ...): an empty
    # result would mean this test looked in the wrong place.
    assert len(machines) >= 5, machines
    assert {path: machine for path, machine in machines.items() if machine != EM_AARCH64} == {}


def test_every_installed_wheel_is_tagged_for_arm64_or_any_platform(checkout: Build) -> None:
    tags = {
        wheel.parent.name: _fields(wheel, "Tag") for wheel in checkout.build_dir.rglob("*.dist-info/WHEEL")
    }

    assert tags, "no installed wheel found in the build"
    foreign = {
        dist: dist_tags
        for dist, dist_tags in tags.items()
        if any(not tag.endswith(("-any", "_aarch64")) for tag in dist_tags)
    }
    assert foreign == {}


def test_the_deps_layer_installs_exactly_the_versions_uv_lock_pins(checkout: Build) -> None:
    pins = _requirement_pins((REPO_ROOT / DEPS_REQUIREMENTS).read_text(encoding="utf-8"))
    locked = {name: str(package["version"]) for name, package in _lock_packages().items()}
    installed = {}
    for dist_info in (checkout.build_dir / "DepsLayer" / "python").glob("*.dist-info"):
        [name] = _fields(dist_info / "METADATA", "Name")
        [version] = _fields(dist_info / "METADATA", "Version")
        installed[_normalize(name)] = version

    assert pins, f"no pinned requirement in {DEPS_REQUIREMENTS}"
    assert {name: locked.get(name) for name in pins} == pins
    assert installed == pins


def test_functions_and_the_shared_layer_carry_no_third_party_package(checkout: Build) -> None:
    # Every third-party library reaches Lambda through the hash-checked DepsLayer only.
    built = [path for path in checkout.build_dir.iterdir() if path.is_dir()]
    others = [path for path in built if path.name != "DepsLayer"]

    assert {path.name for path in built} >= {"DepsLayer", "SharedLayer", "AuthFunction"}
    assert [dist for path in others for dist in path.rglob("*.dist-info")] == []


def test_the_shared_layer_ships_the_compromised_password_list(checkout: Build) -> None:
    # A data file beside the modules: the layer must carry it byte for byte, or every check fails.
    listed = Path("nimbus_core") / "compromised" / "fingerprints.bin"
    built = checkout.build_dir / "SharedLayer" / "python" / listed
    assert built.read_bytes() == (REPO_ROOT / "shared" / listed).read_bytes()


def test_an_arm64_wheel_that_does_not_match_its_hash_fails_the_build(builds: Builds) -> None:
    build = builds.tampered_arm64_hash

    assert build.returncode != 0, build.output
    assert "DO NOT MATCH THE HASHES" in build.output, build.output
    assert not (build.build_dir / "DepsLayer").exists()


def test_a_requirements_file_without_hashes_is_refused(builds: Builds) -> None:
    build = builds.no_hashes

    assert build.returncode != 0, build.output
    assert "Hashes are required in --require-hashes mode" in build.output, build.output
