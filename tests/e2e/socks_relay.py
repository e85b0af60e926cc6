"""A tiny SOCKS5 relay that connects from a chosen loopback address, so a browser can be "another
client" as the other end-to-end tests are (the API's rate limits count per source IP, and Chromium
cannot choose its source address itself).

Only what Chromium sends is supported: no authentication, CONNECT to a host name or IPv4 address.
Bytes are piped unchanged both ways, so the browser's HTTP reaches the local API as it sent it.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator

_VERSION = 5
_NO_AUTH = 0
_CONNECT = 1
_IPV4, _DOMAIN = 1, 3


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("client closed during the SOCKS handshake")
        data += chunk
    return data


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            target.sendall(chunk)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


class _Handler(socketserver.BaseRequestHandler):
    server: _RelayServer

    def handle(self) -> None:
        client: socket.socket = self.request
        version, methods = _read(client, 2)
        _read(client, methods)
        client.sendall(bytes([_VERSION, _NO_AUTH]))
        version, command, _, kind = _read(client, 4)
        if kind == _DOMAIN:
            host = _read(client, _read(client, 1)[0]).decode()
        elif kind == _IPV4:
            host = socket.inet_ntoa(_read(client, 4))
        else:
            client.sendall(bytes([_VERSION, 8, 0, _IPV4, 0, 0, 0, 0, 0, 0]))  # address type unsupported
            return
        (port,) = struct.unpack("!H", _read(client, 2))
        if version != _VERSION or command != _CONNECT:
            client.sendall(bytes([_VERSION, 7, 0, _IPV4, 0, 0, 0, 0, 0, 0]))  # command unsupported
            return
        # "localhost" is the API's host for WebAuthn; it listens on IPv4 loopback.
        target_host = "127.0.0.1" if host == "localhost" else host
        try:
            upstream = socket.create_connection(
                (target_host, port), timeout=30, source_address=(self.server.source_ip, 0)
            )
        except OSError:
            client.sendall(bytes([_VERSION, 5, 0, _IPV4, 0, 0, 0, 0, 0, 0]))  # connection refused
            return
        upstream.settimeout(None)
        with upstream:
            client.sendall(bytes([_VERSION, 0, 0, _IPV4, 0, 0, 0, 0, 0, 0]))
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join(timeout=30)


class _RelayServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, source_ip: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.source_ip = source_ip


@contextlib.contextmanager
def socks_relay(source_ip: str) -> Iterator[str]:
    """Run a relay whose connections leave from ``source_ip``; yields its ``socks5://`` URL."""
    server = _RelayServer(source_ip)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"socks5://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
