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
        # Once shutting down, a serving thread that has not begun yet never begins: else it would
        # poll channels closed from the caller's thread, and close their descriptor numbers again
        # once reused (another server's), the EBADF a stopped-at-once server left behind.
        self._closing = False
        self._guard = threading.Lock()

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (blocks; run it on a thread)."""
        with self._guard:
            if self._closing:
                return
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
        with self._guard:
            self._closing = True
            serving = not self._stopped.is_set()
        if serving:
            self._wait_idle(timeout)
            trigger: Any = self._server.trigger  # the stubs type it as an int
            # The close runs on the serving thread, which an answer's own wake-up may have woken
            # already: it could then close the trigger while pull_trigger is still writing this
            # wake-up to it (EBADF, or a byte in whatever reused the descriptor). It waits until
            # that write is done.
            written = threading.Event()

            def close_once_written() -> None:
                written.wait(timeout)
                self._close_all()

            try:
                trigger.pull_trigger(close_once_written)
            finally:
                written.set()
            self._stopped.wait(timeout)

    def server_close(self) -> None:
        """Release the socket and stop the worker threads (after :meth:`shutdown`); idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._guard:
            self._closing = True
            stopped = self._stopped.is_set()
        if stopped:
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
