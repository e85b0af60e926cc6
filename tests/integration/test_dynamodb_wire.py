"""The functions' DynamoDB client (``DynamoDBWire``) sends, answers and fails as botocore's own client.

Each test runs the same calls through both, botocore's client and the wire made from one like it, on
moto: the requests (URL, headers, JSON body, signature), the results, the errors with their modeled
fields, the retries and the events must be the same.
"""

from __future__ import annotations

import ast
import datetime
import json
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.parsers import ResponseParserError
from urllib3 import HTTPHeaderDict

from nimbus_core.adapters import clients
from nimbus_core.adapters.dynamodb_wire import DynamoDBWire
from tests.integration.conftest import REGION, Stack

FROZEN = datetime.datetime(2026, 11, 23, 22, 30, 15)  # naive UTC, as botocore's clock
SUMMARY = {"S": "ünïcödé ✓ \u2028 \U0001f600", "N": "12.50"}
EVERY_TYPE = {
    "s": {"S": "plain"},
    "n": {"N": "-3"},
    "b": {"B": b"\x00\xffbinary"},
    "bs": {"BS": [b"one", b"\x01two"]},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bool": {"BOOL": True},
    "null": {"NULL": True},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"B": b"y"}]},
    "m": {"M": {"B": {"S": "an attribute named B"}, "inner": {"M": {"deep": {"B": b"z"}}}}},
    "u": SUMMARY,
}


def _create_table(stack: Stack) -> str:
    name = f"wire-{uuid.uuid4().hex[:12]}"
    stack.dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture
def table(stack: Stack) -> Iterator[str]:
    """A table of its own (pk, sk), on the session's moto."""
    name = _create_table(stack)
    yield name
    stack.dynamodb.delete_table(TableName=name)


@pytest.fixture
def twin_tables(stack: Stack) -> Iterator[tuple[str, str]]:
    """Two such tables: one for each client, so that each sees the same writes once."""
    names = (_create_table(stack), _create_table(stack))
    yield names
    for name in names:
        stack.dynamodb.delete_table(TableName=name)


@pytest.fixture
def pair(stack: Stack) -> tuple[Any, DynamoDBWire]:
    """botocore's client and the wire, both as the functions configure them."""
    clients.reset()
    return _botocore_client(), _wire()


def _botocore_client() -> Any:
    return clients._session().create_client("dynamodb", config=clients._CONFIG)


def _wire() -> DynamoDBWire:
    wire: object = clients.dynamodb()  # typed as botocore's client for the adapters
    assert isinstance(wire, DynamoDBWire)
    return wire


def _key(pk: str, sk: str = "0") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _calls(table: str) -> list[tuple[str, dict[str, Any]]]:
    """One call of every operation the wire speaks, with every kind of attribute value."""
    return [
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": table, "Item": {**_key("a"), **EVERY_TYPE}}},
                    {"Put": {"TableName": table, "Item": {**_key("a", "1"), "u": SUMMARY}}},
                ],
                "ClientRequestToken": "fixed-token-for-comparison",
            },
        ),
        ("get_item", {"TableName": table, "Key": _key("a"), "ConsistentRead": True}),
        (
            "query",
            {
                "TableName": table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": "a"}},
                "Limit": 1,
            },
        ),
        (
            "update_item",
            {
                "TableName": table,
                "Key": _key("a", "1"),
                "UpdateExpression": "SET #c = :c ADD #n :one",
                "ExpressionAttributeNames": {"#c": "blob", "#n": "count"},
                "ExpressionAttributeValues": {":c": {"B": b"\x10\x20"}, ":one": {"N": "1"}},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "batch_write_item",
            {"RequestItems": {table: [{"PutRequest": {"Item": {**_key("b"), "bs": {"BS": [b"q"]}}}}]}},
        ),
        ("batch_get_item", {"RequestItems": {table: {"Keys": [_key("a"), _key("b"), _key("none")]}}}),
        ("delete_item", {"TableName": table, "Key": _key("b"), "ReturnValues": "ALL_OLD"}),
    ]


def _without_metadata(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "ResponseMetadata"}


def _comparable(result: dict[str, Any], table: str) -> dict[str, Any]:
    """``result`` without its metadata, batch answers keyed "table" and sorted (they come in no order)."""
    result = json.loads(json.dumps(_without_metadata(result), default=repr).replace(table, "table"))
    if "Responses" in result:
        result["Responses"] = {t: sorted(items, key=repr) for t, items in result["Responses"].items()}
    return result


def test_every_operation_answers_as_botocore_answers(
    pair: tuple[Any, DynamoDBWire], twin_tables: tuple[str, str]
) -> None:
    botocore_client, wire = pair
    theirs, ours = twin_tables
    for (method, expected_params), (_, params) in zip(_calls(theirs), _calls(ours), strict=True):
        expected = getattr(botocore_client, method)(**expected_params)
        got = getattr(wire, method)(**params)
        assert _comparable(got, ours) == _comparable(expected, theirs), method
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert got["ResponseMetadata"]["RetryAttempts"] == 0
        assert (
            got["ResponseMetadata"]["RequestId"] == got["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"]
        )
    item = wire.get_item(TableName=ours, Key=_key("a"))["Item"]
    assert item["b"] == {"B": b"\x00\xffbinary"}
    assert item["m"]["M"]["B"] == {"S": "an attribute named B"}


def _captured(client: Any) -> list[Any]:
    sent: list[Any] = []

    def capture(request: Any, **_: Any) -> None:
        sent.append(request)  # and on to moto

    client.meta.events.register_first("before-send", capture)
    return sent


def test_the_wire_sends_botocores_request_signed_as_botocore_signs_it(
    stack: Stack, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *_, **__: FROZEN)
    monkeypatch.setattr("nimbus_core.adapters.dynamodb_wire.get_current_datetime", lambda *_, **__: FROZEN)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "temporary-token")  # temporary credentials, as on Lambda
    clients.reset()
    botocore_client, wire = _botocore_client(), _wire()
    theirs, ours = _captured(botocore_client), _captured(wire)
    for method, params in _calls(table):
        getattr(botocore_client, method)(**params)
        getattr(wire, method)(**params)
    assert len(theirs) == len(ours) == len(_calls(table))
    for expected, got in zip(theirs, ours, strict=True):
        assert (got.method, got.url) == (expected.method, expected.url)
        assert json.loads(got.body) == json.loads(expected.body)
        # After signing, botocore's request-created handlers add telemetry the wire leaves out: its
        # invocation-id and attempt headers, and Powertools' suffix to the User-Agent.
        expected_headers = {
            k: v.decode() if isinstance(v, bytes) else v
            for k, v in expected.headers.items()
            if not k.lower().startswith("amz-sdk-")
        }
        assert expected_headers["User-Agent"].startswith(got.headers["User-Agent"])
        expected_headers["User-Agent"] = got.headers["User-Agent"]
        # Our JSON is compact (no spaces after separators): same document, fewer bytes.
        assert got.headers["Content-Length"] == str(len(got.body))
        own = {"Authorization": got.headers["Authorization"], "Content-Length": got.headers["Content-Length"]}
        assert dict(got.headers.items()) == {**expected_headers, **own}
        # The signature is botocore's over our exact bytes (botocore's body may order keys otherwise).
        # (as botocore signs: before AWSRequest.prepare() adds Content-Length)
        unsigned = {k: v for k, v in expected_headers.items() if k not in {"Authorization", "Content-Length"}}
        resigned = AWSRequest(method="POST", url=got.url, data=got.body, headers=unsigned)
        session_credentials = clients._session().get_credentials()
        assert session_credentials is not None
        credentials = session_credentials.get_frozen_credentials()
        SigV4Auth(credentials, "dynamodb", REGION).add_auth(resigned)
        assert got.headers["Authorization"] == resigned.headers["Authorization"]
        assert got.headers["X-Amz-Security-Token"] == "temporary-token"


def test_errors_are_botocores_exceptions_with_their_modeled_fields(
    pair: tuple[Any, DynamoDBWire], table: str
) -> None:
    botocore_client, wire = pair
    wire.transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": {**_key("x"), "v": {"N": "1"}}}}]
    )
    failing: list[tuple[str, dict[str, Any]]] = [
        (
            "update_item",
            {
                "TableName": table,
                "Key": _key("x"),
                "UpdateExpression": "SET v = :v",
                "ConditionExpression": "attribute_not_exists(pk)",
                "ExpressionAttributeValues": {":v": {"N": "2"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "Put": {
                            "TableName": table,
                            "Item": _key("x"),
                            "ConditionExpression": "attribute_not_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {"Put": {"TableName": table, "Item": _key("y")}},
                ]
            },
        ),
        ("get_item", {"TableName": "no-such-table", "Key": _key("x")}),
        ("query", {"TableName": table, "KeyConditionExpression": "nonsense ==="}),
    ]
    for method, params in failing:
        with pytest.raises(ClientError) as expected:
            getattr(botocore_client, method)(**params)
        with pytest.raises(ClientError) as got:
            getattr(wire, method)(**params)
        assert type(got.value) is type(expected.value), method
        theirs, ours = dict(expected.value.response), dict(got.value.response)
        assert _without_metadata(ours) == _without_metadata(theirs), method
    assert wire.get_item(TableName=table, Key=_key("y")).get("Item") is None  # the transaction wrote nothing


def _answer(status: int, body: dict[str, Any] | bytes, **headers: str) -> AWSResponse:
    class Raw:
        def __init__(self, data: bytes) -> None:
            self._data = data

        def stream(self, **_: Any) -> Iterator[bytes]:
            yield self._data

    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    all_headers = HTTPHeaderDict(
        {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "r", **headers}
    )
    return AWSResponse("https://dynamodb", status, all_headers, Raw(data))  # type: ignore[arg-type]


def _answering(client: Any, answers: list[Callable[[], AWSResponse | None]]) -> list[int]:
    """Answer the next HTTP attempts from ``answers`` (None: on to moto); count the attempts."""
    attempts: list[int] = []

    def answer(**_: Any) -> AWSResponse | None:
        attempts.append(1)
        return answers.pop(0)() if answers else None

    client.meta.events.register_first("before-send", answer)
    return attempts


THROTTLED = {
    "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
    "message": "slow",
}
INTERNAL = {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "oops"}


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays recorded instead of slept."""
    delays: list[float] = []
    monkeypatch.setattr(time, "sleep", delays.append)
    return delays


def test_server_errors_are_retried_as_botocore_retries_them(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    for client in pair:
        attempts = _answering(client, [lambda: _answer(500, INTERNAL), lambda: _answer(500, INTERNAL)])
        result = client.get_item(TableName=table, Key=_key("none"))
        assert len(attempts) == 3
        assert result["ResponseMetadata"]["RetryAttempts"] == 2
    assert len(no_sleep) == 4
    assert all(0 <= d <= 0.1 for d in no_sleep)


def test_throttling_is_retried_up_to_the_configured_attempts_then_raised(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    codes = []
    for client in pair:
        attempts = _answering(client, [lambda: _answer(400, THROTTLED)] * 5)
        with pytest.raises(ClientError) as raised:
            client.get_item(TableName=table, Key=_key("none"))
        assert len(attempts) == 3  # total_max_attempts
        codes.append(
            (
                raised.value.response["Error"]["Code"],
                raised.value.response["ResponseMetadata"]["RetryAttempts"],
            )
        )
    assert codes == [("ProvisionedThroughputExceededException", 2)] * 2


def test_a_connection_failure_is_retried_then_raised_as_botocore_raises_it(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    def refuse() -> AWSResponse:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com/")

    for client in pair:
        attempts = _answering(client, [refuse] * 5)
        with pytest.raises(EndpointConnectionError):
            client.get_item(TableName=table, Key=_key("none"))
        assert len(attempts) == 3


def test_a_body_that_fails_its_crc32_is_fetched_again(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    body = {"Item": {"pk": {"S": "forged"}}}
    wrong = str((zlib.crc32(json.dumps(body).encode()) + 1) & 0xFFFFFFFF)
    _botocore_client, wire = pair
    attempts = _answering(wire, [lambda: _answer(200, body, **{"x-amz-crc32": wrong})])
    result = wire.get_item(TableName=table, Key=_key("none"))
    assert len(attempts) == 2
    assert "Item" not in result  # moto's answer, not the corrupted one


def test_a_damaged_body_that_is_not_json_is_fetched_again_when_its_crc32_says_so(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    damaged = b'{"Item": {"pk": {"S": "cut'
    wrong = str((zlib.crc32(damaged) + 1) & 0xFFFFFFFF)
    _botocore_client, wire = pair
    attempts = _answering(wire, [lambda: _answer(200, damaged, **{"x-amz-crc32": wrong})])
    assert "Item" not in wire.get_item(TableName=table, Key=_key("none"))
    assert len(attempts) == 2


def test_a_success_status_with_a_body_that_is_not_json_is_an_error_not_empty_data(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    # botocore would hand back {"message": "<html>..."}: to an adapter, an item that does not exist.
    _botocore_client, wire = pair
    attempts = _answering(wire, [lambda: _answer(200, b"<html>proxy login</html>")])
    with pytest.raises(ResponseParserError):
        wire.get_item(TableName=table, Key=_key("none"))
    assert len(attempts) == 1


def test_a_transaction_gets_one_idempotency_token_kept_across_its_retries(
    pair: tuple[Any, DynamoDBWire], table: str, no_sleep: list[float]
) -> None:
    _botocore_client, wire = pair
    sent = _captured(wire)
    _answering(wire, [lambda: _answer(500, INTERNAL)])
    wire.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": _key("t")}}])
    tokens = {json.loads(request.body)["ClientRequestToken"] for request in sent}
    assert len(sent) == 2
    assert len(tokens) == 1
    assert uuid.UUID(tokens.pop())


def test_the_wire_emits_botocores_events_for_every_call(pair: tuple[Any, DynamoDBWire], table: str) -> None:
    _botocore_client, wire = pair
    seen: list[str] = []
    for event in (
        "provide-client-params",
        "before-parameter-build",
        "before-call",
        "before-send",
        "after-call",
    ):
        wire.meta.events.register(
            f"{event}.dynamodb.GetItem", lambda event_name, **_: seen.append(event_name)
        )
    wire.get_item(TableName=table, Key=_key("none"))
    assert [name.split(".")[0] for name in seen] == [
        "provide-client-params",
        "before-parameter-build",
        "before-call",
        "before-send",
        "after-call",
    ]


def test_a_before_call_answer_stands_in_for_the_request_as_in_botocore(
    pair: tuple[Any, DynamoDBWire], table: str
) -> None:
    _botocore_client, wire = pair
    sent = _captured(wire)
    parsed = {"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}, "ResponseMetadata": {}}
    http = _answer(400, {})
    wire.meta.events.register_first("before-call.dynamodb.GetItem", lambda **_: (http, parsed))
    with pytest.raises(ClientError) as raised:
        wire.get_item(TableName=table, Key=_key("none"))
    assert type(raised.value).__name__ == "ResourceNotFoundException"
    assert not sent


def test_the_wire_reaches_the_endpoint_botocore_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    cases: list[tuple[str, dict[str, str]]] = [
        ("us-east-1", {}),
        ("eu-west-1", {}),
        ("cn-north-1", {}),
        ("us-gov-west-1", {}),
        ("us-east-1", {"AWS_USE_FIPS_ENDPOINT": "true"}),
        ("us-east-1", {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}),
        ("us-east-1", {"AWS_ENDPOINT_URL_DYNAMODB": "https://ddb.example:8443/base"}),
    ]
    for region, env in cases:
        with monkeypatch.context() as patch:
            patch.setenv("AWS_DEFAULT_REGION", region)
            patch.setenv("AWS_REGION", region)
            for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_USE_FIPS_ENDPOINT"):
                patch.delenv(name, raising=False)
            for name, value in env.items():
                patch.setenv(name, value)
            clients.reset()
            urls: list[str] = []

            def reached(request: Any, **_: Any) -> AWSResponse:
                urls.append(request.url)  # noqa: B023 - called within this iteration only
                return _answer(200, {})

            for client in (_botocore_client(), _wire()):
                client.meta.events.register_first("before-send", reached)
                client.get_item(TableName="users", Key=_key("a"))
            assert urls[0] == urls[1], (region, env)
    clients.reset()


def _dynamodb_methods_the_adapters_call() -> set[str]:
    adapters = Path(clients.__file__).parent
    called = set()
    for source in adapters.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if name in {"_client", "client", "dynamodb"}:
                    called.add(node.func.attr)
    botocore_methods = set(dir(_botocore_client()))
    return called & botocore_methods


def test_the_wire_has_every_dynamodb_method_the_adapters_call(stack: Stack) -> None:
    methods = _dynamodb_methods_the_adapters_call()
    assert {"get_item", "query", "transact_write_items"} <= methods  # the scan finds the calls
    assert all(callable(getattr(DynamoDBWire, m, None)) for m in methods), methods
