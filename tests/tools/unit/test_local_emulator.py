"""The middleware in front of moto: one AWS request at a time, fault injection, mail capture."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import boto3
from moto import mock_aws
from werkzeug.test import Client, TestResponse

from nimbus_tools.local.aws import FORGET_EVERY, EmulatorMiddleware
from nimbus_tools.moto_internals import tracked_model_instances

SEND_EMAIL = {
    "FromEmailAddress": "no-reply@nimbus.example",
    "Destination": {"ToAddresses": ["alice@example.com"]},
    "Content": {
        "Simple": {
            "Subject": {"Data": "Verify your email"},
            "Body": {"Text": {"Data": "Open http://x/verify?token=t"}, "Html": {"Data": "<a>verify</a>"}},
        }
    },
}


class FakeMoto:
    """Stands in for moto: answers 200 (or ``status``) and records what reached it."""

    def __init__(self, status: str = "200 OK", delay: float = 0.0) -> None:
        self.status = status
        self.delay = delay
        self.calls: list[str] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay)
        self.calls.append(environ.get("HTTP_X_AMZ_TARGET") or environ["PATH_INFO"])
        body = environ["wsgi.input"].read()
        with self._lock:
            self.active -= 1
        start_response(self.status, [("Content-Type", "application/json")])
        if environ["PATH_INFO"] == "/v2/email/outbound-emails":
            return [json.dumps({"MessageId": "msg-1"}).encode()]
        return [json.dumps({"echo": body.decode()}).encode()]


def _body(response: TestResponse) -> Any:
    # AWS JSON protocols answer application/x-amz-json-1.x, which werkzeug's .json does not read.
    return json.loads(response.get_data())


def _dynamodb(client: Client, operation: str) -> TestResponse:
    return client.post(
        "/",
        data=b"{}",
        headers={
            "X-Amz-Target": f"DynamoDB_20120810.{operation}",
            "Content-Type": "application/x-amz-json-1.0",
        },
    )


def _send_email(client: Client) -> TestResponse:
    return client.post(
        "/v2/email/outbound-emails", data=json.dumps(SEND_EMAIL), content_type="application/json"
    )


def test_requests_reach_moto_with_their_body_intact() -> None:
    moto = FakeMoto()
    response = Client(EmulatorMiddleware(moto)).post(
        "/", data=b'{"TableName": "t"}', headers={"X-Amz-Target": "DynamoDB_20120810.GetItem"}
    )
    assert response.status_code == 200
    assert _body(response) == {"echo": '{"TableName": "t"}'}


def test_fault_answers_matching_operation_for_the_given_number_of_times() -> None:
    moto = FakeMoto()
    client = Client(EmulatorMiddleware(moto))
    created = client.post(
        "/_nimbus/faults",
        json={
            "service": "dynamodb",
            "operation": "TransactWriteItems",
            "status": 500,
            "code": "InternalServerError",
            "times": 2,
        },
    )
    assert created.status_code == 201
    for _ in range(2):
        failed = _dynamodb(client, "TransactWriteItems")
        assert failed.status_code == 500
        assert _body(failed) == {"__type": "InternalServerError", "message": "injected fault"}
    assert _dynamodb(client, "GetItem").status_code == 200  # other operations are untouched
    assert _dynamodb(client, "TransactWriteItems").status_code == 200  # used up
    assert moto.calls == ["DynamoDB_20120810.GetItem", "DynamoDB_20120810.TransactWriteItems"]


def test_a_fault_lets_after_calls_through_first() -> None:
    moto = FakeMoto()
    client = Client(EmulatorMiddleware(moto))
    spec = {"service": "dynamodb", "operation": "BatchWriteItem", "after": 2, "times": 1}
    assert client.post("/_nimbus/faults", json=spec).status_code == 201
    statuses = [_dynamodb(client, "BatchWriteItem").status_code for _ in range(4)]
    assert statuses == [200, 200, 500, 200]
    assert len(moto.calls) == 3


def test_wildcard_fault_lasts_until_cleared_and_only_hits_its_service() -> None:
    client = Client(EmulatorMiddleware(FakeMoto()))
    client.post(
        "/_nimbus/faults",
        json={"service": "ssm", "operation": "*", "status": 400, "code": "ThrottlingException"},
    )
    for operation in ("GetParameters", "GetParameter", "GetParameters"):
        response = client.post("/", data=b"{}", headers={"X-Amz-Target": f"AmazonSSM.{operation}"})
        assert (response.status_code, _body(response)["__type"]) == (400, "ThrottlingException")
    assert _dynamodb(client, "GetItem").status_code == 200
    assert _body(client.get("/_nimbus/faults"))[0]["times"] is None
    client.delete("/_nimbus/faults")
    response = client.post("/", data=b"{}", headers={"X-Amz-Target": "AmazonSSM.GetParameters"})
    assert response.status_code == 200


def test_ses_v2_fault_uses_the_rest_json_error_header_and_sends_no_mail() -> None:
    middleware = EmulatorMiddleware(FakeMoto())
    client = Client(middleware)
    client.post(
        "/_nimbus/faults",
        json={
            "service": "ses",
            "operation": "SendEmail",
            "status": 500,
            "code": "InternalFailure",
            "times": 1,
        },
    )
    failed = _send_email(client)
    assert failed.status_code == 500
    assert failed.headers["x-amzn-ErrorType"] == "InternalFailure"
    assert _body(failed) == {"message": "injected fault"}
    assert middleware.mail == []


def test_accepted_ses_v2_mail_is_captured_and_can_be_cleared() -> None:
    client = Client(EmulatorMiddleware(FakeMoto()))
    assert _send_email(client).status_code == 200
    mail = _body(client.get("/_nimbus/mail"))
    assert len(mail) == 1
    assert mail[0]["id"] == "msg-1"
    assert mail[0]["from"] == "no-reply@nimbus.example"
    assert mail[0]["to"] == ["alice@example.com"]
    assert mail[0]["subject"] == "Verify your email"
    assert mail[0]["text"] == "Open http://x/verify?token=t"
    assert mail[0]["html"] == "<a>verify</a>"
    assert mail[0]["timestamp"].endswith("Z")
    client.delete("/_nimbus/mail")
    assert _body(client.get("/_nimbus/mail")) == []


def test_mail_refused_by_ses_is_not_captured() -> None:
    middleware = EmulatorMiddleware(FakeMoto(status="400 Bad Request"))
    assert _send_email(Client(middleware)).status_code == 400
    assert middleware.mail == []


def test_invalid_fault_specs_are_refused_with_400() -> None:
    client = Client(EmulatorMiddleware(FakeMoto()))
    for spec in (
        {"service": "s3"},
        {"service": "ssm", "status": 200},
        {"service": "ssm", "times": 0},
        {"service": "ssm", "after": -1},
        [1],
    ):
        response = client.post("/_nimbus/faults", json=spec)
        assert response.status_code == 400, spec
    assert client.post("/_nimbus/faults", data=b"{not json").status_code == 400
    assert client.get("/_nimbus/nothing").status_code == 404
    assert client.put("/_nimbus/mail").status_code == 405
    assert client.post("/_nimbus/streams/trim", json={"streamArn": "x"}).status_code == 400
    assert client.get("/_nimbus/streams/trim").status_code == 405


def test_aws_requests_are_served_one_at_a_time() -> None:
    moto = FakeMoto(delay=0.02)
    middleware = EmulatorMiddleware(moto)

    def call() -> None:
        _dynamodb(Client(middleware), "PutItem")

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(moto.calls) == 8
    assert moto.max_active == 1


def test_motos_record_of_every_model_object_is_emptied_every_few_requests() -> None:
    """moto keeps each model object it creates (TransactWriteItems' copies of whole tables too) for
    a dashboard the local API does not serve: kept, a long `make serve` grows without end."""
    client = Client(EmulatorMiddleware(FakeMoto()))
    with mock_aws():
        boto3.client("ssm", region_name="us-east-1").put_parameter(Name="p", Value="v", Type="String")
        for _ in range(FORGET_EVERY - 1):
            _dynamodb(client, "GetItem")
        held = tracked_model_instances()

        _dynamodb(client, "GetItem")

        assert held > 0
        assert tracked_model_instances() == 0
