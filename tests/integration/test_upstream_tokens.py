"""Session tokens an upstream deployment issued (CONTRACT section 15), through the handlers on moto:
with the upstream certificate configured, an ES256 JWT with a valid signature, ``iss`` and ``exp``
naming an imported session authenticates exactly like a Nimbus token (one round trip; the session's
scopes, revocation, expiry and usedAt); anything else is an invalid session, and without the
certificate every JWT is."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from nimbus_core.adapters import clients, container
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.domain.models import Session
from nimbus_core.platform.clock import iso
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions.upstream_tokens import UPSTREAM_SECRET_HASH, parse_upstream_token
from tests.integration.conftest import NOW, PARAMS, Api, Clock, Stack
from tests.integration.test_mail import record_calls
from tests.migration.upstream import UpstreamSigner
from tests.samples import sample_user

# Every expiry here is measured from the frozen NOW.
pytestmark = pytest.mark.usefixtures("frozen")

UPSTREAM_ID = "1700000000000"  # upstream's ids are decimal strings, kept by the import
IAT = int(NOW) - 3600
INVALID = (401, "INVALID_SESSION_ERROR")


@pytest.fixture
def signer() -> UpstreamSigner:
    return UpstreamSigner(rp_id=PARAMS["WebAuthnRpId"])


@pytest.fixture
def configured(stack: Stack, signer: UpstreamSigner, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The deployment given the upstream certificate (template parameter UpstreamJwtCertificate)."""
    monkeypatch.setenv("UPSTREAM_JWT_CERTIFICATE", signer.certificate_pem)
    get_settings.cache_clear()
    container.reset()
    yield
    get_settings.cache_clear()
    container.reset()


def _imported(
    stack: Stack, *, iat: int = IAT, exp: int | None = None, flags: int | None = None, generation: int = 0
) -> Session:
    """An imported user and one of their upstream sessions, written as the import writes them."""
    deps = container.production_deps()
    if deps.users.get(UPSTREAM_ID) is None:
        DynamoTransactor(clients.dynamodb()).commit(
            deps.users.create_ops(sample_user(UPSTREAM_ID, "olduser"))
        )
    session = Session(
        user_id=UPSTREAM_ID,
        id=str(iat),  # upstream's own id, as the import keeps it
        secret_hash=UPSTREAM_SECRET_HASH,
        name="Firefox on Linux",
        exp=exp if exp is not None else int(NOW) + 86400,
        created_at=iso(iat),
        updated_at=iso(iat),
        used_at=iso(iat),
        permission_flags=flags,
        generation=generation,
    )
    DynamoTransactor(clients.dynamodb()).commit([deps.sessions.put_op(session)])
    return session


def _me(api: Api, token: str) -> tuple[int, Any]:
    reply = api.call("GET", "/users/me", token=token)
    return reply.status, reply.body if reply.status == 200 else reply.body["code"]


@pytest.mark.usefixtures("configured")
def test_an_upstream_token_authenticates_its_imported_session_in_one_round_trip(
    api: Api, stack: Stack, signer: UpstreamSigner, frozen: Clock
) -> None:
    _imported(stack)
    token = signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400)
    calls = record_calls("dynamodb", clients.dynamodb())
    frozen.now = NOW

    status, body = _me(api, token)

    assert status == 200
    assert (body["id"], body["username"]) == (UPSTREAM_ID, "olduser")
    assert [op for op, _ in calls] == ["BatchGetItem", "UpdateItem"]  # the read, and usedAt (once)
    calls.clear()
    assert _me(api, f"Bearer {token}")[0] == 200
    assert [op for op, _ in calls] == ["BatchGetItem"]
    listed = api.call("GET", "/users/me/sessions/me", token=token).body
    assert (listed["id"], listed["usedAt"]) == (str(IAT), iso(NOW))


@pytest.mark.usefixtures("configured")
def test_an_imported_scoped_session_keeps_its_scopes(api: Api, stack: Stack, signer: UpstreamSigner) -> None:
    _imported(stack, flags=4)  # ACCOUNT_READ
    token = signer.token(UPSTREAM_ID, IAT, IAT + 86400 * 30)

    assert _me(api, token)[0] == 200
    refused = api.call("GET", "/users/me/sessions", token=token)
    assert (refused.status, refused.body["code"]) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")


@pytest.mark.usefixtures("configured")
def test_revocation_and_the_sessions_own_expiry_hold_for_upstream_tokens(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    _imported(stack)
    _imported(stack, iat=IAT + 1, exp=int(NOW) - 1)  # the imported session ended before the token
    token = signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400)
    expired_session = signer.token(UPSTREAM_ID, IAT + 1, IAT + 7 * 86400)

    assert _me(api, expired_session) == INVALID
    revoked = api.call("DELETE", "/users/me/sessions/me", token=token)
    assert revoked.status == 200, revoked.body
    assert _me(api, token) == INVALID


@pytest.mark.usefixtures("configured")
def test_a_client_that_kept_upstreams_session_id_finds_the_session_under_it(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    """CONTRACT 15: an imported session keeps upstream's id, its token's ``iat`` in decimal."""
    _imported(stack)
    _imported(stack, iat=IAT - 60)
    _imported(stack, iat=IAT - 120)
    token = signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400)
    sid = str(IAT)

    listed = api.call("GET", "/users/me/sessions", token=token).body
    found = api.call("GET", f"/users/me/sessions/{sid}", token=token)
    renamed = api.call("PATCH", f"/users/me/sessions/{sid}", {"name": "Old laptop"}, token=token)

    assert [s["id"] for s in listed["items"]] == [sid, str(IAT - 60), str(IAT - 120)]  # newest first
    assert (found.status, found.body["id"]) == (200, sid)
    assert (renamed.status, renamed.body["id"], renamed.body["name"]) == (200, sid, "Old laptop")
    assert api.call("GET", "/users/me/sessions/me", token=token).body["id"] == sid
    assert api.call("DELETE", f"/users/me/sessions/{IAT - 60}", token=token).status == 200
    assert api.call("GET", f"/users/me/sessions/{IAT - 60}", token=token).status == 404
    several = api.call("DELETE", "/users/me/sessions", {"ids": [str(IAT - 120), "0120"]}, token=token)
    assert (several.status, several.body["count"]) == (200, 1)


# The order of P-256's group: an ECDSA signature (r, s) also verifies as (r, n - s).
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _both_spellings(token: str) -> tuple[str, str]:
    """The low-S and the high-S spelling of one ES256 token (its signature's s and n - s)."""
    data, _, signature = token.rpartition(".")
    raw = jwt.utils.base64url_decode(signature.encode())
    r, s = raw[:32], int.from_bytes(raw[32:])
    other = P256_ORDER - s
    spelled = {
        value: f"{data}.{jwt.utils.base64url_encode(r + value.to_bytes(32)).decode()}" for value in (s, other)
    }
    return spelled[min(s, other)], spelled[max(s, other)]


@pytest.mark.usefixtures("configured")
def test_both_spellings_of_an_upstream_signature_are_one_token_and_one_session(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    """Upstream's signer (jose on Node's WebCrypto, OpenSSL underneath) leaves S as it comes: about
    half of the tokens clients hold are high-S, so both spellings are accepted (docs/security.md).
    They must be one token: nothing is keyed on the signature's bytes."""
    _imported(stack)
    low, high = _both_spellings(signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400))
    assert low != high
    # What the rest of Nimbus sees of a token: the same, whichever spelling came.
    settings = get_settings()
    assert parse_upstream_token(low, settings, NOW) == parse_upstream_token(high, settings, NOW) is not None

    seen = {
        spelling: api.call("GET", "/users/me/sessions/me", token=spelling).body for spelling in (low, high)
    }

    assert seen[low] == seen[high]
    assert seen[low]["id"] == str(IAT)
    assert api.call("GET", "/users/me/sessions", token=high).body["count"] == 1  # one session, not two
    assert api.call("DELETE", "/users/me/sessions/me", token=low).status == 200
    assert (_me(api, low), _me(api, high)) == (INVALID, INVALID)


def _forgeries(signer: UpstreamSigner) -> dict[str, str]:
    other = ec.generate_private_key(ec.SECP256R1())
    good = {"sub": UPSTREAM_ID, "iat": IAT, "exp": IAT + 7 * 86400, "iss": signer.rp_id}

    def signed(claims: dict[str, Any], key: Any = None, algorithm: str = "ES256", **headers: Any) -> str:
        return jwt.encode(claims, key or signer.private_key, algorithm=algorithm, headers=headers or None)

    return {
        "another key": signed(good, other),
        "another issuer": signed({**good, "iss": "evil.example"}),
        "expired": signed({**good, "exp": int(NOW) - 10}),
        "no exp": signed({k: v for k, v in good.items() if k != "exp"}),
        "no iss": signed({k: v for k, v in good.items() if k != "iss"}),
        "a session never imported": signed({**good, "iat": IAT - 5}),
        "another user": signed({**good, "sub": "1700000000001"}),
        "sub not an id": signed({**good, "sub": "../USER#x"}),
        "sub a number": signed({**good, "sub": 1700000000000}),
        "iat a string": signed({**good, "iat": str(IAT)}),
        "alg none": _by_hand(good, "none", lambda _: b""),
        "HS256 keyed with the certificate": _by_hand(
            good,
            "HS256",
            lambda data: hmac.new(signer.certificate_pem.encode(), data, hashlib.sha256).digest(),
        ),
        "tampered payload": _tamper(signed(good)),
        "not a JWT": "eyJ.eyJ.sig",
        "huge": "e" * 5000 + ".x.y",
    }


def _by_hand(claims: dict[str, Any], algorithm: str, sign: Callable[[bytes], bytes]) -> str:
    """A token PyJWT would refuse to make: the algorithm confusions an attacker tries."""
    header = jwt.utils.base64url_encode(json.dumps({"alg": algorithm, "typ": "JWT"}).encode())
    payload = jwt.utils.base64url_encode(json.dumps(claims).encode())
    data = header + b"." + payload
    return (data + b"." + jwt.utils.base64url_encode(sign(data))).decode()


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = jwt.utils.base64url_decode(payload.encode()).replace(b"1700000000000", b"1700000000001")
    return ".".join([header, jwt.utils.base64url_encode(claims).decode(), signature])


@pytest.mark.usefixtures("configured")
def test_forged_altered_or_foreign_tokens_are_invalid_sessions(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    _imported(stack)
    outcomes = {name: _me(api, token) for name, token in _forgeries(signer).items()}

    assert outcomes == dict.fromkeys(outcomes, INVALID)


@pytest.mark.usefixtures("configured")
def test_a_nimbus_token_never_names_an_imported_session(api: Api, stack: Stack) -> None:
    session = _imported(stack)

    for secret in ("", "a" * 43, UPSTREAM_SECRET_HASH.ljust(43, "x")):
        assert _me(api, f"{UPSTREAM_ID}.{session.id}.{secret}") == INVALID


def test_without_the_certificate_every_upstream_token_is_an_invalid_session(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    _imported(stack)

    assert _me(api, signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400)) == INVALID


@pytest.mark.usefixtures("configured")
def test_an_upstream_token_counts_as_logged_in_at_register_and_login(
    api: Api, stack: Stack, signer: UpstreamSigner
) -> None:
    _imported(stack)
    token = signer.token(UPSTREAM_ID, IAT, IAT + 7 * 86400)
    body = {"username": "someone", "email": "someone@example.com", "password": "correct horse"}

    refused = api.call("POST", "/register", body, token=token)

    assert (refused.status, refused.body["code"]) == INVALID
