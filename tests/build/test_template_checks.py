"""`make iac-check` itself: the expansion passes a SAM resource's checkov skips to what it generates
and refuses a skip without its reason; a failed check fails the run, a skip with its reason passes
its resource, and the run needs no network. (`make iac-check` over template.yaml is the check of the
template; this proves the check.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from nimbus_tools.template import REPO_ROOT, load_template

SAM_PYTHON = REPO_ROOT / ".tools" / "sam" / "bin" / "python"
CHECKOV_PYTHON = REPO_ROOT / ".tools" / "checkov" / "bin" / "python"
EXPAND = REPO_ROOT / "tools" / "sam_expand.py"

# A queue encrypted by SSE-SQS: checkov's CKV_AWS_27 wants a KMS key, so it fails unless skipped.
QUEUE = """\
  {name}:
    Type: AWS::SQS::Queue
{metadata}    Properties:
      SqsManagedSseEnabled: true
"""
TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
"""
SKIP_WITH_REASON = (
    '    Metadata: {checkov: {skip: [{id: CKV_AWS_27, comment: "Encrypted at rest by SSE-SQS"}]}}\n'
)
SKIP_WITHOUT_REASON = "    Metadata: {checkov: {skip: [{id: CKV_AWS_27}]}}\n"


def _expand(template: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SAM_PYTHON), str(EXPAND), str(template), str(tmp_path / "expanded.json")],
        capture_output=True,
        text=True,
        check=False,
    )


def _iac_check(template: Path, *, offline: bool = False) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", "-C", str(REPO_ROOT), "iac-check", f"IAC_TEMPLATE={template}"]
    if offline:
        # A network namespace of its own, with no interface but loopback (needs root, as CI has).
        command = ["unshare", "--net", *command]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
    )


def _write(tmp_path: Path, **queues: str) -> Path:
    """A template of SSE-SQS queues, each ``name=metadata``."""
    template = tmp_path / "template.yaml"
    body = "".join(QUEUE.format(name=name, metadata=metadata) for name, metadata in queues.items())
    template.write_text(TEMPLATE + body, encoding="utf-8")
    return template


def test_a_skip_on_a_sam_function_reaches_every_resource_it_expands_to(tmp_path: Path) -> None:
    ours = load_template()["Resources"]
    skips = ours["AuthFunction"]["Metadata"]["checkov"]["skip"]
    expansion = _expand(REPO_ROOT / "template.yaml", tmp_path)
    assert expansion.returncode == 0, expansion.stderr
    resources = json.loads((tmp_path / "expanded.json").read_text(encoding="utf-8"))["Resources"]

    # What SAM made of AuthFunction: the function itself, and what is named after it but not in
    # template.yaml (its log group and alarms are).
    generated = {
        name: resource
        for name, resource in resources.items()
        if name == "AuthFunction" or (name.startswith("AuthFunction") and name not in ours)
    }
    assert {"AWS::Lambda::Function", "AWS::IAM::Role", "AWS::Lambda::Alias", "AWS::Lambda::Version"} <= {
        resource["Type"] for resource in generated.values()
    }
    reached = {name: resource.get("Metadata", {}).get("checkov", {}) for name, resource in generated.items()}
    assert reached == {name: {"skip": skips} for name in generated}


def test_a_skip_without_its_reason_stops_the_expansion(tmp_path: Path) -> None:
    expansion = _expand(_write(tmp_path, Queue=SKIP_WITHOUT_REASON), tmp_path)

    assert expansion.returncode != 0
    assert "Queue: a checkov skip needs an id and a comment" in expansion.stderr


# Without a network of its own where that can be had (unshare --net needs root, as CI has).
OFFLINE = shutil.which("unshare") is not None and os.geteuid() == 0


# One run proves both ways (checkov's start is most of a run's cost): the queue whose check is
# skipped with its reason passes, the other fails the run.
def test_a_failed_check_fails_the_run_and_a_skip_with_its_reason_passes_its_resource_with_no_network(
    tmp_path: Path,
) -> None:
    run = _iac_check(_write(tmp_path, Skipped=SKIP_WITH_REASON, Unskipped=""), offline=OFFLINE)

    assert run.returncode != 0, run.stdout + run.stderr
    assert "Passed checks: " in run.stdout, run.stdout + run.stderr  # checkov ran to its report
    assert "Skipped checks: 1" in run.stdout
    assert "CKV_AWS_27" in run.stdout
    assert "FAILED for resource: AWS::SQS::Queue.Unskipped" in run.stdout
    assert "FAILED for resource: AWS::SQS::Queue.Skipped" not in run.stdout


# In checkov's environment: JSONPath parsing with PLY's table builder refused.
PARSES_FROM_WRITTEN_TABLES = """
import ply.yacc

def refuse(*args, **kwargs):
    raise AssertionError("PLY built the parse tables again")

ply.yacc.LRGeneratedTable = refuse
from bc_jsonpath_ng import parse
from bc_jsonpath_ng.ext import parse as parse_extended

assert str(parse("Resources.Queue.Properties")) == "Resources.Queue.Properties"
assert str(parse_extended("Resources[0].Properties")) == "Resources.[0].Properties"
"""


def test_checkovs_jsonpath_parsers_read_the_tables_written_at_install() -> None:
    run = subprocess.run(
        [str(CHECKOV_PYTHON), "-c", PARSES_FROM_WRITTEN_TABLES], capture_output=True, text=True, check=False
    )

    assert run.returncode == 0, run.stderr
