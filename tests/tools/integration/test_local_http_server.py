"""The local API's HTTP server over real sockets, in process, with a stub function behind the gateway.

These tests speak raw HTTP where a well-behaved client would not: malformed framing, smuggling
attempts, idle and slow clients. Every answer the server gives itself must be one JSON response with
``Cache-Control: no-store``, and a broken connection must be closed, never left half-parsed.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.responses import error_response
from nimbus_tools.local.events import HttpRequest
from nimbus_tools.local.functions import Invocation
from nimbus_tools.local.gateway import Gateway, GatewayResult
from nimbus_tools.local.router import Router, RouteTarget
from nimbus_tools.local.server import MAX_BODY_BYTES, MAX_HEADER_BYTES, LocalApiServer, RequestLog
from nimbus_tools.local.static import StaticSite
from nimbus_tools.local.waitress_serving import WaitressServing
from nimbus_tools.template import HttpRoute

pytestmark = pytest.mark.waits  # servers started and shut down under load

# A guard against a hanging server, never a measurement: every test finishes well within it.
GUARD_SECONDS = 20.0

ROUTER = Router(
    [
        RouteTarget(HttpRoute("GET", "/echo/{name}"), "EchoFunction"),
        RouteTarget(HttpRoute("POST", "/items"), "EchoFunction"),
        RouteTarget(HttpRoute("ANY", "$default"), "DefaultFunction"),
    ]
)
INVALID_BODY = {"code": "INVALID_BODY_ERROR", "message": "Invalid Body"}


@dataclass
class EchoInvoker:
    """Answers every invocation with what the function saw; counts calls running at once."""

    barrier: threading.Barrier | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    events: list[Mapping[str, Any]] = field(default_factory=list)
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        with self.lock:
            self.events.append(event)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            if self.barrier is not None:
                with suppress(threading.BrokenBarrierError):
                    self.barrier.wait()
        finally:
            with self.lock:
                self.active -= 1
        seen = {
            "function": function,
            "method": event["requestContext"]["http"]["method"],
            "routeKey": event["routeKey"],
            "rawPath": event["rawPath"],
            "rawQueryString": event["rawQueryString"],
            "body": event.get("body"),
            "sourceIp": event["requestContext"]["http"]["sourceIp"],
            "xForwardedFor": event["headers"].get("x-forwarded-for"),
        }
        result = {
            "statusCode": self.status,
            "headers": self.headers,
            "body": json.dumps(seen),
        }
        return Invocation(ok=True, result_json=json.dumps(result))


class FailingGateway(Gateway):
    """A gateway with a bug: every request raises."""

    def handle(self, request: HttpRequest) -> GatewayResult:
        raise RuntimeError("gateway bug")


@dataclass
class Running:
    """A server serving on a free port, its stub function and its console."""

    server: LocalApiServer
    invoker: EchoInvoker
    console: io.StringIO

    @property
    def port(self) -> int:
        return self.server.port

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=GUARD_SECONDS)

    def http(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=GUARD_SECONDS)


@contextmanager
def serving(
    invoker: EchoInvoker | None = None, gateway: Gateway | None = None, **options: Any
) -> Iterator[Running]:
    console = io.StringIO()
    server = LocalApiServer(("127.0.0.1", 0), RequestLog(console), **options)
    invoker = invoker or EchoInvoker()
    server.gateway = gateway or Gateway(ROUTER, invoker)
    thread = threading.Thread(target=server.serve_forever, name="test-local-api", daemon=True)
    thread.start()
    try:
        yield Running(server, invoker, console)
    finally:
        server.shutdown()
        thread.join(timeout=GUARD_SECONDS)
        server.server_close()
    assert not thread.is_alive()


@pytest.fixture
def api() -> Iterator[Running]:
    with serving() as running:
        yield running


@dataclass
class Response:
    """One parsed HTTP response."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _Unclosable(io.BytesIO):
    """HTTPResponse closes its stream after the last body of a connection; we read on regardless."""

    def close(self) -> None:
        pass


class _Replay:
    """What http.client.HTTPResponse needs of a socket, over bytes already received."""

    def __init__(self, stream: io.BytesIO) -> None:
        self.stream = stream

    def makefile(self, mode: str) -> io.BytesIO:
        return self.stream


def parse_responses(raw: bytes, method: str = "GET") -> list[Response]:
    """Every response in ``raw`` (as read from a connection until it closed)."""
    stream = _Unclosable(raw)
    responses = []
    while stream.tell() < len(raw):
        response = http.client.HTTPResponse(_Replay(stream), method=method)  # type: ignore[arg-type]
        response.begin()
        body = response.read()
        responses.append(Response(response.status, {k.lower(): v for k, v in response.getheaders()}, body))
    return responses


def exchange(running: Running, raw: bytes) -> list[Response]:
    """Send ``raw`` on one connection, read until the server closes it, and parse what came back."""
    with running.connect() as connection:
        connection.sendall(raw)
        return parse_responses(read_until_closed(connection))


def read_until_closed(connection: socket.socket) -> bytes:
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def assert_json_error(response: Response, status: int, body: dict[str, str]) -> None:
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == body


# --- methods -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [("FOO", "/"), ("TRACE", "/"), ("PROPFIND", "/users/me")])
def test_unknown_methods_reach_the_default_route(api: Running, method: str, path: str) -> None:
    connection = api.http()
    connection.request(method, path)
    response = connection.getresponse()
    seen = json.loads(response.read())
    assert response.status == 200
    assert (seen["function"], seen["routeKey"], seen["method"], seen["rawPath"]) == (
        "DefaultFunction",
        "$default",
        method,
        path,
    )


# --- framing: each broken request gets one JSON 400 and the connection is closed ------------------

NEXT_REQUEST = b"GET /echo/second HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            b"POST /items HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", id="content-length-abc"
        ),
        pytest.param(
            b"POST /items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            id="bad-chunk-size",
        ),
        pytest.param(
            b"POST /items HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
            id="two-content-lengths",
        ),
        pytest.param(b"NOT A VALID REQUEST LINE\r\nHost: x\r\n\r\n", id="bad-request-line"),
    ],
)
def test_malformed_request_gets_one_json_400_and_the_connection_closes(
    api: Running, raw: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    responses = exchange(api, raw + NEXT_REQUEST)
    assert len(responses) == 1  # the smuggled second request is never answered
    assert_json_error(responses[0], 400, INVALID_BODY)
    assert responses[0].headers["connection"] == "close"
    assert api.invoker.events == []
    assert "Traceback" not in capfd.readouterr().err


def test_oversized_headers_get_a_json_400() -> None:
    # A small limit, so that the server has read everything sent when it answers (a server closing
    # with unread input resets the connection, and the client may lose the answer).
    with serving(max_header_bytes=1024) as running:
        raw = b"GET /echo/me HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000 + b"\r\n\r\n"
        responses = exchange(running, raw)
        assert len(responses) == 1
        assert_json_error(responses[0], 400, INVALID_BODY)
        assert running.invoker.events == []
        assert running.console.getvalue().split()[1:4] == ["-", "-", "400"]


def _head(request_line: bytes, header_bytes: int, *, headers: int = 1) -> bytes:
    """A request line and ``headers`` filler headers whose lines (CRLFs included) come to exactly
    ``header_bytes`` bytes, Host included; the blank line ending the head is added after."""
    lines = [request_line + b"\r\n", b"Host: x\r\n", b"Connection: close\r\n"]
    room = header_bytes - sum(map(len, lines))
    for n in range(headers):
        share = room // (headers - n)
        name = b"X-Fill-%d: " % n
        lines.append(name + b"a" * (share - len(name) - 2) + b"\r\n")
        room -= share
    head = b"".join(lines)
    assert len(head) == header_bytes
    return head + b"\r\n"


@pytest.mark.parametrize("headers", [1, 12], ids=["one long header", "many medium headers"])
def test_a_head_of_exactly_the_gateway_quota_is_served_and_one_byte_more_is_a_json_400(headers: int) -> None:
    with serving() as running:
        (served,) = exchange(running, _head(b"GET /echo/me HTTP/1.1", MAX_HEADER_BYTES, headers=headers))
        assert served.status == 200
        assert len(running.invoker.events) == 1

        (refused,) = exchange(running, _head(b"GET /echo/me HTTP/1.1", MAX_HEADER_BYTES + 1, headers=headers))
        assert_json_error(refused, 400, INVALID_BODY)
        assert len(running.invoker.events) == 1


def test_a_long_request_line_counts_toward_the_gateway_quota() -> None:
    with serving() as running:
        line = b"GET /echo/me?q=" + b"a" * 9000 + b" HTTP/1.1"
        (served,) = exchange(running, _head(line, MAX_HEADER_BYTES))
        (refused,) = exchange(running, _head(line, MAX_HEADER_BYTES + 1))

    assert served.status == 200
    assert_json_error(refused, 400, INVALID_BODY)


def test_the_local_header_quota_is_api_gateway_s() -> None:
    assert MAX_HEADER_BYTES == 10_240


def test_body_over_the_gateway_limit_gets_a_json_413(api: Running) -> None:
    # The declared length alone is refused: the body need not be sent.
    raw = f"POST /items HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
    responses = exchange(api, raw)
    assert len(responses) == 1
    assert_json_error(responses[0], 413, {"code": "BODY_TOO_LARGE_ERROR", "message": "Body Too Large"})
    assert api.invoker.events == []


def test_chunked_body_growing_over_the_limit_gets_a_json_413() -> None:
    with serving(max_body_bytes=1000) as running:
        chunk = b"a" * 600
        raw = b"POST /items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        raw += (b"258\r\n" + chunk + b"\r\n") * 2 + b"0\r\n\r\n"
        responses = exchange(running, raw)
        assert len(responses) == 1
        assert_json_error(responses[0], 413, {"code": "BODY_TOO_LARGE_ERROR", "message": "Body Too Large"})
        assert running.invoker.events == []


def test_a_failing_gateway_answers_json_500_without_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    with serving(gateway=FailingGateway(ROUTER, EchoInvoker())) as running:
        connection = running.http()
        connection.request("GET", "/echo/me")
        response = connection.getresponse()
        assert response.status == 500
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Cache-Control"] == "no-store"
        assert json.loads(response.read()) == {
            "code": "INTERNAL_SERVER_ERROR",
            "message": "Internal Server Error",
        }
        assert "RuntimeError('gateway bug')" in running.console.getvalue()
    assert "Traceback" not in capfd.readouterr().err


# --- slow clients, threads, Nagle ---------------------------------------------------------------


def test_idle_client_is_disconnected_and_does_not_block_others() -> None:
    with serving(threads=1, idle_timeout=1) as running, running.connect() as idle:
        idle.sendall(b"GET /echo/idle HTTP/1.1\r\nHost: x\r\n")  # and never finishes the request
        connection = running.http()
        for _ in range(3):  # the only worker thread is free for others meanwhile
            connection.request("GET", "/echo/busy")
            response = connection.getresponse()
            assert (response.status, json.loads(response.read())["rawPath"]) == (200, "/echo/busy")
        assert read_until_closed(idle) == b""  # closed by the server, before the guard timeout
        assert [event["rawPath"] for event in running.invoker.events] == ["/echo/busy"] * 3


def test_worker_threads_are_capped() -> None:
    # The function waits until three requests run at once (or the barrier gives up): with two
    # threads that never happens.
    invoker = EchoInvoker(barrier=threading.Barrier(3, timeout=2))
    with serving(invoker=invoker, threads=2) as running:
        results: list[int] = []

        def call() -> None:
            connection = running.http()
            connection.request("GET", "/echo/parallel")
            response = connection.getresponse()
            response.read()
            results.append(response.status)

        callers = [threading.Thread(target=call) for _ in range(5)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(timeout=GUARD_SECONDS)
        assert results == [200] * 5
        assert invoker.most_active == 2


def test_accepted_connections_have_nagle_disabled(api: Running) -> None:
    connection = api.http()
    connection.request("GET", "/echo/me")
    connection.getresponse().read()
    accepted = api.server.open_connections()
    assert len(accepted) == 1
    assert accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# --- the console beside the API: files from console/ only, every other path the API's JSON 404 ---

REPO = Path(__file__).resolve().parents[3]
INVALID_ENDPOINT = {"code": "INVALID_ENDPOINT_ERROR", "message": "Invalid Endpoint"}


@dataclass
class ApiDefault:
    """The API's ``$default`` route: every path it gets is nimbus_core's own 404, as AdminFunction
    answers an unknown path (deployed, API Gateway sends every /console path there)."""

    events: list[Mapping[str, Any]] = field(default_factory=list)

    def invoke(self, function: str, event: Mapping[str, Any], request_id: str) -> Invocation:
        self.events.append(event)
        result = error_response(NimbusError(ErrorCode.INVALID_ENDPOINT_ERROR)).to_lambda()
        return Invocation(ok=True, result_json=json.dumps(result))


@contextmanager
def serving_the_console() -> Iterator[tuple[Running, ApiDefault]]:
    default = ApiDefault()
    with serving(gateway=Gateway(ROUTER, default, static=StaticSite(REPO))) as running:
        yield running, default


def get(running: Running, path: str) -> Response:
    """GET ``path`` exactly as written (http.client sends the target as it is: no dot segment is
    resolved and nothing is re-encoded, as an attacker's client would send it)."""
    connection = running.http()
    connection.request("GET", path)
    response = connection.getresponse()
    return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())


# Not a console page nor a file below console/: dot segments (plain and percent-encoded in either
# case), encoded slashes and backslashes, NUL bytes, a missing file, directories, and every way out
# of the folder towards a file of the repository.
NOT_CONSOLE_FILES = [
    "/console/../x",
    "/console/%2e%2e/x",
    "/console/%2E%2E/x",
    "/console/..%2fx",
    "/console/..%2Fx",
    "/console/.%2e/x",
    "/console/%00",
    "/console/index%00",
    "/console/app.js%00.txt",
    "/console/missing.css",
    "/console/..",
    "/console/%2e%2e",
    "/console/.",
    "/console/staff/..",
    "/console/vendor/%2e",
    "/docs/assets/",
    "/docs/assets",
    "/console/../pyproject.toml",
    "/console/../../pyproject.toml",
    "/console/..%2f..%2fpyproject.toml",
    "/console/..%2fpyproject.toml",
    "/console/%2e%2e/pyproject.toml",
    "/console/%2e%2e%2fpyproject.toml",
    "/console/..%5cpyproject.toml",
    "/console/staff/..%2f..%2fpyproject.toml",
    "/console/staff/%2e%2e/%2e%2e/pyproject.toml",
    "/console//pyproject.toml",
    "/console/%2f" + str(REPO).lstrip("/").replace("/", "%2f") + "%2fpyproject.toml",
    "/console/vendor/..%2f..%2f..%2fpyproject.toml",
    "/docs/assets/..%2f..%2f..%2fpyproject.toml",
    "/docs/assets/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
]


@pytest.mark.parametrize("path", NOT_CONSOLE_FILES)
def test_every_path_that_is_no_console_file_is_the_api_s_json_404(path: str) -> None:
    with serving_the_console() as (running, default):
        response = get(running, path)

    assert_json_error(response, 404, INVALID_ENDPOINT)
    assert (REPO / "pyproject.toml").read_bytes() not in response.body
    # The API answered, on its catch-all route, with the path as it was sent.
    assert [(e["routeKey"], e["rawPath"]) for e in default.events] == [("$default", path)]


def test_console_pages_and_files_are_still_served() -> None:
    with serving_the_console() as (running, default):
        page, script, staff_page = (
            get(running, "/console/sessions"),
            get(running, "/console/app.js"),
            get(running, "/console/staff/users/abc"),
        )

    assert (page.status, page.body) == (200, (REPO / "console" / "index.html").read_bytes())
    assert (script.status, script.body) == (200, (REPO / "console" / "app.js").read_bytes())
    assert (staff_page.status, staff_page.body) == (
        200,
        (REPO / "console" / "staff" / "index.html").read_bytes(),
    )
    assert default.events == []


# --- what must keep working ----------------------------------------------------------------------


def test_keep_alive_serves_many_requests_on_one_connection(api: Running) -> None:
    connection = api.http()
    for n in range(20):
        connection.request("GET", f"/echo/n{n}")
        response = connection.getresponse()
        assert json.loads(response.read())["rawPath"] == f"/echo/n{n}"
        assert response.getheader("Connection") != "close"
    assert len(api.server.open_connections()) == 1


def test_valid_chunked_body_reaches_the_function(api: Running) -> None:
    raw = (
        b"POST /items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b'5\r\n{"a":\r\n3;ext=1\r\n 1}\r\n0\r\nTrailer: x\r\n\r\n'
    )
    responses = exchange(api, raw)
    assert len(responses) == 1
    assert responses[0].status == 200
    assert responses[0].json()["body"] == '{"a": 1}'


def test_request_target_source_ip_and_forwarded_header_reach_the_event(api: Running) -> None:
    connection = api.http()
    connection.request("GET", "/echo/al%20ice?x=1&x=2&t=a%2Fb", headers={"X-Forwarded-For": "6.6.6.6"})
    seen = json.loads(connection.getresponse().read())
    assert (seen["rawPath"], seen["rawQueryString"]) == ("/echo/al%20ice", "x=1&x=2&t=a%2Fb")
    assert seen["sourceIp"] == "127.0.0.1"
    assert seen["xForwardedFor"] == "6.6.6.6, 127.0.0.1"


def test_response_header_names_keep_the_functions_spelling() -> None:
    invoker = EchoInvoker(headers={"content-type": "application/json", "RateLimit-Limit": "5"})
    with serving(invoker=invoker) as running:
        with running.connect() as connection:
            connection.sendall(b"GET /echo/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            head = read_until_closed(connection).split(b"\r\n\r\n", 1)[0]
        lines = head.split(b"\r\n")
        assert b"RateLimit-Limit: 5" in lines
        assert b"content-type: application/json" in lines
        assert any(line.startswith(b"apigw-requestid: ") for line in lines)


def test_a_response_header_that_would_split_the_response_answers_502() -> None:
    invoker = EchoInvoker(headers={"x-note": "a\r\nSet-Cookie: evil=1"})
    with serving(invoker=invoker) as running:
        connection = running.http()
        connection.request("GET", "/echo/me")
        response = connection.getresponse()
        assert (response.status, json.loads(response.read())) == (502, {"message": "Internal Server Error"})
        assert response.getheader("Set-Cookie") is None
        assert response.getheader("apigw-requestid")
        assert "malformed response" in running.console.getvalue()


def test_a_204_from_the_function_goes_out_without_its_body(caplog: pytest.LogCaptureFixture) -> None:
    with serving(invoker=EchoInvoker(status=204)) as running:
        connection = running.http()
        for _ in range(2):  # a stray body would corrupt the next response on the connection
            connection.request("DELETE", "/echo/me")
            response = connection.getresponse()
            assert (response.status, response.read()) == (204, b"")
            assert response.getheader("Connection") != "close"
    waitress = [r.getMessage() for r in caplog.records if r.name.startswith("waitress")]
    # A loaded machine may make waitress note its queue depth; nothing else may be said.
    assert [m for m in waitress if not m.startswith("Task queue depth")] == []


def test_head_answers_headers_without_a_body(api: Running) -> None:
    connection = api.http()
    connection.request("HEAD", "/echo/me")
    response = connection.getresponse()
    assert response.status == 200
    assert int(response.getheader("Content-Length") or 0) > 0
    assert response.read() == b""
    connection.request("GET", "/echo/again")  # the connection is still usable
    assert json.loads(connection.getresponse().read())["rawPath"] == "/echo/again"


def test_one_log_line_per_request_without_the_query(api: Running) -> None:
    connection = api.http()
    connection.request("GET", "/echo/me?token=secret")
    connection.getresponse().read()
    lines = api.console.getvalue().splitlines()
    assert len(lines) == 1
    assert " GET /echo/me 200 " in lines[0]
    assert lines[0].endswith(" EchoFunction")
    assert "secret" not in lines[0]


def test_shutdown_stops_serving_and_frees_the_port() -> None:
    with serving() as running:
        port = running.port
        connection = running.http()
        connection.request("GET", "/echo/me")
        connection.getresponse().read()  # a keep-alive connection is still open at shutdown
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=GUARD_SECONDS)


def test_a_server_stopped_before_its_thread_began_never_runs_its_loop() -> None:
    """Stopped at once, before the serving thread runs: that thread, when it runs, does not start
    the loop, which would poll the channels closed meanwhile (their descriptor numbers may be
    another server's by then, and closing them again closes that server's)."""
    channels: dict[int, Any] = {}
    adjustments = Adjustments(host="127.0.0.1", port=0)
    server = TcpWSGIServer(lambda _environ, _start: [], map=channels, adj=adjustments)
    ran: list[bool] = []
    server.run = lambda: ran.append(True)  # type: ignore[method-assign]
    serving = WaitressServing(server, channels)
    serving.shutdown()
    serving.server_close()

    serving.serve_forever()

    assert ran == []
    assert channels == {}


def test_a_shutdown_while_answers_are_being_written_stops_cleanly() -> None:
    """Each answer written wakes the serving thread (a byte through its trigger); woken so, it may
    run the stop that a shutdown has just queued before the shutdown writes its own wake-up, and
    the stop closes the trigger. That write must never meet the closed descriptor (EBADF) or one
    reused meanwhile (a byte in another server's pipe): the shutdown of a stack under load."""

    def client(running: Running, answering: threading.Event) -> None:
        connection = running.http()
        with suppress(OSError, http.client.HTTPException):
            while True:
                connection.request("GET", "/echo/me")
                connection.getresponse().read()
                answering.set()

    for _ in range(100):
        answering = threading.Event()
        with serving() as running:
            thread = threading.Thread(target=client, args=(running, answering), daemon=True)
            thread.start()
            assert answering.wait(GUARD_SECONDS)
        thread.join(timeout=GUARD_SECONDS)
        assert not thread.is_alive()
