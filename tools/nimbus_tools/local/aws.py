"""The AWS emulator: moto's server app in process behind a WSGI middleware: one lock (moto's backends
are not thread-safe), mail capture, faults, stream trimming, bounded memory, DynamoDB at real table
sizes (docs/decisions/2026-11-26-local-aws-emulator.md)."""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from werkzeug.wrappers import Response
from werkzeug.wsgi import get_input_stream

from nimbus_core.platform import clock
from nimbus_tools.local.faults import (
    AwsOperation,
    FaultRegistry,
    FaultSpecError,
    fault_response,
    identify_operation,
)
from nimbus_tools.local.waitress_serving import WaitressServing
from nimbus_tools.moto_internals import WsgiApp, forget_model_instances, server_app, trim_stream

SES_SEND_EMAIL = AwsOperation("ses", "SendEmail", "rest-json")

StartResponse = Callable[..., Any]

CONTROL_PREFIX = "/_nimbus/"
# How many AWS requests between two emptyings of moto's record of model objects.
FORGET_EVERY = 50
# moto keeps every shard iterator it hands out; AWS expires them after 15 minutes.
KEPT_SHARD_ITERATORS = 1000


# The DynamoDB operations that write items, and so may add stream records.
ITEM_WRITES = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    }
)


# Threads answering AWS calls (moto itself answers one at a time, under the middleware's lock).
EMULATOR_THREADS = 8


class TableWrites:
    """Counts of the item writes the emulator served, per table, that stream pollers wait on: an
    idle stream's reads would otherwise be requests into moto several times a second per
    stream-fed function, for as long as the local API runs, and a write would wait for the next
    of them. A poller waits for its own table's writes only: the sessions and counters a sign-in
    writes wake no reader of the users or outbox stream."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._per_table: dict[str, int] = {}
        self._to_all = 0  # writes whose tables were not told apart, and wake-ups for everyone

    def seen(self, table: str | None = None) -> int:
        """How many writes to ``table`` (None: to any table) were served so far, to wait for the
        next with :meth:`wait`."""
        with self._changed:
            return self._count(table)

    def notify(self, tables: Iterable[str] | None = None) -> None:
        """A write to ``tables`` was served; None: to tables not told apart, or a waiter must
        wake up (the poller is stopping)."""
        with self._changed:
            if tables is None:
                self._to_all += 1
            else:
                for table in tables:
                    self._per_table[table] = self._per_table.get(table, 0) + 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout: float, table: str | None = None) -> None:
        """Return once a write to ``table`` (None: to any) after the ``seen``-th was served, or
        after ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self._count(table) != seen, timeout)

    def _count(self, table: str | None) -> int:
        counted = sum(self._per_table.values()) if table is None else self._per_table.get(table, 0)
        return counted + self._to_all


def written_tables(operation: str, body: bytes) -> list[str] | None:
    """The tables a DynamoDB item write names (by name; an ARN's table part), or None where the
    request does not say in a field (PartiQL names them in its statements)."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    names: list[Any]
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        names = [request.get("TableName")]
    elif operation == "BatchWriteItem":
        names = list(request.get("RequestItems") or {})
    elif operation == "TransactWriteItems":
        entries: list[Any] = request.get("TransactItems") or []
        actions: list[Any] = [
            next(iter(entry.values()), {}) for entry in entries if isinstance(entry, dict) and entry
        ]
        names = [action.get("TableName") for action in actions if isinstance(action, dict)]
    else:
        return None
    if not all(isinstance(name, str) for name in names):
        return None
    return [str(name).rpartition(":table/")[2] for name in names]


class EmulatorMiddleware:
    """WSGI middleware in front of moto: serialises requests, captures mail, injects faults."""

    def __init__(self, app: WsgiApp, writes: TableWrites | None = None) -> None:
        self.app = app
        self.writes = writes or TableWrites()
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

    def _forward(
        self,
        environ: dict[str, Any],
        body: bytes,
        operation: AwsOperation | None,
        start_response: StartResponse,
    ) -> Iterable[bytes]:
        environ |= {"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
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
                getattr(result, "close", lambda: None)()
            # Only accepted messages are kept: a message SES refused was never delivered either.
            if operation == SES_SEND_EMAIL and statuses and statuses[-1][:1] == "2":
                self.mail.append(_sent_email(body, b"".join(chunks)))
            self._served += 1
            if self._served >= FORGET_EVERY:
                forget_model_instances()
                self._served = 0
        if operation is not None and operation.service == "dynamodb" and operation.name in ITEM_WRITES:
            self.writes.notify(written_tables(operation.name, body))
        return chunks

    def _control(
        self, environ: dict[str, Any], path: str, body: bytes, start_response: StartResponse
    ) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        resource = path[len(CONTROL_PREFIX) :].rstrip("/")
        handlers: dict[tuple[str, str], Callable[[], tuple[int, Any]]] = {
            ("mail", "GET"): lambda: (200, self._locked(lambda: list(self.mail))),
            ("mail", "DELETE"): lambda: self._cleared(self.mail.clear),
            ("faults", "GET"): lambda: (200, self.faults.active()),
            ("faults", "DELETE"): lambda: self._cleared(self.faults.clear),
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

    def _cleared(self, clear: Callable[[], None]) -> tuple[int, Any]:
        self._locked(clear)
        return 200, {"cleared": True}

    def _add_fault(self, body: bytes) -> tuple[int, Any]:
        try:
            spec = json.loads(body or b"null")
        except ValueError:
            return 400, {"message": "body is not JSON"}
        try:
            return 201, asdict(self.faults.add(spec))
        except FaultSpecError as error:
            return 400, {"message": str(error)}

    def _trim_stream(self, body: bytes) -> tuple[int, Any]:
        try:
            request = json.loads(body or b"null")
            arn, before = str(request["streamArn"]), int(request["before"])
        except (ValueError, TypeError, KeyError):
            return 400, {"message": 'expected {"streamArn": "...", "before": "<sequence number>"}'}
        with self._aws_lock:  # moto's backends are changed here as by any request
            try:
                return 200, {"trimmed": trim_stream(arn, before, KEPT_SHARD_ITERATORS)}
            except (ValueError, LookupError) as error:
                return 404, {"message": f"no stream {arn}: {error}"}


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
    """moto's server app plus :class:`EmulatorMiddleware`, served by waitress on a thread (kept-alive
    connections: an SDK call costs no new connection, as against AWS)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.writes = TableWrites()  # what the stream pollers wait on
        self._serving: WaitressServing | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Bind (port 0 picks a free port), start serving on a daemon thread, and return the
        endpoint URL for AWS SDKs (``AWS_ENDPOINT_URL``)."""
        app, _ = server_app()
        channels: dict[int, Any] = {}
        adjustments = Adjustments(
            host=self.host,
            port=self.port,
            threads=EMULATOR_THREADS,
            ident="nimbus-aws-emulator",
            # Emulated AWS APIs take large requests (a BatchWriteItem, a stream's records).
            max_request_body_size=64 * 1024 * 1024,
            log_socket_errors=False,
        )
        server = TcpWSGIServer(EmulatorMiddleware(app, self.writes), map=channels, adj=adjustments)
        self._serving = WaitressServing(server, channels)
        self._thread = threading.Thread(target=self._serving.serve_forever, name="aws-emulator", daemon=True)
        self._thread.start()
        return f"http://{self.host}:{self._serving.port}"

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._serving is not None:
            self._serving.shutdown()
            self._serving.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._serving = self._thread = None
