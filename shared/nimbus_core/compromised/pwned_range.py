"""Have I Been Pwned's Pwned Passwords range API (k-anonymity): the first 5 hex characters of the
password's SHA-1 are sent, the answer lists every known suffix under that prefix (``SUFFIX:COUNT``
lines, 35 uppercase hex characters and a count), and the match is made here. With ``Add-Padding``
the answer also holds made-up suffixes counted 0, so its size says nothing of the prefix; those are
not matches.

The client never raises and never takes longer than its timeout: the request runs on a daemon
thread that the caller waits for at most ``timeout`` seconds (a socket timeout alone bounds each
read, not the name lookup or the whole answer). Anything else (an error, a non-200 answer, a body
that is not the format above, a request still running) is "unknown" (None), and the caller keeps
the shipped list's answer.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import http.client
    import ssl

HOST = "api.pwnedpasswords.com"
DEFAULT_TIMEOUT = 1.5
# A transport takes the 5-character prefix and the timeout in seconds and answers the body of a 200.
Transport = Callable[[str, float], bytes]
_LINE = re.compile(r"([0-9A-Fa-f]{35}):(\d+)")


def split_sha1(password: str) -> tuple[str, str]:
    """The uppercase hex SHA-1 of ``password``'s UTF-8 bytes: its 5-character prefix (what is sent)
    and its 35-character suffix (what is looked for in the answer)."""
    digest = hashlib.sha1(password.encode("utf-8", "surrogatepass"), usedforsecurity=False)
    hexed = digest.hexdigest().upper()
    return hexed[:5], hexed[5:]


def times_seen(body: bytes, suffix: str) -> int:
    """How often the range answer ``body`` says ``suffix`` was seen: 0 when absent or a padding
    entry (count 0). ValueError when a line of ``body`` is not ``SUFFIX:COUNT``."""
    found = 0
    for line in filter(None, map(str.strip, body.decode("ascii").splitlines())):
        match = _LINE.fullmatch(line)
        if match is None:
            raise ValueError(f"not a range answer line: {line[:60]!r}")
        if match[1].upper() == suffix:
            found = int(match[2])
    return found


class RangeAnswerError(Exception):
    """The range API answered, but not with a 200."""


class HttpsTransport:
    """The real transport: one HTTPS connection to ``HOST``, kept open between requests (a warm
    container skips the TLS handshake). A kept connection the server has closed since (idle) is
    replaced once within the same request; any other failure drops it. One request at a time: if
    an abandoned request still holds the connection, the next one fails at once rather than queue.
    """

    def __init__(self, connect: Callable[[float], http.client.HTTPConnection] | None = None) -> None:
        """A transport over connections from ``connect(timeout)`` (HTTPS to ``HOST`` by default);
        nothing is opened until the first request."""
        self._connect = connect if connect is not None else self._https
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._context: ssl.SSLContext | None = None

    def __call__(self, prefix: str, timeout: float) -> bytes:
        """GET /range/<prefix> with padding; the body of a 200, else an exception."""
        import http.client

        if not self._lock.acquire(blocking=False):
            raise TimeoutError("an earlier range request is still running")
        try:
            kept, self._connection = self._connection, None
            if kept is not None:
                try:
                    return self._ask(kept, prefix)
                except (http.client.HTTPException, OSError):
                    pass  # most likely closed by the server while idle: once more, afresh
            return self._ask(self._connect(timeout), prefix)
        finally:
            self._lock.release()

    def _https(self, timeout: float) -> http.client.HTTPConnection:
        import http.client
        import ssl

        if self._context is None:
            self._context = ssl.create_default_context()
        return http.client.HTTPSConnection(HOST, timeout=timeout, context=self._context)

    def _ask(self, connection: http.client.HTTPConnection, prefix: str) -> bytes:
        try:
            headers = {"Add-Padding": "true", "User-Agent": "nimbus-password-check"}
            connection.request("GET", f"/range/{prefix}", headers=headers)
            response = connection.getresponse()
            body = response.read()
        except BaseException:
            connection.close()
            raise
        if response.status != 200:
            connection.close()
            raise RangeAnswerError(f"range API answered {response.status}")
        self._connection = connection
        return body


class PwnedRange:
    """A Have I Been Pwned range client: ``count`` asks how often a password was seen in breaches."""

    def __init__(self, transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A client over ``transport`` (the real HTTPS one by default) that waits at most
        ``timeout`` seconds for an answer."""
        self.transport: Transport = transport if transport is not None else HttpsTransport()
        self.timeout = timeout

    def count(self, password: str) -> int | None:
        """How often ``password`` was seen in breaches (0: never), or None when that could not be
        learnt within the timeout (any failure). Only the SHA-1's first 5 hex characters leave."""
        prefix, suffix = split_sha1(password)
        answer: list[int | None] = []

        def ask() -> None:
            try:
                answer.append(times_seen(self.transport(prefix, self.timeout), suffix))
            except Exception:  # any failure is "unknown": the shipped list's answer stands
                answer.append(None)

        worker = threading.Thread(target=ask, name="pwned-range", daemon=True)
        try:
            worker.start()
        except RuntimeError:  # no thread to be had (the process's limit): unknown, as any failure
            return None
        worker.join(self.timeout)
        return answer[0] if answer else None
