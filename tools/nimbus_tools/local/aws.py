"""The AWS emulator: moto's server app, in process, behind our own WSGI middleware.

The middleware adds what the local API needs on top of moto:

* one lock around every AWS request, because moto's backends are not safe under concurrent
  threads while DynamoDB guarantees atomic conditional writes and transactions;
* capture of every accepted SES v2 SendEmail (``GET``/``DELETE /_nimbus/mail``): moto's own record
  of sent mail (its SES backend's ``sent_messages``) keeps one body, the HTML one when there are two,
  and the text body is what people and tests read the verification link from;
* fault injection for tests (``POST``/``GET``/``DELETE /_nimbus/faults``, see ``faults.py``);
* trimming of DynamoDB streams (``POST /_nimbus/streams/trim``, for the stream poller);
* a bounded memory: moto records every model object it ever creates for its dashboard (which the
  local API does not serve), its TransactWriteItems rollback copies of whole tables included, so a
  long ``make serve`` grew without end (``make soak`` measured it); that record is emptied every
  :data:`FORGET_EVERY` requests with moto's own ``reset_model_data``, which touches no backend state.

moto's ``ThreadedMotoServer`` is not used: it builds its app inside its serving thread, so the
middleware could only be put in front afterwards (moto serving unlocked meanwhile) through its
private ``_server``, and its ``stop()`` leaves the port bound. :class:`AwsEmulator` serves moto's
own app and request handler with werkzeug's threaded server, as it does.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.model_instances import reset_model_data
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Response
from werkzeug.wsgi import get_input_stream

from nimbus_core.platform import clock
from nimbus_tools.local.faults import FaultRegistry, FaultSpecError, fault_response
from nimbus_tools.local.operations import AwsOperation, identify_operation

SES_SEND_EMAIL = AwsOperation("ses", "SendEmail", "rest-json")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
StartResponse = Callable[..., Any]

CONTROL_PREFIX = "/_nimbus/"
# How many AWS requests between two emptyings of moto's record of model objects.
FORGET_EVERY = 50
# moto keeps every shard iterator it hands out; AWS expires them after 15 minutes.
KEPT_SHARD_ITERATORS = 1000


class EmulatorMiddleware:
    """WSGI middleware in front of moto: serialises requests, captures mail, injects faults."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.faults = FaultRegistry()
        self.mail: list[dict[str, Any]] = []  # the GET /_nimbus/mail entries, oldest first
        self._aws_lock = threading.Lock()  # also guards self.mail and self._served
        self._served = 0  # AWS requests forwarded since moto's model record was last emptied

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """Serve one request: a control endpoint, an injected fault, or moto."""
        # werkzeug reads a Content-Length body, or a chunked one up to its end.
        body = get_input_stream(environ).read()
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(CONTROL_PREFIX):
            return self._control(environ, path, body, start_response)

        operation = identify_operation(environ)
        if operation is not None:
            fault = self.faults.take(operation)
            if fault is not None:
                status, headers, payload = fault_response(fault, operation)
                return Response(payload, status, headers)(environ, start_response)
        return self._forward(environ, body, operation, start_response)

    # --- moto

    def _forward(
        self,
        environ: dict[str, Any],
        body: bytes,
        operation: AwsOperation | None,
        start_response: StartResponse,
    ) -> Iterable[bytes]:
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        statuses: list[str] = []

        def recording_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            statuses.append(status)
            return start_response(status, headers, exc_info)

        # The whole moto call, including reading its response, happens under the one lock.
        with self._aws_lock:
            result = self.app(environ, recording_start_response)
            try:
                chunks = list(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            # Only accepted messages are kept: a message SES refused was never delivered either.
            if operation == SES_SEND_EMAIL and statuses and statuses[-1][:1] == "2":
                self.mail.append(_sent_email(body, b"".join(chunks)))
            self._served += 1
            if self._served >= FORGET_EVERY:
                reset_model_data()
                self._served = 0
        return chunks

    # --- control endpoints

    def _control(
        self, environ: dict[str, Any], path: str, body: bytes, start_response: StartResponse
    ) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        resource = path[len(CONTROL_PREFIX) :].rstrip("/")
        handlers: dict[tuple[str, str], Callable[[], tuple[int, Any]]] = {
            ("mail", "GET"): lambda: (200, self._locked(lambda: list(self.mail))),
            ("mail", "DELETE"): self._clear_mail,
            ("faults", "GET"): lambda: (200, [f.as_json() for f in self.faults.active()]),
            ("faults", "DELETE"): self._clear_faults,
            ("faults", "POST"): lambda: self._add_fault(body),
            ("streams/trim", "POST"): lambda: self._trim_stream(body),
        }
        handler = handlers.get((resource, method))
        if handler is not None:
            return _json(environ, start_response, *handler())
        if resource in ("mail", "faults", "streams/trim"):
            return _json(environ, start_response, 405, {"message": f"{method} not allowed on {path}"})
        return _json(environ, start_response, 404, {"message": f"unknown control endpoint {path}"})

    def _locked(self, action: Callable[[], Any]) -> Any:
        with self._aws_lock:
            return action()

    def _clear_mail(self) -> tuple[int, Any]:
        self._locked(self.mail.clear)
        return 200, {"cleared": True}

    def _clear_faults(self) -> tuple[int, Any]:
        self.faults.clear()
        return 200, {"cleared": True}

    def _add_fault(self, body: bytes) -> tuple[int, Any]:
        try:
            spec = json.loads(body or b"null")
        except ValueError:
            return 400, {"message": "body is not JSON"}
        try:
            return 201, self.faults.add(spec).as_json()
        except FaultSpecError as error:
            return 400, {"message": str(error)}

    def _trim_stream(self, body: bytes) -> tuple[int, Any]:
        try:
            request = json.loads(body or b"null")
            arn, before = str(request["streamArn"]), int(request["before"])
        except (ValueError, TypeError, KeyError):
            return 400, {"message": 'expected {"streamArn": "...", "before": "<sequence number>"}'}
        from moto.core.exceptions import JsonRESTError  # imported late, as moto's server stack is

        with self._aws_lock:  # moto's backends are changed here as by any request
            try:
                return 200, {"trimmed": trim_stream(arn, before)}
            except (JsonRESTError, ValueError, KeyError) as error:
                return 404, {"message": f"no stream {arn}: {error}"}


def trim_stream(stream_arn: str, before: int) -> int:
    """Drop the records of ``stream_arn`` below sequence number ``before`` from moto's memory, as
    DynamoDB trims a stream, and the shard iterators no longer usable; returns how many records.

    Sequence numbers stay right: moto numbers a new record ``len(items) + starting_sequence_number``
    and finds sequence number n at ``items[n - starting_sequence_number]``, so the start moves up by
    what is dropped. Reading below the new start is refused (moto asserts), as DynamoDB refuses a
    trimmed position: readers keep their last record (see ``streams.StreamPoller``).
    """
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    # arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
    _, _, _, region, account, resource = stream_arn.split(":", 5)
    shard = dynamodb_backends[account][region].get_table(resource.split("/")[1]).stream_shard
    if shard is None:
        return 0
    count = max(0, min(before - shard.starting_sequence_number, len(shard.items)))
    del shard.items[:count]
    shard.starting_sequence_number += count
    iterators = dynamodbstreams_backends[account][region].shard_iterators
    stale = [
        key
        for key, it in iterators.items()
        if it.stream_shard is shard and it.sequence_number < shard.starting_sequence_number
    ]
    stale += list(iterators)[: max(0, len(iterators) - KEPT_SHARD_ITERATORS)]  # the oldest
    for key in stale:
        iterators.pop(key, None)
    return count


def _sent_email(request: bytes, response: bytes) -> dict[str, Any]:
    """The ``GET /_nimbus/mail`` entry of a SendEmail SES v2 accepted (its Simple content)."""
    sent, answer = json.loads(request), json.loads(response)
    simple = (sent.get("Content") or {}).get("Simple") or {}
    body = simple.get("Body") or {}
    return {
        "id": str(answer.get("MessageId") or uuid.uuid4()),
        "timestamp": clock.iso(clock.now()),
        "from": str(sent.get("FromEmailAddress", "")),
        "to": [str(address) for address in (sent.get("Destination") or {}).get("ToAddresses") or []],
        "subject": str((simple.get("Subject") or {}).get("Data", "")),
        "text": str((body.get("Text") or {}).get("Data", "")),
        "html": str((body.get("Html") or {}).get("Data", "")),
    }


def _json(
    environ: dict[str, Any], start_response: StartResponse, status: int, payload: Any
) -> Iterable[bytes]:
    response = Response(json.dumps(payload), status, mimetype="application/json")
    return response(environ, start_response)


class AwsEmulator:
    """moto's server app plus :class:`EmulatorMiddleware`, served by werkzeug on a thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint URL for AWS SDKs (``AWS_ENDPOINT_URL``)."""
        if self._server is None:
            raise RuntimeError("the AWS emulator is not running")
        return f"http://{self.host}:{self._server.server_port}"

    def start(self) -> str:
        """Bind (port 0 picks a free port), start serving on a daemon thread, return the URL."""
        # Imported here: moto's server stack takes a second or two to import.
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        class QuietRequestHandler(MotoRequestHandler):
            """moto's handler without a console line per AWS call (errors are still logged)."""

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                return None

        middleware = EmulatorMiddleware(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            self.host, self.port, middleware, threaded=True, request_handler=QuietRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws-emulator", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None
