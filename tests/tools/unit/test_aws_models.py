"""The trimmed service models the functions' clients load are botocore's own, cut to the operations
the functions call, and current with the installed botocore."""

from __future__ import annotations

import botocore.session

from nimbus_core.adapters import clients
from nimbus_tools.aws_models import MODELS_DIR, OPERATIONS, data_files


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
            client = clients._session().create_client(
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
