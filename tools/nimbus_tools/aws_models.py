"""The botocore data the functions' clients load, cut to what they use (``make aws-models``; why and
how checked: docs/performance.md). Written from the installed botocore into ``MODELS_DIR``: each
service's model with only the operations below (documentation dropped) and its endpoint rules,
``endpoints.json`` with only these services, and botocore's other files the clients read."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from botocore.loaders import Loader

MODELS_DIR = Path(__file__).resolve().parents[2] / "shared" / "nimbus_core" / "adapters" / "aws_models"
_DYNAMODB = ("BatchGetItem", "BatchWriteItem", "DeleteItem", "GetItem", "PutItem", "Query", "UpdateItem")
# Every operation a function calls, per service (a missing one is an AttributeError on the client).
OPERATIONS: Mapping[str, tuple[str, ...]] = {
    "dynamodb": (*_DYNAMODB, "TransactWriteItems"),
    "sesv2": ("SendEmail",),
    "sqs": ("SendMessage",),
    "ssm": ("GetParameters", "PutParameter"),
}


def botocore_data() -> Loader:
    """A loader of the installed botocore's own data, read from disk: not a session's shared loader,
    whose cached dicts the clients built in the same process may have changed (botocore fills in
    endpoint variants where it resolves them)."""
    return Loader()


def trimmed(service: str, operations: Iterable[str]) -> tuple[str, dict[str, Any]]:
    """The API version and the model of ``service`` with only ``operations`` and the shapes they
    reach (inputs, outputs, errors), without documentation."""
    loader = botocore_data()
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


# botocore's own files, read whole by every client it creates.
COPIED = ("partitions", "sdk-default-configuration")


def trimmed_endpoints(prefixes: Iterable[str]) -> dict[str, Any]:
    """botocore's ``endpoints.json`` with every partition kept and, in each, only the services whose
    endpoint prefix is in ``prefixes``."""
    loader = botocore_data()
    full = loader.load_data("endpoints")
    kept = set(prefixes)
    return {
        **full,
        "partitions": [
            {**partition, "services": {k: v for k, v in partition["services"].items() if k in kept}}
            for partition in full["partitions"]
        ],
    }


def data_files() -> dict[Path, str]:
    """Every file of the clients' data directory, by its path under :data:`MODELS_DIR`."""
    loader = botocore_data()
    files = {}
    prefixes = []
    for service, operations in OPERATIONS.items():
        version, model = trimmed(service, operations)
        prefixes.append(model["metadata"]["endpointPrefix"])
        files[MODELS_DIR / service / version / "service-2.json"] = render(model)
        rules = loader.load_service_model(service, "endpoint-rule-set-1", api_version=version)
        files[MODELS_DIR / service / version / "endpoint-rule-set-1.json"] = render(rules)
    files[MODELS_DIR / "endpoints.json"] = render(trimmed_endpoints(prefixes))
    for name in COPIED:
        files[MODELS_DIR / f"{name}.json"] = render(loader.load_data(name))
    return files


def main() -> None:
    """Write the clients' data files (and remove any other file under MODELS_DIR)."""
    files = data_files()
    for stale in MODELS_DIR.rglob("*.json"):
        if stale not in files:
            stale.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"{path.relative_to(MODELS_DIR.parents[3])}: {len(text):,} bytes\n")


if __name__ == "__main__":
    main()
