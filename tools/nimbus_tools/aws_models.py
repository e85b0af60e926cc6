"""The trimmed AWS service models the functions' clients load (``make aws-models``).

A botocore client is built from its service's whole model: SSM's is 150 operations (about 0.8 MB of
JSON) and costs some 45 ms of a cold start to load and turn into a client, for the two operations
the functions call. botocore looks for models first in its ``data_path`` (the documented
``AWS_DATA_PATH`` mechanism); ``nimbus_core.adapters.clients`` points it at
``nimbus_core/adapters/aws_models``, where this module writes each service's model cut down to the
operations below, exactly as botocore defines them (documentation dropped). Everything else
(endpoint rules, paginators, retries) still comes from botocore itself.

A unit test regenerates the files from the installed botocore and fails when they differ, and the
integration tests call every operation through them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import botocore.session

MODELS_DIR = Path(__file__).resolve().parents[2] / "shared" / "nimbus_core" / "adapters" / "aws_models"
# Every operation a function calls, per service (a missing one is an AttributeError on the client).
OPERATIONS: Mapping[str, tuple[str, ...]] = {
    "dynamodb": (
        "BatchGetItem",
        "BatchWriteItem",
        "DeleteItem",
        "GetItem",
        "Query",
        "TransactWriteItems",
        "UpdateItem",
    ),
    "sesv2": ("SendEmail",),
    "sqs": ("SendMessage",),
    "ssm": ("GetParameters", "PutParameter"),
}


def trimmed(service: str, operations: Iterable[str]) -> tuple[str, dict[str, Any]]:
    """The API version and the model of ``service`` with only ``operations`` and the shapes they
    reach (inputs, outputs, errors), without documentation."""
    loader = botocore.session.get_session().get_component("data_loader")
    full = loader.load_service_model(service, "service-2")
    shapes: dict[str, Any] = {}

    def reach(name: str) -> None:
        if name in shapes:
            return
        shape = _undocumented(full["shapes"][name])
        shapes[name] = shape
        for member in shape.get("members", {}).values():
            reach(member["shape"])
        for part in ("member", "key", "value"):
            if part in shape:
                reach(shape[part]["shape"])

    kept = {}
    for name in sorted(operations):
        operation = _undocumented(full["operations"][name])
        kept[name] = operation
        for part in ("input", "output"):
            if part in operation:
                reach(operation[part]["shape"])
        for error in operation.get("errors", []):
            reach(error["shape"])
    model = {
        "version": full.get("version", "2.0"),
        "metadata": full["metadata"],
        "operations": kept,
        "shapes": dict(sorted(shapes.items())),
    }
    return str(full["metadata"]["apiVersion"]), model


def _undocumented(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _undocumented(v) for k, v in value.items() if k not in {"documentation", "documentationUrl"}
        }
    if isinstance(value, list):
        return [_undocumented(v) for v in value]
    return value


def render(model: Mapping[str, Any]) -> str:
    """The file's text: compact, stable key order, one trailing newline."""
    return json.dumps(model, separators=(",", ":"), sort_keys=True) + "\n"


def model_files() -> dict[Path, str]:
    """Every trimmed model file, by its path under :data:`MODELS_DIR`."""
    files = {}
    for service, operations in OPERATIONS.items():
        version, model = trimmed(service, operations)
        files[MODELS_DIR / service / version / "service-2.json"] = render(model)
    return files


def main() -> None:
    """Write the trimmed models (and remove any other file under MODELS_DIR)."""
    files = model_files()
    for stale in MODELS_DIR.rglob("*.json"):
        if stale not in files:
            stale.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"{path.relative_to(MODELS_DIR.parents[3])}: {len(text):,} bytes\n")


if __name__ == "__main__":
    main()
