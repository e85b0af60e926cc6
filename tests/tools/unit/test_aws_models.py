"""The botocore data the functions' clients load is botocore's own, cut to the operations and
services the functions use, current with the installed botocore, and the only data they load."""

from __future__ import annotations

import json

import boto3
import botocore
import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError

from nimbus_core.adapters import clients
from nimbus_tools.aws_models import MODELS_DIR, OPERATIONS, botocore_data, data_files
from nimbus_tools.template import REPO_ROOT


def test_the_committed_models_are_what_the_installed_botocore_gives() -> None:
    expected = data_files()
    committed = {path: path.read_text(encoding="utf-8") for path in MODELS_DIR.rglob("*.json")}

    assert committed.keys() == expected.keys(), "run `make aws-models` and commit the result"
    stale = [str(path.relative_to(MODELS_DIR)) for path, text in expected.items() if committed[path] != text]
    assert not stale, f"stale models {stale}: run `make aws-models` and commit the result"


def test_a_client_offers_exactly_the_kept_operations_as_botocore_defines_them() -> None:
    full = botocore.session.get_session()
    clients.reset()
    try:
        for service, operations in OPERATIONS.items():
            client = clients.session().create_client(
                service, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
            )
            model = client.meta.service_model
            reference = full.get_service_model(service)

            assert sorted(model.operation_names) == sorted(operations)
            for name in operations:
                ours, theirs = model.operation_model(name), reference.operation_model(name)
                for part in ("input_shape", "output_shape"):
                    mine, reference_shape = getattr(ours, part), getattr(theirs, part)
                    assert mine.members.keys() == reference_shape.members.keys(), (name, part)
                assert ours.http == theirs.http, name
                assert ours.context_parameters == theirs.context_parameters, name
    finally:
        clients.reset()


def test_the_clients_find_botocore_data_only_in_the_trimmed_directory() -> None:
    # botocore's own data path would have every lookup list its 440 service directories and parse
    # its 1.2 MB endpoints.json: a service we do not ship must be unknown to the functions' session.
    clients.reset()
    try:
        session = clients.session()
        loader = session.get_component("data_loader")

        assert loader.search_paths == [str(MODELS_DIR)]
        assert sorted(session.get_available_services()) == sorted(OPERATIONS)
        with pytest.raises(UnknownServiceError):
            session.create_client(
                "s3", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
            )
    finally:
        clients.reset()


def test_the_trimmed_endpoints_keep_every_partition_with_only_our_services() -> None:
    full = botocore_data().load_data("endpoints")
    ours = json.loads((MODELS_DIR / "endpoints.json").read_text(encoding="utf-8"))

    assert [p["partition"] for p in ours["partitions"]] == [p["partition"] for p in full["partitions"]]
    for mine, theirs in zip(ours["partitions"], full["partitions"], strict=True):
        assert mine["regions"] == theirs["regions"]
        assert set(mine["services"]) <= {"dynamodb", "email", "kms", "sqs", "ssm"}
        assert all(mine["services"][name] == theirs["services"][name] for name in mine["services"])
    assert {"dynamodb", "email", "sqs", "ssm"} <= set(ours["partitions"][0]["services"])


@pytest.mark.parametrize(
    "region", ["us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1"]
)
def test_a_client_reaches_the_endpoint_botocore_s_own_data_gives(region: str) -> None:
    full = botocore.session.get_session()
    clients.reset()
    try:
        for service in OPERATIONS:
            ours, theirs = (
                session.create_client(service, region, aws_access_key_id="test", aws_secret_access_key="test")
                for session in (clients.session(), full)
            )

            assert ours.meta.endpoint_url == theirs.meta.endpoint_url, (service, region)
            assert ours.meta.partition == theirs.meta.partition, (service, region)
    finally:
        clients.reset()


def _layer_pins() -> dict[str, str]:
    requirements = (REPO_ROOT / "layers" / "deps" / "requirements.txt").read_text(encoding="utf-8")
    # "name==version \" (its hashes follow on the next lines), or "name==version ; marker \".
    pins = (line.split(";")[0].removesuffix("\\").strip() for line in requirements.splitlines())
    return dict(pin.split("==") for pin in pins if "==" in pin)


def test_the_deps_layer_ships_the_sdk_that_generated_and_checks_the_models() -> None:
    # The models above are compared with the installed botocore; the functions run the layer's.
    # Both must be the one version uv.lock pins, or production would load data cut from another SDK.
    pins = _layer_pins()

    assert pins.get("botocore") == botocore.__version__
    assert pins.get("boto3") == boto3.__version__
