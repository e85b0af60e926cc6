"""The local API's HTTP server: waitress in front of the :class:`Gateway`, one console line per request.

waitress does the HTTP (framing checks, a capped thread pool, whole requests buffered before a
thread sees them, idle and stalled clients dropped, ``TCP_NODELAY``). What the server answers by
itself (bad framing, a body over API Gateway's limit, a gateway bug) is the contract's JSON error
with ``Cache-Control: no-store``, and the connection is closed.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TextIO

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, WSGITask

from nimbus_tools.local.events import HttpRequest, HttpResponse
from nimbus_tools.local.gateway import Gateway, GatewayResult, json_message
from nimbus_tools.local.waitress_serving import WaitressServing

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

# API Gateway refuses payloads over 10 MB.
MAX_BODY_BYTES = 10 * 1024 * 1024
# Request line plus headers (each line with its CRLF, the blank line ending them not counted): API
# Gateway's HTTP API quota, so that a request refused deployed is refused locally too.
MAX_HEADER_BYTES = 10_240
# Worker threads answering requests (requests beyond that wait in a queue, their sockets open).
THREADS = 16
# Seconds a connection may stay idle, or stall half-way through a request, before it is closed.
IDLE_TIMEOUT = 60

# Framing headers are the server's to set; hop-by-hop headers cannot pass through WSGI.
_SERVER_HEADERS = frozenset({"content-length", "connection", "transfer-encoding", "date", "server"})
_SERVER_HEADERS |= {"keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers", "upgrade"}
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")


class RequestLog:
    """Prints ``22:01:11 POST /login 201 134ms AuthFunction``, one line per request, thread-safely."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream, self._lock = stream, threading.Lock()

    def write(self, method: str, path: str, status: int, millis: float, result: GatewayResult | None) -> None:
        """Print one request's line (with the failure reason when the function failed)."""
        function = (result.function if result else None) or "-"
        line = f"{time.strftime('%H:%M:%S')} {method} {path} {status} {millis:.0f}ms {function}"
        line += f" ({result.error})" if result is not None and result.error else ""
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(line + "\n")
            stream.flush()


def error_response(status: int, code: str, message: str) -> HttpResponse:
    """An error the server answers by itself, in the contract's shape: JSON, never cached."""
    body = json.dumps({"code": code, "message": message}).encode()
    headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
    return HttpResponse(status, headers, body)


def _framing_error(status: int) -> HttpResponse:
    # waitress's errors: 413 for a body over the limit, 500 for its own failures; every other one
    # (400 bad framing or request line, 431 headers too large, 501 unknown transfer coding) means the
    # request could not be read, which the contract calls an invalid body.
    if status == 413:
        return error_response(413, "BODY_TOO_LARGE_ERROR", "Body Too Large")
    if status >= 500 and status != 501:
        return error_response(500, "INTERNAL_SERVER_ERROR", "Internal Server Error")
    return error_response(400, "INVALID_BODY_ERROR", "Invalid Body")


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def _log_path(target: str) -> str:
    # The query can hold tokens: keep it out of the console.
    return target.split("?", 1)[0] or "-"


def request_from_environ(environ: WSGIEnvironment) -> HttpRequest:
    """The :class:`HttpRequest` for a WSGI request, as the client sent it."""
    headers: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers.append((key[5:].replace("_", "-").lower(), value))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((key.replace("_", "-").lower(), value))
    length = int(environ.get("CONTENT_LENGTH") or 0)  # waitress has validated it (chunks decoded)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    return HttpRequest(
        method=environ["REQUEST_METHOD"],
        target=environ["REQUEST_URI"],  # waitress's raw request-target, never decoded
        headers=headers,
        body=body,
        source_ip=environ["REMOTE_ADDR"],  # the socket peer, never X-Forwarded-For
        protocol=environ["SERVER_PROTOCOL"],
        server_port=int(environ["SERVER_PORT"]),  # the port bound
    )


class JsonErrorTask(ErrorTask):
    """waitress's answer to a request it could not read, as contract JSON with one log line."""

    def execute(self) -> None:
        """Write the JSON error; waitress then closes the connection."""
        request: Any = self.request  # waitress's parser (the stubs call it an Error)
        response = _framing_error(int(request.error.code))
        self.status = _status_line(response.status)
        self.response_headers = [*self.response_headers, *response.headers]
        self.set_close_on_finish()
        self.content_length = len(response.body)
        self.write(response.body)
        server: Any = self.channel.server
        # Headers too large: waitress stopped reading before the request line could be trusted.
        command = getattr(request, "command", None)  # unset when the request line was unreadable
        readable = request.error.code != 431 and bool(command)
        path = _log_path(getattr(request, "request_uri", "")) if readable else "-"
        millis = (time.time() - self.start_time) * 1000
        server.request_log.write(command if readable else "-", path, response.status, millis, None)


def _capitalized(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


class ApiResponseTask(WSGITask):
    """waitress's WSGI task, answering as API Gateway does: header names as the function spelled them
    (waitress writes ``Ratelimit-Limit``), and a 204 or 304 keeps the connection open (waitress
    closes it after any response without a Content-Length, so every CORS preflight would cost one)."""

    def build_response_header(self) -> bytes:
        """The status line and headers, with the application's own spelling of each name."""
        request: Any = self.request  # waitress's parser (the stubs call it an Error)
        keep_alive = (
            not self.has_body
            and not self.close_on_finish
            and self.version == "1.1"
            and request.headers.get("CONNECTION", "").lower() != "close"
        )
        spelled = {_capitalized(name): name for name, _ in self.response_headers}
        lines = super().build_response_header().split(b"\r\n")
        if keep_alive and self.close_on_finish:
            self.close_on_finish = False
            lines = [line for line in lines if line.lower() != b"connection: close"]
        for index, line in enumerate(lines[1:], start=1):
            name, separator, value = line.partition(b": ")
            original = spelled.get(name.decode("latin-1"))
            if separator and original is not None:
                lines[index] = original.encode("latin-1") + separator + value
        return b"\r\n".join(lines)


class _Channel(HTTPChannel):
    task_class = ApiResponseTask
    error_task_class = JsonErrorTask


class _WaitressServer(TcpWSGIServer):
    channel_class = _Channel
    request_log: RequestLog


class LocalApiServer:
    """The local API's HTTP server: bind with the constructor, attach the gateway (the functions'
    environment depends on the port bound), serve with :meth:`serve_forever`; :meth:`shutdown` (from
    another thread) stops serving, :meth:`server_close` releases the socket."""

    def __init__(
        self,
        address: tuple[str, int],
        request_log: RequestLog | None = None,
        *,
        threads: int = THREADS,
        idle_timeout: int = IDLE_TIMEOUT,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_header_bytes: int = MAX_HEADER_BYTES,
    ) -> None:
        self.request_log = request_log or RequestLog()
        self.gateway: Gateway | None = None  # answers requests (503 until one is attached)
        host, port = address
        adjustments = Adjustments(
            host=host,
            port=port,
            threads=threads,
            channel_timeout=idle_timeout,
            # How often idle connections are looked for: they are closed within 1.5 x idle_timeout.
            cleanup_interval=max(1, min(30, idle_timeout // 2)),
            # waitress refuses a body of exactly its limit; API Gateway accepts one.
            max_request_body_size=max_body_bytes + 1,
            # waitress counts the blank line ending the head too, and refuses at its limit, not over it.
            max_request_header_size=max_header_bytes + len(b"\r\n") + 1,
            ident="nimbus-local",
            # X-Forwarded-For reaches the function (API Gateway appends the peer to it); the source
            # IP is the socket peer regardless.
            clear_untrusted_proxy_headers=False,
            # A client that hangs up is not worth a traceback on the console.
            log_socket_errors=False,
            expose_tracebacks=False,
        )
        channels: dict[int, Any] = {}
        self._server = _WaitressServer(self, map=channels, adj=adjustments)
        self._server.request_log = self.request_log
        self._serving = WaitressServing(self._server, channels)
        self.port: int = self._serving.port  # the port bound

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI application: the request goes to the gateway, the answer back, one log line each."""
        started = time.monotonic()
        request = request_from_environ(environ)
        result = self._answer(request)
        response = result.response
        headers = [(k, v) for k, v in response.headers if k.lower() not in _SERVER_HEADERS]
        bad = [k for k, v in headers if not _TOKEN.fullmatch(k) or _BAD_VALUE.search(v)]
        if bad:  # a header that would break the response framing: API Gateway answers 502
            response = json_message(502, "Internal Server Error")
            result = GatewayResult(response, result.function, f"malformed response: bad header {bad[0]!r}")
            headers = [*response.headers, ("apigw-requestid", request.request_id)]
        bodiless = response.status in (204, 304) or response.status < 200
        if not bodiless:  # (a HEAD response tells the length of the body it leaves out)
            headers.append(("Content-Length", str(len(response.body))))
        start_response(_status_line(response.status), headers)
        millis = (time.monotonic() - started) * 1000
        self.request_log.write(request.method, _log_path(request.target), response.status, millis, result)
        if request.method == "HEAD" or bodiless:
            return [b""]  # no body goes out, whatever the function returned
        return [response.body]

    def _answer(self, request: HttpRequest) -> GatewayResult:
        if self.gateway is None:
            return GatewayResult(error_response(503, "SERVICE_UNAVAILABLE_ERROR", "Service Unavailable"))
        try:
            return self.gateway.handle(request)
        except Exception as error:
            failure = error_response(500, "INTERNAL_SERVER_ERROR", "Internal Server Error")
            return GatewayResult(failure, error=repr(error))

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (blocks; run it on a thread)."""
        self._serving.serve_forever()

    def open_connections(self) -> list[socket.socket]:
        """The accepted client sockets that are open now."""
        return self._serving.open_connections()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop serving: close the listening socket and every connection, and wait for the loop."""
        self._serving.shutdown(timeout)

    def server_close(self) -> None:
        """Release the socket and stop the worker threads (after :meth:`shutdown`); idempotent."""
        self._serving.server_close()
