"""The static files `make serve` offers beside the API (consoles, QR code library, Swagger UI at
``/docs``), from the repository and npm packages, never a CDN (docs/development.md)."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from nimbus_tools.local.events import HttpRequest, HttpResponse

CONSOLE = "/console"
STAFF_CONSOLE = f"{CONSOLE}/staff"
DOCS = "/docs"
QR_LIBRARY = Path("qrcode-generator", "dist", "qrcode.js")
# What no decoded segment of a file's path may hold: a slash or backslash (an encoded separator),
# a NUL or any other control character.
_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")

# Our own pages: scripts and styles from this server only; the API is the same origin.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_SWAGGER_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Nimbus API (local)</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""

_SWAGGER_INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  persistAuthorization: true,
});
"""


def console_url(port: int) -> str:
    """The console's address on the local API at ``port``.

    The host is ``localhost``, not the IP the server binds: the local WebAuthn relying party is
    ``localhost`` (browsers refuse an IP address), so the console works in full only there.
    """
    return f"http://localhost:{port}{CONSOLE}"


@dataclass(frozen=True)
class StaticSite:
    """Where the static files come from: the repository root and its ``node_modules``."""

    root: Path

    def answer(self, request: HttpRequest) -> HttpResponse | None:
        """The response for a static page or file, or None: the API then answers (its ``$default``
        the contract's JSON 404, as for every ``/console`` path deployed)."""
        if request.method not in ("GET", "HEAD"):
            return None
        path = request.raw_path
        exact: dict[str, Callable[[], HttpResponse | None]] = {
            DOCS: lambda: _page(_SWAGGER_PAGE.encode(), "text/html; charset=utf-8"),
            f"{DOCS}/init.js": lambda: _page(_SWAGGER_INIT.encode(), "text/javascript; charset=utf-8"),
            CONSOLE: lambda: HttpResponse(308, [("location", f"{CONSOLE}/")], b""),
            f"{CONSOLE}/vendor/qrcode.js": lambda: self._file(self.root / "node_modules" / QR_LIBRARY),
            STAFF_CONSOLE: lambda: HttpResponse(308, [("location", f"{STAFF_CONSOLE}/")], b""),
        }
        if path in exact:
            return exact[path]()
        if path.startswith(f"{DOCS}/assets/"):
            names = plain_names(path.removeprefix(f"{DOCS}/assets/"))
            return self._file_below(self.root / "node_modules" / "swagger-ui-dist", names)
        return self._console(path)

    def _console(self, path: str) -> HttpResponse | None:
        for prefix, directory in ((STAFF_CONSOLE, ("console", "staff")), (CONSOLE, ("console",))):
            if path.startswith(f"{prefix}/"):
                folder = self.root.joinpath(*directory)
                names = plain_names(path.removeprefix(f"{prefix}/"))
                if names is None:
                    return None  # a dot segment, an encoded slash, a NUL...: no page and no file
                if not names or "." not in names[-1]:  # one of that console's pages
                    return self._file(folder / "index.html")
                return self._file_below(folder, names)
        return None

    def _file_below(self, directory: Path, names: list[str] | None) -> HttpResponse | None:
        # No names (or no plain ones) is no file, and neither is one outside through a symbolic link.
        file = directory.joinpath(*names or [])
        if not names or not file.resolve().is_relative_to(directory.resolve()):
            return None
        return self._file(file)

    @staticmethod
    def _file(file: Path) -> HttpResponse | None:
        if not file.is_file():
            return None
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/json", "text/javascript"):
            kind += "; charset=utf-8"
        return _page(file.read_bytes(), kind)


def plain_names(relative: str) -> list[str] | None:
    """The decoded segments of a still percent-encoded relative path (``a/b.js`` -> ``[a, b.js]``;
    a trailing slash is tolerated), or None when one is not a plain file name: empty, ``.`` or
    ``..`` in any spelling, or holding an encoded slash or backslash or a control character.
    Decoded after splitting, ``..%2f..%2fpyproject.toml`` stays one segment, and is refused."""
    segments = relative.split("/")
    names = [unquote(segment) for segment in segments[: -1 if segments[-1] == "" else None]]
    if any(name in ("", ".", "..") or _UNSAFE.search(name) for name in names):
        return None
    return names


def _page(body: bytes, content_type: str) -> HttpResponse:
    headers = [
        ("content-type", content_type),
        ("cache-control", "no-store"),
        # The verification token is in the console's URL: never pass it on.
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("content-security-policy", _CSP),
    ]
    return HttpResponse(200, headers, body)
