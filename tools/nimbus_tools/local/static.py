"""The static files `make serve` offers beside the API: the account console and Swagger UI.

Deployed, these are static files beside the API (any static host); locally the gateway answers them
before routing, from the repository and from the npm packages `make` installs (never from a CDN):

- ``/console/...``: the account console (``console/``). A path without a file extension is one of
  the console's own pages (``/console/verify?token=...``, the local verification link), so it gets
  ``console/index.html``, whose script routes on the path.
- ``/console/staff/...``: the staff console (``console/staff/``), the same way: a path without a file
  extension (``/console/staff/users/<id>``) gets ``console/staff/index.html``, any other is a file
  below ``console/staff/``. ``/console/staff`` redirects to ``/console/staff/``.
- ``/console/vendor/qrcode.js``: the QR code library the console draws the TOTP secret with.
- ``/docs``: Swagger UI on the API's own ``GET /openapi.json`` (AdminFunction answers it, deployed
  and here alike); its assets from ``swagger-ui-dist``.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from nimbus_tools.local.events import HttpRequest, HttpResponse

CONSOLE = "/console"
STAFF_CONSOLE = f"{CONSOLE}/staff"
DOCS = "/docs"
QR_LIBRARY = Path("qrcode-generator", "dist", "qrcode.js")

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
    """Where the static files come from: the repository root (``console/``, ``docs/``) and its
    ``node_modules``."""

    root: Path

    @property
    def node_modules(self) -> Path:
        """The npm packages installed from package-lock.json."""
        return self.root / "node_modules"

    def answer(self, request: HttpRequest) -> HttpResponse | None:
        """The response for a static path, or None when the request is for the API."""
        if request.method not in ("GET", "HEAD"):
            return None
        path = request.raw_path
        exact: dict[str, Callable[[], HttpResponse]] = {
            DOCS: lambda: _page(_SWAGGER_PAGE.encode(), "text/html; charset=utf-8"),
            f"{DOCS}/init.js": lambda: _page(_SWAGGER_INIT.encode(), "text/javascript; charset=utf-8"),
            CONSOLE: lambda: HttpResponse(308, [("location", f"{CONSOLE}/")], b""),
            f"{CONSOLE}/vendor/qrcode.js": lambda: self._file(self.node_modules / QR_LIBRARY),
            STAFF_CONSOLE: lambda: HttpResponse(308, [("location", f"{STAFF_CONSOLE}/")], b""),
        }
        if path in exact:
            return exact[path]()
        if path.startswith(f"{DOCS}/assets/"):
            return self._under(self.node_modules / "swagger-ui-dist", path.removeprefix(f"{DOCS}/assets/"))
        for prefix, directory in ((STAFF_CONSOLE, ("console", "staff")), (CONSOLE, ("console",))):
            if path.startswith(f"{prefix}/"):
                relative = path.removeprefix(f"{prefix}/")
                folder = self.root.joinpath(*directory)
                if "." not in PurePosixPath(unquote(relative)).name:  # one of that console's pages
                    return self._file(folder / "index.html")
                return self._under(folder, relative)
        return None

    def _under(self, directory: Path, relative: str) -> HttpResponse:
        """A file below ``directory``; anything that would leave it is 404."""
        parts = PurePosixPath(unquote(relative)).parts
        if not parts or any(part in ("..", ".", "/") or "\\" in part or "\0" in part for part in parts):
            return _not_found()  # "/" is a leading slash (//etc/...), which joinpath would make absolute
        file = directory.joinpath(*parts)
        if not file.resolve().is_relative_to(directory.resolve()):  # nor through a symbolic link
            return _not_found()
        return self._file(file)

    @staticmethod
    def _file(file: Path) -> HttpResponse:
        if not file.is_file():
            return _not_found()
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/json", "text/javascript"):
            kind += "; charset=utf-8"
        return _page(file.read_bytes(), kind)


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


def _not_found() -> HttpResponse:
    return HttpResponse(404, [("content-type", "application/json")], b'{"message":"Not Found"}')
