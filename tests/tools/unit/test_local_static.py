"""The static files `make serve` offers beside the API (nimbus_tools.local.static): the console's
pages and files, its vendored QR library, and nothing outside those directories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nimbus_core.domain.scopes import Scope
from nimbus_tools.local.events import HttpRequest, HttpResponse
from nimbus_tools.local.static import StaticSite, console_url

REPO = Path(__file__).resolve().parents[3]
INDEX = b"<!doctype html><title>console</title>"
STAFF_INDEX = b"<!doctype html><title>staff console</title>"
SECRET = b"never served"


@pytest.fixture
def site(tmp_path: Path) -> StaticSite:
    """A repository root with a console, the QR library, and a file beside them that must stay private."""
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "index.html").write_bytes(INDEX)
    (tmp_path / "console" / "app.js").write_bytes(b"console.log(1);")
    (tmp_path / "console" / "staff").mkdir()
    (tmp_path / "console" / "staff" / "index.html").write_bytes(STAFF_INDEX)
    (tmp_path / "console" / "staff" / "staff.js").write_bytes(b"console.log(2);")
    library = tmp_path / "node_modules" / "qrcode-generator" / "dist"
    library.mkdir(parents=True)
    (library / "qrcode.js").write_bytes(b"var qrcode = function() {};")
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (tmp_path / "console" / "linked.txt").symlink_to(tmp_path / "secret.txt")
    return StaticSite(tmp_path)


def _get(site: StaticSite, target: str, method: str = "GET") -> HttpResponse | None:
    return site.answer(HttpRequest(method=method, target=target, headers=[], body=b"", source_ip="127.0.0.1"))


def _served(site: StaticSite, target: str) -> HttpResponse:
    response = _get(site, target)
    assert response is not None, f"{target} went to the API"
    return response


def _header(response: HttpResponse, name: str) -> str:
    return next(value for key, value in response.headers if key == name)


@pytest.mark.parametrize(
    "target",
    ["/console/", "/console/verify?token=abc", "/console/sessions", "/console/security/", "/console/a/b"],
)
def test_a_console_path_without_a_file_extension_gets_the_console_page(site: StaticSite, target: str) -> None:
    response = _served(site, target)
    assert (response.status, response.body) == (200, INDEX)
    assert _header(response, "content-type") == "text/html; charset=utf-8"
    assert _header(response, "cache-control") == "no-store"
    assert _header(response, "referrer-policy") == "no-referrer"  # the verification token is in the URL
    assert "script-src 'self';" in _header(response, "content-security-policy")  # no inline script


@pytest.mark.parametrize(
    "target",
    [
        "/console/staff/",
        "/console/staff/login",
        "/console/staff/users?offset=50",
        "/console/staff/users/abc_-1",
    ],
)
def test_a_staff_console_path_without_a_file_extension_gets_the_staff_page(
    site: StaticSite, target: str
) -> None:
    response = _served(site, target)
    assert (response.status, response.body) == (200, STAFF_INDEX)
    assert _header(response, "content-type") == "text/html; charset=utf-8"
    assert _header(response, "cache-control") == "no-store"
    assert _header(response, "referrer-policy") == "no-referrer"
    # The same policy as the account console's pages: no inline script, the API on this origin only.
    assert _header(response, "content-security-policy") == _header(
        _served(site, "/console/"), "content-security-policy"
    )


def test_the_staff_console_files_come_from_its_own_directory(site: StaticSite) -> None:
    response = _served(site, "/console/staff/staff.js")
    assert (response.status, response.body) == (200, b"console.log(2);")
    assert _header(response, "content-type") == "text/javascript; charset=utf-8"
    assert _get(site, "/console/staff/app.js") is None  # not the account console's files
    assert _served(site, "/console/app.js").body == b"console.log(1);"  # which stay where they were
    assert _get(site, "/console/staff/../secret.txt") is None
    assert _get(site, "/console/staff/%2e%2e/%2e%2e/secret.txt") is None


def test_staff_console_without_a_slash_redirects_to_it(site: StaticSite) -> None:
    response = _served(site, "/console/staff")
    assert response.status == 308
    assert ("location", "/console/staff/") in response.headers
    assert _served(site, "/console/staffing").body == INDEX  # another account-console path


def test_the_real_staff_console_is_served() -> None:
    site = StaticSite(REPO)
    page = _served(site, "/console/staff/users")
    assert page.status == 200
    assert b"/console/staff/staff.js" in page.body
    assert _served(site, "/console/staff/staff.js").status == 200


def test_console_without_a_slash_redirects_to_the_console() -> None:
    response = _served(StaticSite(REPO), "/console")
    assert response.status == 308
    assert ("location", "/console/") in response.headers


def test_the_console_files_are_served_with_their_types(site: StaticSite) -> None:
    response = _served(site, "/console/app.js")
    assert (response.status, response.body) == (200, b"console.log(1);")
    assert _header(response, "content-type") == "text/javascript; charset=utf-8"
    assert _get(site, "/console/missing.css") is None  # the API's JSON 404 answers it


def test_the_qr_library_comes_from_the_installed_npm_package(site: StaticSite) -> None:
    response = _served(site, "/console/vendor/qrcode.js")
    assert (response.status, response.body) == (200, b"var qrcode = function() {};")
    assert _header(response, "content-type") == "text/javascript; charset=utf-8"


def test_the_real_qr_library_path_exists_after_npm_ci() -> None:
    if not (REPO / "node_modules" / ".installed").exists():
        pytest.fail("node_modules is missing: `make node_modules/.installed` installs it (make test does)")
    response = _served(StaticSite(REPO), "/console/vendor/qrcode.js")
    assert response.status == 200
    assert b"qrcode" in response.body


@pytest.mark.parametrize(
    "target",
    [
        "/console/../secret.txt",
        "/console/%2e%2e/secret.txt",
        "/console/%2E%2E/secret",
        "/console/../x",
        "/console/..",
        "/console/.%2e/x",
        "/console/%00",
        "/console/..%2fsecret.txt",
        "/console/%2e%2e%2fsecret.txt",
        "/console/..%5csecret.txt",
        "/console//etc/hostname.txt",
        "/console/%2fetc/hostname.txt",
        "/console/linked.txt",
        "/console/app.js%00.txt",
        "/docs/assets/../../secret.txt",
        "/docs/assets/%2e%2e/%2e%2e/secret.txt",
        "/docs/assets/",
    ],
)
def test_a_path_leaving_its_directory_is_no_page_and_no_file(site: StaticSite, target: str) -> None:
    # The API answers it, with the contract's JSON 404 (tests/tools/integration/test_local_http_server).
    assert _get(site, target) is None


def test_other_methods_and_paths_go_to_the_api(site: StaticSite) -> None:
    assert _get(site, "/console/", method="POST") is None
    assert _get(site, "/users/me") is None
    assert _get(site, "/consoles") is None


def test_the_console_url_is_on_localhost_for_webauthn() -> None:
    assert console_url(3000) == "http://localhost:3000/console"


def test_the_console_knows_every_scope_by_its_bit() -> None:
    """console/common.js names scopes for the API-key form and the sessions lists of both
    consoles: the same bits as the API."""
    script = (REPO / "console" / "common.js").read_text()
    block = re.search(r"const SCOPES = \{(.*?)\};", script, re.DOTALL)
    assert block is not None
    named = {name: int(bit) for name, bit in re.findall(r"(\w+): (\d+),", block.group(1))}
    assert named == {scope.name: scope.value for scope in Scope}


def test_both_consoles_load_the_shared_script_first() -> None:
    """Both pages load console/common.js (served from /console/ to the staff page too) before
    their own script, which keeps no copy of it."""
    site = StaticSite(REPO)
    assert _served(site, "/console/common.js").status == 200
    shared = '<script src="/console/common.js" defer></script>'
    pages = (("/console/", "/console/app.js"), ("/console/staff/users", "/console/staff/staff.js"))
    for page_path, script_path in pages:
        page = _served(site, page_path).body.decode()
        assert shared in page
        assert page.index(shared) < page.index(f'<script src="{script_path}" defer></script>')
        script = (REPO / script_path.removeprefix("/")).read_text()
        assert "const SCOPES" not in script
        assert "class ApiError" not in script
