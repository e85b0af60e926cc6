"""The Have I Been Pwned client's real transport against a local HTTP server that answers as the
range API does: the request it sends, the connection it keeps between requests, and what it does
when that connection was closed while idle, on an error status, and on a server that does not answer
in time. (Only the connection is plain HTTP to 127.0.0.1 instead of HTTPS to the API.)
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nimbus_core.compromised.pwned_range import HttpsTransport, PwnedRange, split_sha1

pytestmark = pytest.mark.waits  # HTTP timeouts waited out

PASSWORD = "Summer2019!Bristol"
PREFIX, SUFFIX = split_sha1(PASSWORD)
PADDING = [f"{n:035X}:0" for n in range(1, 400)]  # what Add-Padding adds: made-up suffixes, count 0


@dataclass
class Script:
    """What the server answers, and what it saw."""

    status: int = 200
    drop_idle: bool = False  # close the connection after answering, without saying so
    hold: threading.Event | None = None  # answer only once set
    seen: list[tuple[str, str | None, int]] = field(default_factory=list)  # path, Add-Padding, port


class RangeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API serves
    server: RangeServer

    def do_GET(self) -> None:
        script = self.server.script
        script.seen.append((self.path, self.headers.get("Add-Padding"), self.client_address[1]))
        if script.hold is not None:
            script.hold.wait(10)
        body = "\r\n".join(sorted([*PADDING, f"{SUFFIX}:2413"])).encode()
        self.send_response(script.status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = script.drop_idle

    def log_message(self, format: str, *args: object) -> None:
        pass


class RangeServer(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


@pytest.fixture
def server() -> Iterator[RangeServer]:
    running = RangeServer(("127.0.0.1", 0), RangeHandler)
    running.script = Script()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.shutdown()
    running.server_close()


def client(server: RangeServer, timeout: float = 1.5) -> PwnedRange:
    port = server.server_address[1]

    def connect(seconds: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=seconds)

    return PwnedRange(HttpsTransport(connect), timeout=timeout)


def test_it_asks_for_the_prefix_with_padding_and_keeps_the_connection(server: RangeServer) -> None:
    pwned = client(server)
    assert pwned.count(PASSWORD) == 2413
    assert pwned.count(PASSWORD) == 2413
    (path, padding, port), (_, _, again) = server.script.seen
    assert (path, padding) == (f"/range/{PREFIX}", "true")
    assert again == port  # the second request rode the first one's connection


def test_a_connection_closed_while_idle_is_replaced_within_the_request(server: RangeServer) -> None:
    server.script.drop_idle = True
    pwned = client(server)
    assert pwned.count(PASSWORD) == 2413
    assert pwned.count(PASSWORD) == 2413
    assert len({port for _, _, port in server.script.seen}) == 2


def test_an_error_status_is_unknown_and_the_next_request_connects_afresh(server: RangeServer) -> None:
    server.script.status = 503
    pwned = client(server)
    assert pwned.count(PASSWORD) is None
    server.script.status = 200
    assert pwned.count(PASSWORD) == 2413
    assert len({port for _, _, port in server.script.seen}) == 2


def test_a_server_that_does_not_answer_in_time_is_unknown(server: RangeServer) -> None:
    server.script.hold = threading.Event()
    try:
        assert client(server, timeout=0.2).count(PASSWORD) is None
    finally:
        server.script.hold.set()
