"""DynamoDB calls on botocore's own parts, without its generic per-call pipeline.

DynamoDB speaks plain JSON over one POST: the request is the parameters our adapters already build
in DynamoDB's wire format, the answer is JSON in the same format. Botocore's generic pipeline walks
the service model to serialise and parse that JSON, resolves the endpoint rule set, chooses a signer
and emits about a dozen events per call: about 0.6 ms of CPU per call on a warm function, three
quarters of a warm login's work besides argon2 (see the README's performance budgets).

This client keeps every part of botocore that carries a rule and replaces only that generic walk:

- the botocore client it wraps supplies the service model, the endpoint (``meta.endpoint_url``, as
  resolved when the client was made: ``AWS_ENDPOINT_URL`` locally, the regional endpoint on
  Lambda), the configuration, the HTTP session (its connection pool, timeouts and TLS settings) and
  the event emitter, with the retry handler the configuration registered on it;
- requests are signed with the session's credentials by ``sigv4.PostSigner``, botocore's SigV4
  signature made for this one kind of request (tests compare it with botocore's ``SigV4Auth``);
- errors are parsed by botocore's JSON parser, modeled fields included, and raised as the client's
  own exception classes (``ClientError`` subclasses);
- these events are emitted with the arguments botocore gives them, so its handlers and everything
  that hooks a client keeps working: ``provide-client-params``, ``before-parameter-build`` (the
  idempotency token of TransactWriteItems), ``before-call`` (the X-Ray trace header; the tests'
  fault injection), ``before-send`` (moto's ``mock_aws``), ``needs-retry`` (botocore's standard
  retry policy, quota and backoff) and ``after-call`` / ``after-call-error``.

What it does not do: endpoint rules per call (DynamoDB's per-call rules only matter for table ARNs
and account-based endpoints; our tables are named), request compression and checksums (DynamoDB
has neither), parameter validation (off for every client, see ``clients``), and the telemetry that
``request-created`` handlers add after signing (botocore's ``amz-sdk-*`` headers, Powertools'
``PT/`` User-Agent suffix). Success bodies are decoded with ``json``, binary attributes (``B``,
``BS``) becoming bytes as botocore makes them; a success status with a body that is not JSON is a
``ResponseParserError`` (botocore would return ``{"message": body}`` as the operation's data).

On Lambda, botocore is the runtime's, not the lock file's: every part used here has been in botocore
for years, and ``client._endpoint.http_session`` is the one private attribute (no public handle
reaches the HTTP session). ``tests/integration/test_dynamodb_wire.py`` holds all of it to botocore's
own client.
"""

from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any, cast

from botocore.awsrequest import AWSPreparedRequest, HeadersDict, prepare_request_dict
from botocore.compat import get_current_datetime
from botocore.exceptions import NoCredentialsError
from botocore.hooks import first_non_none_response
from botocore.parsers import ResponseParserError, create_parser

from nimbus_core.adapters.sigv4 import PostSigner

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.credentials import Credentials
    from botocore.exceptions import ClientError
    from botocore.hooks import HierarchicalEmitter
    from botocore.model import OperationModel

_SERVICE = "dynamodb"  # the events' and the signature's service name


def _encode_blob(value: object) -> str:
    # DynamoDB's JSON carries binary attribute values (B, BS) in base64, as botocore sends them.
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB wire value")


def _decode_blobs(obj: dict[str, Any]) -> dict[str, Any]:
    # Only an attribute value has exactly one key "B" with a string (or "BS" with a list): item maps
    # hold attribute values (dicts), never strings, so an attribute named "B" cannot be mistaken.
    if len(obj) == 1:
        if isinstance(blob := obj.get("B"), str):
            return {"B": base64.b64decode(blob)}
        if isinstance(blobs := obj.get("BS"), list):
            return {"BS": [base64.b64decode(b) for b in blobs]}
    return obj


# One decoder for every answer: json.loads with an object_hook builds a new one per call.
_DECODER = json.JSONDecoder(object_hook=_decode_blobs)


class _BodyNotJsonError(Exception):
    """A success status with a body that is not JSON (botocore would return it as ``{"message": ...}``
    data; we raise ``ResponseParserError`` once the retry policy has had its say)."""

    def __init__(self, http: Any) -> None:
        super().__init__(f"DynamoDB answered {http.status_code} with a body that is not JSON")
        self.http = http


class DynamoDBWire:
    """The DynamoDB operations the functions call, with the botocore client's signature and results.

    Each method takes the keyword arguments of the botocore method of the same name and returns what
    it returns (``ResponseMetadata`` included), or raises the same ``ClientError``/``BotoCoreError``.
    """

    def __init__(self, client: BaseClient, credentials: Credentials | None) -> None:
        """Call DynamoDB as ``client`` would, signing with ``credentials`` (its session's)."""
        self._client = client
        self._credentials = credentials
        meta = client.meta
        self._events = cast("HierarchicalEmitter", meta.events)  # an emitter: the stubs type only its base
        self._service_model = meta.service_model
        self._region = meta.region_name
        self._config = meta.config
        self._target = f"{self._service_model.metadata['targetPrefix']}."
        # The URL and headers of every request, as botocore's prepare_request_dict makes them.
        shape: dict[str, Any] = {"url_path": "/", "query_string": "", "headers": {}}
        prepare_request_dict(shape, meta.endpoint_url, user_agent=getattr(self._config, "user_agent", None))
        self._url: str = shape["url"]
        self._signer = PostSigner(self._url, self._service_model.signing_name or _SERVICE, self._region)
        self._user_agent = shape["headers"].get("User-Agent")
        # The HTTP session botocore itself would send with: its pool, timeouts, proxies and TLS.
        self._http = cast("Any", client)._endpoint.http_session  # no public handle
        self._json = create_parser("json")

    @property
    def meta(self) -> Any:
        """The wrapped client's ``meta``: its events, service model, region, endpoint and config."""
        return self._client.meta

    @property
    def exceptions(self) -> Any:
        """The wrapped client's modeled exception classes."""
        return self._client.exceptions

    def get_item(self, **params: Any) -> dict[str, Any]:
        """GetItem."""
        return self._call("GetItem", params)

    def query(self, **params: Any) -> dict[str, Any]:
        """Query."""
        return self._call("Query", params)

    def update_item(self, **params: Any) -> dict[str, Any]:
        """UpdateItem."""
        return self._call("UpdateItem", params)

    def delete_item(self, **params: Any) -> dict[str, Any]:
        """DeleteItem."""
        return self._call("DeleteItem", params)

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        """BatchGetItem."""
        return self._call("BatchGetItem", params)

    def batch_write_item(self, **params: Any) -> dict[str, Any]:
        """BatchWriteItem."""
        return self._call("BatchWriteItem", params)

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        """TransactWriteItems."""
        return self._call("TransactWriteItems", params)

    def _call(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """botocore's ``BaseClient._make_api_call`` for one JSON operation (same events, same errors)."""
        model = self._service_model.operation_model(name)  # cached by botocore, per name
        emit = self._events.emit
        context: dict[str, Any] = {"client_region": self._region, "client_config": self._config}
        params = first_non_none_response(
            emit(f"provide-client-params.{_SERVICE}.{name}", params=params, model=model, context=context),
            default=params,
        )
        emit(f"before-parameter-build.{_SERVICE}.{name}", params=params, model=model, context=context)
        headers = {"X-Amz-Target": self._target + name, "Content-Type": "application/x-amz-json-1.0"}
        if self._user_agent is not None:
            headers["User-Agent"] = self._user_agent
        request_dict: dict[str, Any] = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": headers,
            "body": json.dumps(params, separators=(",", ":"), default=_encode_blob).encode(),
            "url": self._url,
            "context": context,
        }
        _handler, answered = self._events.emit_until_response(
            f"before-call.{_SERVICE}.{name}",
            model=model,
            params=request_dict,
            request_signer=None,
            context=context,
        )
        if answered is not None:
            http, parsed = answered
        else:
            try:
                http, parsed = self._send_with_retries(model, request_dict)
            except Exception as exc:
                emit(f"after-call-error.{_SERVICE}.{name}", exception=exc, context=context)
                raise
        emit(f"after-call.{_SERVICE}.{name}", http_response=http, parsed=parsed, model=model, context=context)
        if http.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            error: type[ClientError] = self.exceptions.from_code(code)
            raise error(parsed, name)
        return parsed  # type: ignore[no-any-return]

    def _send_with_retries(
        self, model: OperationModel, request_dict: dict[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        """botocore's ``Endpoint._send_request``: attempts until ``needs-retry`` says no more."""
        attempts = 1
        while True:
            response: tuple[Any, dict[str, Any]] | None = None
            caught: Exception | None = None
            try:
                response = self._attempt(model, request_dict)
            except _BodyNotJsonError as exc:
                # Its CRC32 may say the body was damaged on the way: the retry policy looks at it.
                response, caught = (exc.http, {}), ResponseParserError(str(exc))
            except Exception as exc:  # each one goes to botocore's retry policy
                caught = exc
            delay = first_non_none_response(
                self._events.emit(
                    f"needs-retry.{_SERVICE}.{model.name}",
                    response=response,
                    endpoint=None,
                    operation=model,
                    attempts=attempts,
                    caught_exception=caught,
                    request_dict=request_dict,
                )
            )
            if delay is None or delay is False:
                break
            time.sleep(delay)
            attempts += 1
        if caught is not None:
            raise caught
        assert response is not None  # noqa: S101 - one of the two is always set
        response[1].setdefault("ResponseMetadata", {})["RetryAttempts"] = attempts - 1
        return response

    def _attempt(self, model: OperationModel, request_dict: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """One signed HTTP attempt (a new signature each time, as botocore makes) and its parse."""
        if self._credentials is None:
            raise NoCredentialsError
        headers = dict(request_dict["headers"])
        body: bytes = request_dict["body"]
        self._signer.sign(headers, body, self._credentials.get_frozen_credentials(), get_current_datetime())
        headers["Content-Length"] = str(len(body))
        # What AWSRequest.prepare() would make of it, without the e-mail header map it builds first.
        url = request_dict["url"]
        prepared = AWSPreparedRequest(
            "POST", url, cast("Any", HeadersDict(headers)), body, stream_output=False
        )
        sent = self._events.emit(f"before-send.{_SERVICE}.{model.name}", request=prepared)
        http = first_non_none_response(sent)
        if http is None:
            http = self._http.send(prepared)
        return http, self._parse(model, http)

    def _parse(self, model: OperationModel, http: Any) -> dict[str, Any]:
        headers = http.headers
        body: bytes = http.content
        if http.status_code >= 300:
            return self._parse_error(model, http)
        try:
            parsed: dict[str, Any] = _DECODER.decode(body.decode()) if body else {}
        except ValueError as exc:  # UnicodeDecodeError too
            raise _BodyNotJsonError(http) from exc
        parsed["ResponseMetadata"] = {
            "RequestId": headers.get("x-amzn-requestid", ""),
            "HTTPStatusCode": http.status_code,
            "HTTPHeaders": {k.lower(): v for k, v in headers.items()},
        }
        return parsed

    def _parse_error(self, model: OperationModel, http: Any) -> dict[str, Any]:
        """botocore's own parse of an error answer, with the error shape's modeled fields."""
        response = {"status_code": http.status_code, "headers": http.headers, "body": http.content}
        parsed: dict[str, Any] = self._json.parse(response, cast("Any", model.output_shape))
        code = parsed.get("Error", {}).get("Code")
        shape = self._service_model.shape_for_error_code(code) if code else None
        if shape is not None:
            parsed.update(self._json.parse(response, shape))
        return parsed
