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
    "kms": ("Decrypt", "GenerateDataKey"),
    "sesv2": ("SendEmail",),
    "sqs": ("SendMessage",),
    "ssm": ("GetParameters", "PutParameter"),
}
_DOCUMENTATION = {"documentation", "documentationUrl"}  # the keys dropped from every model


def botocore_data() -> Loader:
    """A loader of the installed botocore's own data, read from disk: not a session's shared loader,
    whose cached dicts the clients built in the same process may have changed (botocore fills in
    endpoint variants where it resolves them)."""
    return Loader()


def trimmed(service: str, operations: Iterable[str]) -> tuple[str, dict[str, Any]]:
    """The API version and the model of ``service`` with only ``operations`` and the shapes they
    reach (inputs, outputs, errors), without documentation."""
    full = botocore_data().load_service_model(service, "service-2")
    reached: list[str] = []  # shapes named by what is kept so far
    kept = {name: _undocumented(full["operations"][name], reached) for name in sorted(operations)}
    shapes: dict[str, Any] = {}
    while reached:
        if (name := reached.pop()) not in shapes:
            shapes[name] = _undocumented(full["shapes"][name], reached)
    model = {
        "version": full.get("version", "2.0"),
        "metadata": full["metadata"],
        "operations": kept,
        "shapes": dict(sorted(shapes.items())),
    }
    return str(full["metadata"]["apiVersion"]), model


def _undocumented(value: Any, reached: list[str]) -> Any:
    """``value`` without documentation, adding every shape it names (``"shape": name``) to ``reached``."""
    if isinstance(value, list):
        return [_undocumented(v, reached) for v in value]
    if not isinstance(value, dict):
        return value
    if isinstance(value.get("shape"), str):
        reached.append(value["shape"])
    return {k: _undocumented(v, reached) for k, v in value.items() if k not in _DOCUMENTATION}


def render(model: Mapping[str, Any]) -> str:
    """The file's text: compact, stable key order, one trailing newline."""
    return json.dumps(model, separators=(",", ":"), sort_keys=True) + "\n"


def trimmed_endpoints(prefixes: Iterable[str]) -> dict[str, Any]:
    """botocore's ``endpoints.json`` with every partition kept and, in each, only the services whose
    endpoint prefix is in ``prefixes``."""
    full = botocore_data().load_data("endpoints")
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
    for name in ("partitions", "sdk-default-configuration"):  # read whole by every client botocore creates
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
