"""Session tokens an upstream Cumulonimbus deployment issued (CONTRACT section 15).

Upstream's tokens are ES256 JWTs ``{sub: userId, iat, exp, iss: <its WebAuthn rp id>}``; its
``"Sessions"`` rows are keyed by ``(iat, user)``. The import stores each unexpired session under
upstream's own id (the ``iat`` in decimal, so a client that kept it finds the session) with
:data:`UPSTREAM_SECRET_HASH` in place of a secret's hash, so a token a client already holds names
its session in the same one round trip as a Nimbus token, and the session's scopes, revocation,
expiry and ``usedAt`` apply unchanged.

An ECDSA signature ``(r, s)`` also verifies as ``(r, n - s)``, and upstream's signer (jose on
WebCrypto, OpenSSL underneath) does not normalise S: about half of the tokens clients hold are
high-S, so both spellings are accepted (refusing one would sign out half the migrated users). They
are one token: what comes out is the session the claims name, and nothing anywhere is keyed on the
signature's bytes (docs/security.md).

Nimbus never issues a JWT and holds no upstream private key: it checks the signature with the
certificate the operator gives (template parameter ``UpstreamJwtCertificate``). Without one, every
JWT is an invalid session. PyJWT is imported only when such a token arrives.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from nimbus_core.platform.ids import is_id, is_session_id
from nimbus_core.sessions.tokens import SessionToken

if TYPE_CHECKING:
    from nimbus_core.platform.settings import Settings

# Stored as an imported session's secret hash. No token of ours can match it (a SHA-256 hex digest
# has 64 characters), so only an upstream token whose signature held names such a session, and an
# upstream token names nothing else.
UPSTREAM_SECRET_HASH = "upstream-jwt"
# Upstream's tokens are a few hundred characters; anything much longer is not one.
_MAX_LENGTH = 2048


def parse_upstream_token(raw: str | None, settings: Settings, now: float) -> SessionToken | None:
    """The session an ``Authorization`` header's upstream token names, if the deployment has the
    upstream certificate and the token is an ES256 JWT with a valid signature, ``iss`` (the
    deployment's WebAuthn rp id, which must be upstream's), ``exp`` in the future and the ``sub`` and
    ``iat`` that name an imported session; otherwise None (an invalid session)."""
    certificate = settings.upstream_jwt_certificate
    if not certificate or not raw or len(raw) > _MAX_LENGTH:
        return None
    value = raw.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    if value.count(".") != 2:
        return None
    import jwt

    try:
        claims: dict[str, Any] = jwt.decode(
            value,
            _public_key(certificate),
            algorithms=["ES256"],  # never the token's own choice: no "none", no HMAC with the certificate
            issuer=settings.webauthn_rp_id,
            # The times are checked below on the request's clock, as every other expiry is.
            options={"require": ["sub", "iat", "exp", "iss"], "verify_exp": False, "verify_iat": False},
        )
    except (jwt.PyJWTError, ValueError):
        return None
    user_id, iat, exp = claims["sub"], claims["iat"], claims["exp"]
    session_id = str(iat)  # upstream's "Sessions".id: iat.toString()
    named = isinstance(user_id, str) and is_id(user_id) and type(iat) is int and is_session_id(session_id)
    live = isinstance(exp, int | float) and not isinstance(exp, bool) and exp > now
    return SessionToken(user_id, session_id, "", upstream=True) if named and live else None


@cache
def _public_key(certificate_pem: str) -> Any:
    """The public key of the upstream certificate (parsed once per container)."""
    from cryptography.x509 import load_pem_x509_certificate

    return load_pem_x509_certificate(certificate_pem.encode()).public_key()
