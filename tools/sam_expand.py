"""Expand template.yaml into the CloudFormation template the AWS::Serverless transform makes of it,
offline, for checkov and cfn-lint to read every resource that would be deployed (the IAM roles,
versions, aliases, permissions, event source mappings and API stage SAM generates included).

Runs in the SAM CLI's tool environment (.tools/sam: aws-sam-translator and cfn-lint), through
their public APIs: cfn-lint's decoder reads the YAML with its short-form intrinsics, and
samtranslator's ``Translator`` expands it. What would call AWS is given instead:

- local ``CodeUri``/``ContentUri`` paths become the S3 location ``sam package`` would upload them
  to (the translator accepts S3 locations only; ``sam validate`` and cfn-lint do the same);
- managed policies named by name resolve from the translator's bundled map, never from IAM (a
  name it does not know stops the expansion, rather than pass unresolved);
- the region is the one samconfig.toml deploys to, so ARNs name its partition.

With ``passthrough_metadata`` each generated resource carries its SAM resource's ``Metadata``, so a
``checkov: skip`` annotation on a function reaches its role, version and alias too. A skip without
its reason (``comment``) stops the expansion.

Usage: .tools/sam/bin/python tools/sam_expand.py template.yaml expanded.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from cfnlint.decode.decode import decode_str
from samtranslator.public.parser import Parser
from samtranslator.public.translator import Translator

REGION = "us-east-1"
# The S3 location local code stands in for (never read: nothing is uploaded or deployed).
ARTIFACT_BUCKET = "nimbus-artifacts"
_LOCAL_CODE = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
}


class UnknownManagedPolicyError(LookupError):
    """The template names a managed policy the translator's bundled map does not know."""


def _no_managed_policy_lookup() -> dict[str, str]:
    # Called only for a policy name missing from the bundled map: offline, it cannot be looked up.
    raise UnknownManagedPolicyError("a managed policy name aws-sam-translator does not know: give its ARN")


class UnexplainedSkipError(ValueError):
    """A resource skips a checkov check without saying why."""


def _check_skips_explained(template: dict[str, Any]) -> None:
    # A skip is a decision about one resource: its reason stays beside it, in the template.
    for name, resource in template.get("Resources", {}).items():
        metadata = resource.get("Metadata") or {}
        for skip in (metadata.get("checkov") or {}).get("skip") or []:
            if not str(skip.get("id", "")).startswith("CKV") or not str(skip.get("comment", "")).strip():
                raise UnexplainedSkipError(f"{name}: a checkov skip needs an id and a comment (why): {skip}")


def _with_s3_code(template: dict[str, Any]) -> dict[str, Any]:
    for resource in template.get("Resources", {}).values():
        key = _LOCAL_CODE.get(resource.get("Type"))
        properties = resource.get("Properties", {})
        if key and isinstance(properties.get(key), str) and not properties[key].startswith("s3://"):
            properties[key] = {"Bucket": ARTIFACT_BUCKET, "Key": properties[key].strip("/")}
    return template


def expand(template_text: str) -> dict[str, Any]:
    """The CloudFormation template that the SAM template ``template_text`` expands to."""
    template, errors = decode_str(template_text)
    if errors or template is None:
        raise ValueError("; ".join(str(error) for error in errors) or "empty template")
    _check_skips_explained(template)
    # The translator's ARNs take their partition from the region boto3 would use.
    os.environ["AWS_DEFAULT_REGION"] = REGION
    translator = Translator(managed_policy_map=None, sam_parser=Parser())
    expanded: dict[str, Any] = translator.translate(
        sam_template=_with_s3_code(template),
        parameter_values={"AWS::Region": REGION},
        passthrough_metadata=True,
        get_managed_policy_map=_no_managed_policy_lookup,
    )
    return expanded


def main(argv: list[str]) -> int:
    """Write the expansion of ``argv[1]`` (template.yaml) to ``argv[2]`` as JSON."""
    if len(argv) != 3:
        print(__doc__.rsplit("Usage: ", 1)[1], file=sys.stderr)
        return 2
    expanded = expand(Path(argv[1]).read_text(encoding="utf-8"))
    Path(argv[2]).write_text(json.dumps(expanded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
