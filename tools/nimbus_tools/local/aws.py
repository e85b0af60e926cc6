"""The AWS emulator: moto's server app, in process, behind our own WSGI middleware.

The middleware adds what the local API needs on top of moto:

* one lock around every AWS request, because moto's backends are not safe under concurrent
  threads while DynamoDB guarantees atomic conditional writes and transactions;
* capture of every accepted SES SendEmail (``GET``/``DELETE /_nimbus/mail``);
* fault injection for tests (``POST``/``GET``/``DELETE /_nimbus/faults``).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server

from nimbus_tools.local.faults import FaultRegistry, FaultSpecError, fault_response
from nimbus_tools.local.mailbox import Mailbox, email_from_sesv1_request, email_from_sesv2_request
from nimbus_tools.local.operations import AwsOperation, identify_operation

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
StartResponse = Callable[..., Any]

CONTROL_PREFIX = "/_nimbus/"


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:  # a status http.HTTPStatus does not name, e.g. an injected 599
        return f"{status} Error"


class EmulatorMiddleware:
    """WSGI middleware in front of moto: serialises requests, captures mail, injects faults."""

    def __init__(self, app: WsgiApp, mailbox: Mailbox | None = None, faults: FaultRegistry | None = None):
        self.app = app
        self.mailbox = mailbox or Mailbox()
        self.faults = faults or FaultRegistry()
        self._aws_lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """Serve one request: a control endpoint, an injected fault, or moto."""
        body = _read_body(environ)
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(CONTROL_PREFIX):
            return self._control(environ, path, body, start_response)

        operation = identify_operation(environ, body)
        if operation is not None:
            fault = self.faults.take(operation)
            if fault is not None:
                status, headers, payload = fault_response(fault, operation)
                start_response(_status_line(status), headers)
                return [payload]
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

        if operation is not None and operation.name == "SendEmail" and statuses and statuses[-1][:1] == "2":
            self._capture(operation, body, b"".join(chunks))
        return chunks

    def _capture(self, operation: AwsOperation, request_body: bytes, response_body: bytes) -> None:
        # Only accepted messages are kept: a message SES refused was never delivered either.
        if operation.protocol == "rest-json":
            email = email_from_sesv2_request(request_body)
            try:
                message_id = json.loads(response_body).get("MessageId")
            except (ValueError, AttributeError):
                message_id = None
        else:
            email = email_from_sesv1_request(request_body)
            text = response_body.decode("utf-8", "replace")
            start, end = text.find("<MessageId>"), text.find("</MessageId>")
            message_id = text[start + len("<MessageId>") : end] if 0 <= start < end else None
        if email is not None:
            if isinstance(message_id, str) and message_id:
                email.id = message_id
            self.mailbox.add(email)

    # --- control endpoints

    def _control(
        self, environ: dict[str, Any], path: str, body: bytes, start_response: StartResponse
    ) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        resource = path[len(CONTROL_PREFIX) :].rstrip("/")
        handlers: dict[tuple[str, str], Callable[[], tuple[int, Any]]] = {
            ("mail", "GET"): lambda: (200, [e.as_json() for e in self.mailbox.list()]),
            ("mail", "DELETE"): self._clear_mail,
            ("faults", "GET"): lambda: (200, [f.as_json() for f in self.faults.active()]),
            ("faults", "DELETE"): self._clear_faults,
            ("faults", "POST"): lambda: self._add_fault(body),
        }
        handler = handlers.get((resource, method))
        if handler is not None:
            status, payload = handler()
            return _json(start_response, status, payload)
        if resource in ("mail", "faults"):
            return _json(start_response, 405, {"message": f"{method} not allowed on {path}"})
        return _json(start_response, 404, {"message": f"unknown control endpoint {path}"})

    def _clear_mail(self) -> tuple[int, Any]:
        self.mailbox.clear()
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


def _read_body(environ: dict[str, Any]) -> bytes:
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    length = environ.get("CONTENT_LENGTH")
    if length:
        try:
            return bytes(stream.read(int(length)))
        except ValueError:
            return b""
    # Chunked uploads: werkzeug marks the stream as terminated so read() stops at the end.
    if environ.get("wsgi.input_terminated"):
        return bytes(stream.read())
    return b""


def _json(start_response: StartResponse, status: int, payload: Any) -> list[bytes]:
    body = json.dumps(payload).encode()
    start_response(
        _status_line(status), [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


class AwsEmulator:
    """moto's server app plus :class:`EmulatorMiddleware`, served by werkzeug on a thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.mailbox = Mailbox()
        self.faults = FaultRegistry()
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

        middleware = EmulatorMiddleware(
            DomainDispatcherApplication(create_backend_app), self.mailbox, self.faults
        )
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
