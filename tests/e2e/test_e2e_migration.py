"""Moving from upstream, end to end: a local API started with upstream's certificate, a real
PostgreSQL holding an upstream database, `nimbus import` run as an operator runs it, then the
published client library using an old scoped token and the old password as its users would, and a
login through each second factor upstream made (its TOTP app, a backup code, a security key) and
with its old session token."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from tests import totp_reference
from tests.api_client import Reply, new_ip
from tests.e2e.conftest import Client
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
        test_password_hashing=True,
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


def _challenged(client: Client, username: str) -> dict[str, Any]:
    """A login with the right password: the second-factor challenge it answers with."""
    reply = client.login(username, "correct horse", ip=new_ip())
    assert (reply.status, reply.body["code"]) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"), reply.body
    assert reply.body["types"] == ["totp", "webauthn", "backup"]
    challenge: dict[str, Any] = reply.body
    return challenge


def _answer(client: Client, challenge: dict[str, Any], **answer: object) -> Reply:
    body = {"2fa": {"token": challenge["token"], **answer}}
    return client.call("POST", "/login", body, ip=new_ip())


def test_an_upstream_users_app_backup_code_security_key_and_session_token_each_sign_in_after_the_move(
    moved_api: LocalApiProcess,
    upstream: Upstream,  # noqa: F811
    signer: UpstreamSigner,
) -> None:
    user = upstream.add_user("factor_owner")
    _, secret = upstream.add_totp(user)
    codes = upstream.add_backup_codes(user)
    _, key = upstream.add_webauthn(user)
    token, _ = upstream.add_session(user, signer, name="Firefox on Linux")  # a browser session
    assert len(secret) == 16  # upstream's own TOTP secret: an 80-bit key

    imported = _nimbus(moved_api, "import", upstream.url, "--json")

    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["skipped"] == []
    client = Client(moved_api)
    me = client.call("GET", "/users/me", token=token)
    assert (me.status, me.body.get("id")) == (200, user.id), me.body
    by_app = _answer(
        client,
        _challenged(client, "factor_owner"),
        type="totp",
        code=totp_reference.totp(secret, time.time()),
    )
    assert by_app.status == 201, by_app.body
    by_code = _answer(client, _challenged(client, "factor_owner"), type="backup", code=codes[0])
    assert by_code.status == 201, by_code.body
    keyed = _challenged(client, "factor_owner")
    response = key.get(keyed["challenge"], origin=f"http://localhost:{client.port}")
    by_key = _answer(client, keyed, type="webauthn", response=response)
    assert by_key.status == 201, by_key.body
    for signed_in in (by_app, by_code, by_key):
        assert client.call("GET", "/users/me", token=signed_in.body["token"]).body["id"] == user.id
