"""The local API's HTTP server: one thread per connection, one console line per request."""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO

from nimbus_tools.local.events import HttpRequest, HttpResponse
from nimbus_tools.local.gateway import Gateway, GatewayResult, json_message

# API Gateway refuses payloads over 10 MB.
MAX_BODY_BYTES = 10 * 1024 * 1024


class RequestLog:
    """Prints ``22:01:11 POST /login 201 134ms AuthFunction``, one line per request, thread-safely."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, method: str, path: str, status: int, millis: float, result: GatewayResult | None) -> None:
        """Print one request's line (with the failure reason when the function failed)."""
        function = result.function if result is not None and result.function else "-"
        line = f"{time.strftime('%H:%M:%S')} {method} {path} {status} {millis:.0f}ms {function}"
        if result is not None and result.error:
            line += f" ({result.error})"
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(line + "\n")
            stream.flush()


class LocalApiServer(ThreadingHTTPServer):
    """A threading HTTP server that hands every request to a :class:`Gateway`.

    The gateway is attached after binding because the functions' environment depends on the
    port actually bound (the verification link points back at this server).
    """

    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a burst of concurrent clients would see connection
    # resets that API Gateway never gives. 128 is what werkzeug uses for the AWS emulator side.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], request_log: RequestLog | None = None) -> None:
        super().__init__(address, ApiRequestHandler)
        self.gateway: Gateway | None = None
        self.request_log = request_log or RequestLog()

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.server_address[1])


class ApiRequestHandler(BaseHTTPRequestHandler):
    """Reads a request, lets the gateway answer it, writes the response and the log line."""

    server: LocalApiServer
    protocol_version = "HTTP/1.1"  # keep-alive, as clients get from API Gateway

    def version_string(self) -> str:
        """The Server header."""
        return "nimbus-local"

    def do_GET(self) -> None:
        """Serve GET."""
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

    def _serve(self) -> None:
        started = time.monotonic()
        result: GatewayResult | None = None
        body = self._read_body()
        if body is None:
            response = json_message(413, "Request Entity Too Large")
            self.close_connection = True
        else:
            request = HttpRequest(
                method=self.command,
                target=self.path,
                headers=list(self.headers.items()),
                body=body,
                source_ip=self.client_address[0],  # the socket peer, never X-Forwarded-For
                protocol=self.request_version,
                server_port=self.server.port,
            )
            gateway = self.server.gateway
            if gateway is None:
                response = json_message(503, "Service Unavailable")
            else:
                try:
                    result = gateway.handle(request)
                except Exception as error:
                    result = GatewayResult(json_message(500, "Internal Server Error"), error=repr(error))
                response = result.response
        try:
            self._write(response)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; still log the request
        path = self.path.split("?", 1)[0]  # the query can hold tokens: keep it out of the console
        self.server.request_log.write(
            self.command, path, response.status, (time.monotonic() - started) * 1000, result
        )

    def _read_body(self) -> bytes | None:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            total += size
            if total > MAX_BODY_BYTES:
                return None
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _write(self, response: HttpResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() in ("content-length", "connection", "transfer-encoding", "date", "server"):
                continue  # framing headers are ours to set
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.body:
            self.wfile.write(response.body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Silenced: :class:`RequestLog` writes the one line per request."""

    def log_message(self, format: str, *args: object) -> None:
        """Protocol errors (bad request lines) go to stderr, prefixed so they stand out."""
        sys.stderr.write(f"local API: {format % args}\n")
