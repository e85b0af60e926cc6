"""The breaking-change check of ``docs/openapi.json`` against the last landed document.

``python -m nimbus_tools.openapi_breaks`` (``make openapi-breaks``, in ``make test``) runs Redocly
CLI's ``diff`` (pinned in package-lock.json, its diff-recommended rules, offline) from the landed
document to the working tree's, and fails on every "major" change, one that can break a client (a
path, operation, response property or enum value removed, a request field made required, a type
changed), unless an entry of ``docs/openapi-breaks.toml`` *added since the landed document* names it
(its rule and JSON pointer), with the contract section that changed and the reason. An entry names
one break and counts only in the change that adds it: one that landed before covers nothing new, and
a new one that matches no break fails the check, so nothing can be accepted in advance.

The landed document is the one at the merge base with ``origin/main`` (else ``main``) when HEAD is
not on it (a branch: all its changes at once); on main itself (CI's clean clone), the one before the
newest change to the document: an uncommitted one, else the newest commit that changed it (first
parent). ``--base REV`` names another (``make openapi-breaks OPENAPI_BASE=REV``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nimbus_tools.template import REPO_ROOT

DOCUMENT = "docs/openapi.json"
ACCEPTED = "docs/openapi-breaks.toml"
CONTRACT_RESTATED = "docs/contract.md"
MAINLINES = ("origin/main", "main")
REDOCLY = REPO_ROOT / "node_modules" / ".bin" / "redocly"
REDOCLY_CONFIG = REPO_ROOT / "tools" / "redocly-diff.yaml"
# No usage telemetry, no look-up of a newer release, no colour codes in what it prints.
REDOCLY_ENV = {"REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_NOTIFICATIONS": "true", "NO_COLOR": "1"}
_CONTRACT = re.compile(r"CONTRACT section (\d+)")
_FIELDS = ("rule", "pointer", "contract", "reason")


class CheckError(Exception):
    """The check could not run (no tool, a document the tool cannot read, too shallow a clone)."""


@dataclass(frozen=True)
class Break:
    """A change the tool rates major: its rule, where in the documents, and what it says."""

    rule: str
    pointer: str
    operation: str
    message: str


@dataclass(frozen=True)
class Acceptance:
    """An entry of docs/openapi-breaks.toml: one break, the contract section behind it, and why."""

    rule: str
    pointer: str
    contract: str
    reason: str


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git") or "git"
    # Our own arguments: revisions and paths of this checkout, no shell.
    return subprocess.run([git, "-C", str(repo), *args], capture_output=True, text=True, check=False)  # noqa: S603


def _commit(repo: Path, rev: str) -> str | None:
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return found.stdout.strip() if found.returncode == 0 else None


def landed_base(repo: Path, given: str | None = None) -> tuple[str | None, str]:
    """The commit holding the last landed document (None: nothing landed before) and how it was chosen."""
    if given:
        commit = _commit(repo, given)
        if commit is None:
            raise CheckError(f"--base {given}: no such commit")
        return commit, f"{given} (given)"
    head = _commit(repo, "HEAD")
    if head is None:
        return None, "no commit yet"
    for ref in MAINLINES:
        tip = _commit(repo, ref)
        if tip is not None:
            base = _git(repo, "merge-base", "HEAD", tip).stdout.strip()
            if base and base != head:
                return base, f"the merge base with {ref} ({base[:9]})"
            break
    if _git(repo, "diff", "--quiet", "HEAD", "--", DOCUMENT).returncode != 0:
        return head, f"HEAD ({head[:9]}), before the uncommitted change"
    return _before_newest_change(repo)


def _before_newest_change(repo: Path) -> tuple[str | None, str]:
    newest = _git(repo, "log", "-1", "--first-parent", "--format=%H %P", "--", DOCUMENT).stdout.split()
    if not newest:
        return None, f"no commit holds {DOCUMENT}"
    if len(newest) == 1:
        if _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            # Nothing to compare with is no break: a shallow clone (a CI checkout, say) says so and
            # passes rather than failing every run; the change was checked where it was made.
            return (
                None,
                f"none: a shallow clone lacks the commit before {newest[0][:9]} (git fetch --unshallow)",
            )
        return None, f"{newest[0][:9]} made {DOCUMENT}"
    return newest[1], f"{newest[1][:9]}, before the newest change to it ({newest[0][:9]})"


def _landed_text(repo: Path, base: str | None, path: str) -> str | None:
    if base is None:
        return None
    shown = _git(repo, "show", f"{base}:{path}")
    return shown.stdout if shown.returncode == 0 else None


def breaking_changes(landed: Path, current: Path) -> tuple[list[Break], dict[str, int]]:
    """Redocly's diff of the two documents: the major changes, and the count of changes per impact."""
    if not REDOCLY.exists():
        raise CheckError(f"{REDOCLY.relative_to(REPO_ROOT)} is missing: make installs it (node_modules)")
    command = [str(REDOCLY), "diff", str(landed), str(current), "--format", "json"]
    command += ["--config", str(REDOCLY_CONFIG), "--lint-config", "error"]
    environment = {**os.environ, **REDOCLY_ENV}
    # The pinned tool of this checkout, on two files: no shell, no input from elsewhere.
    ran = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)  # noqa: S603
    try:
        report: dict[str, Any] = json.loads(ran.stdout)
    except json.JSONDecodeError:
        raise CheckError(f"redocly diff exited {ran.returncode}:\n{ran.stderr.strip()}") from None
    breaks = []
    for change in report["changes"]:
        for verdict in change["verdicts"]:
            if verdict["impact"] == "major":
                where = verdict["location"]["pointer"]
                breaks.append(Break(verdict["ruleId"], where, _operation(change["path"]), verdict["message"]))
    summary = {impact: int(report["summary"][impact]) for impact in ("major", "minor", "patch")}
    # Its exit status and its report must agree: a report whose shape changed must not read as clean.
    failed = ran.returncode == 1
    if ran.returncode not in {0, 1} or failed != bool(breaks) or bool(summary["major"]) != bool(breaks):
        read = f"{len(breaks)} major verdicts read from its report"
        raise CheckError(f"redocly diff exited {ran.returncode} with {read}:\n{ran.stderr.strip()}")
    return breaks, summary


def _operation(pointer: str) -> str:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.removeprefix("#/").split("/")]
    if len(parts) >= 3 and parts[0] == "paths":
        return f"{parts[2].upper()} {parts[1]}"
    return "/".join(parts[:2])


def acceptances(text: str | None, sections: set[str] | None) -> list[Acceptance]:
    """The entries of an acceptance file's text, each checked for its four fields and (given the
    sections) a section of the contract's restatement; a landed entry was checked when it landed."""
    if text is None:
        return []
    entries = tomllib.loads(text).get("break", [])
    found = []
    for index, entry in enumerate(entries, start=1):
        values = {field: str(entry.get(field, "")).strip() for field in _FIELDS}
        empty = [field for field in _FIELDS if not values[field]]
        if empty or set(entry) - set(_FIELDS):
            raise CheckError(f"{ACCEPTED}: break {index} needs exactly {', '.join(_FIELDS)} (empty: {empty})")
        cited = _CONTRACT.fullmatch(values["contract"])
        if sections is not None and (cited is None or cited.group(1) not in sections):
            wanted = f"'CONTRACT section N', a section of {CONTRACT_RESTATED}"
            raise CheckError(f"{ACCEPTED}: break {index}: contract must be {wanted}")
        found.append(Acceptance(**values))
    return found


def _read(path: Path) -> str | None:
    return path.read_text("utf-8") if path.exists() else None


def check(repo: Path, given_base: str | None = None) -> int:
    """Run the check on a checkout, print what it found, and return the exit status (0: passed)."""
    base, why = landed_base(repo, given_base)
    landed = _landed_text(repo, base, DOCUMENT)
    print(f"openapi-breaks: {DOCUMENT} against the landed one at {why}")
    if landed is None:
        print("openapi-breaks: no landed document to compare against: passed")
        return 0
    sections = set(re.findall(r"^## (\d+)\. ", _read(repo / CONTRACT_RESTATED) or "", re.M))
    current = acceptances(_read(repo / ACCEPTED), sections)
    before = set(acceptances(_landed_text(repo, base, ACCEPTED), None))
    new = [entry for entry in current if entry not in before]
    with tempfile.TemporaryDirectory() as scratch:
        landed_path = Path(scratch) / "landed-openapi.json"
        landed_path.write_text(landed, "utf-8")
        breaks, summary = breaking_changes(landed_path, repo / DOCUMENT)
    print("openapi-breaks: {major} major, {minor} minor, {patch} patch".format(**summary))
    named = {(entry.rule, entry.pointer) for entry in new}
    unaccepted = [b for b in breaks if (b.rule, b.pointer) not in named]
    unmatched = [e for e in new if (e.rule, e.pointer) not in {(b.rule, b.pointer) for b in breaks}]
    for item in breaks:
        state = "accepted" if item not in unaccepted else "BREAKS CLIENTS"
        print(f"  {state}: {item.rule} at {item.pointer} ({item.operation}): {item.message}")
    for entry in unmatched:
        print(f"  {ACCEPTED} accepts a break this change does not make: {entry.rule} at {entry.pointer}")
    if unaccepted:
        print(f"openapi-breaks: FAILED. A break the contract made is accepted by a new entry of {ACCEPTED},")
        print("with the section of docs/contract.md that changed and why clients are fine with it:")
        for item in unaccepted:
            print(f'[[break]]\nrule = "{item.rule}"\npointer = "{item.pointer}"')
            print('contract = "CONTRACT section N"  # the section that changed')
            print('reason = ""  # why the clients are fine with it (an empty one is refused)')
    if unaccepted or unmatched:
        return 1
    print("openapi-breaks: passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m nimbus_tools.openapi_breaks [--repo PATH] [--base REV]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout (default: this one)")
    parser.add_argument("--base", help="the commit holding the landed document (default: see above)")
    args = parser.parse_args(argv)
    try:
        return check(args.repo, args.base)
    except CheckError as error:
        print(f"openapi-breaks: cannot check: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
