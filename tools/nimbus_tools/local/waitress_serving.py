"""A waitress server run on a thread of its own, stopped cleanly: the local API's HTTP server and the
AWS emulator's both serve this way (waitress keeps connections alive and answers from a capped
thread pool; werkzeug's development server closes every connection, so each SDK call would cost a
TCP connection and a thread)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from waitress import wasyncore
from waitress.server import TcpWSGIServer


class WaitressServing:
    """Serve ``server`` (its socket bound, its channels in ``channels``) with :meth:`serve_forever`
    on a thread; :meth:`shutdown` (from another thread) stops serving, :meth:`server_close`
    releases the socket and the worker threads."""

    def __init__(self, server: TcpWSGIServer, channels: dict[int, Any]) -> None:
        self._server, self._map = server, channels
        listening: Any = server.socket
        self.port: int = listening.getsockname()[1]  # the port bound
        self._stopped = threading.Event()
        self._stopped.set()
        self._closed = False

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (blocks; run it on a thread)."""
        self._stopped.clear()
        try:
            self._server.run()
        finally:
            self._stopped.set()

    def open_connections(self) -> list[socket.socket]:
        """The accepted client sockets that are open now."""
        channels: Any = self._server.active_channels  # the stubs type it as a single channel
        return [channel.socket for channel in list(channels.values())]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop serving: close the listening socket and every connection, and wait for the loop."""
        if not self._stopped.is_set():
            self._wait_idle(timeout)
            trigger: Any = self._server.trigger  # the stubs type it as an int
            try:
                trigger.pull_trigger(self._close_all)  # runs on the serving thread
            except OSError:
                # The trigger's pipe is gone (seen once, under a full test run: EBADF): close the
                # channels from here instead; the serving loop ends once its map is empty.
                self._close_all()
            self._stopped.wait(timeout)

    def server_close(self) -> None:
        """Release the socket and stop the worker threads (after :meth:`shutdown`); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._stopped.is_set():
            self._close_all()
        self._wait_idle()
        self._server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)

    def _wait_idle(self, timeout: float = 5.0) -> None:
        """Let requests still being answered finish: closing or cancelling a channel while a worker
        thread services it makes waitress fail inside that thread (a traceback on Ctrl-C)."""
        dispatcher: Any = self._server.task_dispatcher
        deadline = time.monotonic() + timeout
        while (dispatcher.active_count or dispatcher.queue) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _close_all(self) -> None:
        wasyncore.close_all(self._map)
