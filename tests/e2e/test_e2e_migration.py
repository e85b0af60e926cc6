"""Moving from upstream, end to end: a local API started with upstream's certificate, a real
PostgreSQL holding an upstream database, `nimbus import` run as an operator runs it, then the
published client library using an old scoped token and the old password as its users would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from tests.e2e.conftest import Client, new_ip
from tests.e2e.test_client_library import FLOWS, REPO
from tests.migration.conftest import postgres, upstream  # noqa: F401 (the fixtures)
from tests.migration.upstream import Upstream, UpstreamSigner

pytestmark = pytest.mark.e2e

ACCOUNT_READ = 4


@pytest.fixture(scope="module")
def signer() -> UpstreamSigner:
    return UpstreamSigner(rp_id="localhost")  # the local API's WebAuthn rp id, as upstream's must be


@pytest.fixture(scope="module")
def moved_api(tmp_path_factory: pytest.TempPathFactory, signer: UpstreamSigner) -> Iterator[LocalApiProcess]:
    """A second local API, given upstream's certificate as docs/migrate.md says:
    `UPSTREAM_JWT_CERTIFICATE=certs/jwt.crt make serve`."""
    certificate = tmp_path_factory.mktemp("upstream-certs") / "jwt.crt"
    certificate.write_text(signer.certificate_pem)
    api = start_local_api(
        state_dir=tmp_path_factory.mktemp("nimbus-moved"),
        env={"UPSTREAM_JWT_CERTIFICATE": str(certificate)},
        timeout=90,
    )
    yield api
    assert api.stop() == 0


def _nimbus(api: LocalApiProcess, *args: str) -> subprocess.CompletedProcess[str]:
    state = Path(api.state_dir) / "serve.json"
    command = [sys.executable, "-m", "nimbus_tools.cli.main", "--state", str(state), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _library_self(api: LocalApiProcess, token: str) -> dict[str, object]:
    node = shutil.which("node")
    assert node is not None, "Node.js is not on PATH: `make test` installs Debian's nodejs"
    payload = json.dumps({"api": api.api_url, "ip": new_ip(), "session": token})
    done = subprocess.run(
        [node, str(FLOWS), "self", payload], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    step: dict[str, object] = json.loads(done.stdout.splitlines()[0])
    return step


def test_an_upstream_account_moves_with_its_password_and_its_tools_old_scoped_token(
    moved_api: LocalApiProcess,
    upstream: Upstream,  # noqa: F811
    signer: UpstreamSigner,
) -> None:
    user = upstream.add_user("uploader_one")
    token, _ = upstream.add_session(user, signer, name="ShareX", permission_flags=ACCOUNT_READ)

    imported = _nimbus(moved_api, "import", upstream.url, "--json")

    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert (report["imported"]["users"], report["imported"]["sessions"], report["skipped"]) == (1, 1, [])
    seen = _library_self(moved_api, token)
    assert seen["ok"] is True, seen
    assert seen["detail"]["result"]["id"] == user.id  # type: ignore[index]
    client = Client(moved_api)
    refused = client.call("GET", "/users/me/sessions", token=token)
    assert (refused.status, refused.body["code"]) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert client.login("uploader_one", "correct horse", ip=new_ip()).status == 201
    again = json.loads(_nimbus(moved_api, "import", upstream.url, "--json").stdout)
    assert (again["unchanged"]["users"], again["imported"].get("users", 0)) == (1, 0)
