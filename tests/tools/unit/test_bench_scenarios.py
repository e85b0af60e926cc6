"""``make bench``'s calls per request: a scenario for every registered endpoint, derived from its
registration and the OpenAPI document (bench/scenarios.py), so a new endpoint is measured or named."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bench.scenarios import plan
from bench.stack import ScenarioError
from nimbus_tools.openapi import Registered, build_document, registered_endpoints


@pytest.fixture(scope="module")
def endpoints() -> list[Registered]:
    return registered_endpoints()


@pytest.fixture(scope="module")
def document(endpoints: list[Registered]) -> dict[str, Any]:
    return build_document(endpoints)


def _key(registered: Registered) -> str:
    return f"{registered.endpoint.method} {registered.endpoint.path}"


def test_every_registered_endpoint_has_a_scenario_derived_from_its_registration(
    endpoints: list[Registered], document: dict[str, Any]
) -> None:
    planned = {p.endpoint for p in plan(endpoints, document)}

    assert planned == {_key(r) for r in endpoints}


def test_a_new_endpoint_with_a_path_parameter_the_bench_cannot_fill_is_named(
    endpoints: list[Registered],
) -> None:
    [me] = [r for r in endpoints if _key(r) == "GET /users/me"]
    odd = replace(me, endpoint=replace(me.endpoint, path="/users/me/things/<thing>"))
    widened = [*endpoints, odd]

    with pytest.raises(ScenarioError, match="GET /users/me/things/<thing>"):
        plan(widened, build_document(widened))


def test_a_body_model_without_a_sample_request_is_named(
    endpoints: list[Registered], document: dict[str, Any]
) -> None:
    operation = document["paths"]["/users/me/domain"]["put"]
    changed = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewBody"}}}}
    doctored = {
        **document,
        "paths": {**document["paths"], "/users/me/domain": {"put": {**operation, "requestBody": changed}}},
    }

    with pytest.raises(ScenarioError, match=r"PUT /users/me/domain.*NewBody"):
        plan(endpoints, doctored)


def test_a_scenario_row_for_an_endpoint_no_longer_registered_is_named(
    endpoints: list[Registered], document: dict[str, Any]
) -> None:
    fewer = [r for r in endpoints if _key(r) != "PATCH /loglevel"]

    with pytest.raises(ScenarioError, match="PATCH /loglevel"):
        plan(fewer, document)
