"""A cold start imports only what answering needs: no handler pulls in Powertools' event handler
package (its ``__init__`` imports every resolver Powertools has, AppSync's asyncio and Bedrock's
included) nor, on the HTTP functions, its event data classes (every event source's). Each handler
module is imported in a fresh interpreter, as Lambda's init phase does, and its ``sys.modules`` read.

The stream-fed functions (mail, sweep) still import the data classes: Powertools' batch utility,
which they use to report partial batch failures, imports them itself.

Nor does an HTTP handler import a request model or a view: its routes name their body, query and
path models and their success's view in their signatures (``request: Request[LoginBody]``,
``-> Reply[SuccessfulAuthView]``), string annotations read when a route is declared; a model is
imported by the first request that validates one, the views never to answer.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nimbus_tools.template import REPO_ROOT, function_specs, load_template

HANDLERS = sorted(
    f"{path.parent.name}.handler" for path in Path(REPO_ROOT, "functions").glob("*/*_api/handler.py")
)
HTTP_HANDLERS = {spec.handler_module for spec in function_specs(load_template()) if spec.routes}
EVENT_HANDLER = "aws_lambda_powertools.event_handler"
DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"
# Loaded by a path that needs it, never at import: boto3's package (s3transfer, resources; the
# clients are botocore's), the response views (documentation only), ua-parser (sessions shown),
# pydantic (the records and settings are dataclasses; request models load with the first body),
# PyJWT (an upstream token), AES-GCM (the first TOTP seed sealed or opened). (bcrypt is not
# listed: cryptography's serialization imports it when installed, which our code cannot change.)
NOT_AT_IMPORT = (
    "boto3",
    "s3transfer",
    "nimbus_core.http.views",
    "ua_parser",
    "pydantic",
    "pydantic_core",
    "jwt",
    "cryptography.hazmat.primitives.ciphers.aead",
)
# Loaded by the first request that validates a body, query or path, never at an HTTP handler's
# import: every function's request models, the shared account bodies and the pydantic validation.
REQUEST_MODELS = sorted(
    f"{path.parent.name}.models" for path in Path(REPO_ROOT, "functions").glob("*/*_api/models.py")
)
MODELS_NOT_AT_IMPORT = ("nimbus_core.http.validation", "nimbus_core.http.account_bodies", *REQUEST_MODELS)


@functools.cache
def _imported_by(module: str) -> frozenset[str]:
    """The modules a fresh interpreter holds after importing ``module``."""
    code = (
        f"import importlib, json, sys; importlib.import_module({module!r}); print(json.dumps([*sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    return frozenset(json.loads(done.stdout.splitlines()[-1]))


def _under(package: str, modules: frozenset[str]) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(f"{package}."))


def test_every_http_function_has_a_handler_module_here() -> None:
    assert HTTP_HANDLERS
    assert sorted(HTTP_HANDLERS - set(HANDLERS)) == []


@pytest.mark.parametrize("module", HANDLERS)
def test_a_handler_imports_neither_powertools_event_handler_nor_on_http_its_event_classes(
    module: str,
) -> None:
    imported = _imported_by(module)
    assert module in imported
    assert _under(EVENT_HANDLER, imported) == []
    if module in HTTP_HANDLERS:
        assert _under(DATA_CLASSES, imported) == []


@pytest.mark.parametrize("module", HANDLERS)
def test_a_handler_imports_neither_boto3_nor_pydantic_nor_the_views_nor_the_user_agent_parser(
    module: str,
) -> None:
    imported = _imported_by(module)
    assert [m for package in NOT_AT_IMPORT for m in _under(package, imported)] == []


def test_every_http_function_has_a_request_models_module_here() -> None:
    # What the next test looks for must exist: a moved module would let it pass without checking.
    assert sorted(f"{module.partition('.')[0]}.models" for module in HTTP_HANDLERS) == REQUEST_MODELS


@pytest.mark.parametrize("module", sorted(HTTP_HANDLERS))
def test_an_http_handler_imports_no_request_model_nor_pydantics_validation(module: str) -> None:
    imported = _imported_by(module)
    assert [m for package in MODELS_NOT_AT_IMPORT for m in _under(package, imported)] == []
