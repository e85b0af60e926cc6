"""A software WebAuthn authenticator and browser: real keys, real signatures, the JSON browsers send.

``SoftwareAuthenticator.create(options, origin=...)`` answers PublicKeyCredentialCreationOptions (as
``nimbus_core.factors.webauthn_registration.registration_options`` returns them) with what
``PublicKeyCredential.toJSON()`` gives for ``navigator.credentials.create``: a CBOR attestation object in
the "none" format whose authData carries the rp id hash, flags, counter, AAGUID, credential id and COSE
public key. ``get(options, origin=...)`` answers request options with an assertion signed over ``authData
|| SHA-256(clientDataJSON)`` and a counter that grows by one per assertion. Keyword arguments make it
misbehave on purpose: another origin or rp id, no user verification, an old counter, a tampered signature,
another credential id.

Like a browser, it refuses options it would refuse (its algorithm not offered, its credential excluded, or
not among allowCredentials) with :class:`AuthenticatorRefusedError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Literal

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

Algorithm = Literal["ES256", "EdDSA", "RS256"]
_COSE_ALG = {"ES256": -7, "EdDSA": -8, "RS256": -257}

FLAG_UP = 0x01
FLAG_UV = 0x04
FLAG_AT = 0x40

# A made-up authenticator model, so tests can tell it from the all-zero AAGUID of anonymised ones.
TEST_AAGUID = bytes.fromhex("6e696d62757320736f667477617265ff")


class AuthenticatorRefusedError(Exception):
    """What a browser would reject with NotAllowedError, InvalidStateError or NotSupportedError."""


def b64url(data: bytes) -> str:
    """Unpadded base64url, as WebAuthn's JSON forms carry binary values."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    """The inverse of :func:`b64url`."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftwareAuthenticator:
    """One credential on one authenticator: its private key, id, counter and user handle."""

    def __init__(
        self,
        *,
        algorithm: Algorithm = "ES256",
        credential_id: bytes | None = None,
        aaguid: bytes = TEST_AAGUID,
        transports: tuple[str, ...] = ("usb", "nfc"),
        counter: bool = True,
        sign_count: int = 0,
    ) -> None:
        """``counter=False`` behaves like synced passkeys, whose signature counter is always 0."""
        self.algorithm: Algorithm = algorithm
        self.private_key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey
        if algorithm == "ES256":
            self.private_key = ec.generate_private_key(ec.SECP256R1())
        elif algorithm == "EdDSA":
            self.private_key = ed25519.Ed25519PrivateKey.generate()
        else:
            self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.credential_id = credential_id if credential_id is not None else os.urandom(32)
        self.aaguid = aaguid
        self.transports = transports
        self.counter = counter
        self.sign_count = sign_count
        self.user_handle: bytes | None = None
        self.rp_id: str | None = None

    # -- the public key as the relying party stores it --------------------------------------------

    def cose_public_key(self) -> bytes:
        """The credential public key as a COSE_Key (RFC 9053), CBOR-encoded."""
        key = self.private_key.public_key()
        alg = _COSE_ALG[self.algorithm]
        if isinstance(key, ec.EllipticCurvePublicKey):
            numbers = key.public_numbers()
            cose: dict[int, Any] = {
                1: 2,  # kty: EC2
                3: alg,
                -1: 1,  # crv: P-256
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        elif isinstance(key, ed25519.Ed25519PublicKey):
            cose = {1: 1, 3: alg, -1: 6, -2: key.public_bytes_raw()}  # kty OKP, crv Ed25519
        else:
            numbers_rsa = key.public_numbers()
            n = numbers_rsa.n.to_bytes((numbers_rsa.n.bit_length() + 7) // 8, "big")
            e = numbers_rsa.e.to_bytes((numbers_rsa.e.bit_length() + 7) // 8, "big")
            cose = {1: 3, 3: alg, -1: n, -2: e}  # kty RSA
        return cbor2.dumps(cose)

    def spki_public_key(self) -> bytes:
        """The public key as DER SubjectPublicKeyInfo (the L3 ``getPublicKey()`` the browser adds)."""
        return self.private_key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)

    # -- navigator.credentials.create ---------------------------------------------------------------

    def create(
        self,
        options: Mapping[str, Any],
        *,
        origin: str,
        rp_id: str | None = None,
        user_present: bool = True,
        user_verified: bool = True,
        challenge: str | None = None,
        client_data_type: str = "webauthn.create",
        attestation: Literal["none", "packed"] = "none",
        discoverable: bool | None = True,
    ) -> dict[str, Any]:
        """The JSON of the PublicKeyCredential a browser returns for these creation options.

        ``attestation="packed"`` gives a self attestation (signed with the credential key, no
        certificate), which browsers pass through even when the relying party asked for "none".
        ``discoverable`` is what the browser answers to the credProps extension when it is asked
        (None: a browser that does not support it).
        """
        alg = _COSE_ALG[self.algorithm]
        if alg not in [param.get("alg") for param in options["pubKeyCredParams"]]:
            raise AuthenticatorRefusedError(f"NotSupportedError: {self.algorithm} not offered")
        if any(b64url_decode(d["id"]) == self.credential_id for d in options.get("excludeCredentials", [])):
            raise AuthenticatorRefusedError("InvalidStateError: credential excluded")
        self.rp_id = rp_id if rp_id is not None else options["rp"]["id"]
        self.user_handle = b64url_decode(options["user"]["id"])
        client_data = self._client_data(client_data_type, challenge or options["challenge"], origin)
        attested = (
            self.aaguid
            + len(self.credential_id).to_bytes(2, "big")
            + self.credential_id
            + self.cose_public_key()
        )
        auth_data = self._auth_data(
            self.rp_id, user_present=user_present, user_verified=user_verified, count=self.sign_count
        )
        auth_data = auth_data[:32] + bytes([auth_data[32] | FLAG_AT]) + auth_data[33:] + attested
        statement: dict[str, Any] = {}
        if attestation == "packed":
            statement = {"alg": alg, "sig": self.sign(auth_data + hashlib.sha256(client_data).digest())}
        attestation_object = cbor2.dumps({"fmt": attestation, "attStmt": statement, "authData": auth_data})
        asked = (options.get("extensions") or {}).get("credProps") and discoverable is not None
        extensions = {"credProps": {"rk": discoverable}} if asked else {}
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "authenticatorAttachment": "cross-platform",
            "clientExtensionResults": extensions,
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation_object),
                "transports": list(self.transports),
                "authenticatorData": b64url(auth_data),
                "publicKeyAlgorithm": alg,
                "publicKey": b64url(self.spki_public_key()),
            },
        }

    # -- navigator.credentials.get ------------------------------------------------------------------

    def get(
        self,
        options: dict[str, Any],
        *,
        origin: str,
        rp_id: str | None = None,
        user_present: bool = True,
        user_verified: bool = True,
        sign_count: int | None = None,
        tamper_signature: bool = False,
        credential_id: bytes | None = None,
        challenge: str | None = None,
        client_data_type: str = "webauthn.get",
        ignore_allow_credentials: bool = False,
        cross_origin: bool = False,
        top_origin: str | None = None,
    ) -> dict[str, Any]:
        """The JSON of the PublicKeyCredential a browser returns for these request options.

        The counter grows by one per call (unless ``counter=False``); ``sign_count`` sends that value
        instead, e.g. an old one to replay. ``credential_id`` presents another id than the key's.
        ``cross_origin``: asked inside a frame of ``origin`` on a page of another origin, as a browser
        says so (``crossOrigin: true``); ``top_origin`` also names that page's origin (``topOrigin``,
        WebAuthn level 3).
        """
        allowed = [b64url_decode(d["id"]) for d in options.get("allowCredentials", [])]
        if allowed and self.credential_id not in allowed and not ignore_allow_credentials:
            raise AuthenticatorRefusedError("NotAllowedError: credential not in allowCredentials")
        if sign_count is None:
            if self.counter:
                self.sign_count += 1
            sign_count = self.sign_count if self.counter else 0
        client_data = self._client_data(
            client_data_type,
            challenge or options["challenge"],
            origin,
            cross_origin=cross_origin or top_origin is not None,
            top_origin=top_origin,
        )
        auth_data = self._auth_data(
            rp_id if rp_id is not None else options.get("rpId", self.rp_id or ""),
            user_present=user_present,
            user_verified=user_verified,
            count=sign_count,
        )
        signature = self.sign(auth_data + hashlib.sha256(client_data).digest())
        if tamper_signature:
            signature = signature[:-1] + bytes([signature[-1] ^ 0x01])
        presented = credential_id if credential_id is not None else self.credential_id
        return {
            "id": b64url(presented),
            "rawId": b64url(presented),
            "type": "public-key",
            "authenticatorAttachment": "cross-platform",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": b64url(self.user_handle) if self.user_handle is not None else None,
            },
        }

    def sign(self, data: bytes) -> bytes:
        """ECDSA-SHA256 (DER), Ed25519 or RSASSA-PKCS1-v1_5-SHA256 over ``data`` with the credential key."""
        key = self.private_key
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key.sign(data, ec.ECDSA(hashes.SHA256()))
        if isinstance(key, ed25519.Ed25519PrivateKey):
            return key.sign(data)
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    # -- shared pieces ------------------------------------------------------------------------------

    @staticmethod
    def _client_data(
        kind: str, challenge: str, origin: str, *, cross_origin: bool = False, top_origin: str | None = None
    ) -> bytes:
        # Browsers serialise these members first, in this order, without spaces; a frame's answer
        # says crossOrigin true and, after it, the top-level page's origin (WebAuthn level 3).
        body: dict[str, Any] = {"type": kind, "challenge": challenge, "origin": origin}
        body["crossOrigin"] = cross_origin
        if top_origin is not None:
            body["topOrigin"] = top_origin
        return json.dumps(body, separators=(",", ":")).encode()

    @staticmethod
    def _auth_data(rp_id: str, *, user_present: bool, user_verified: bool, count: int) -> bytes:
        flags = (FLAG_UP if user_present else 0) | (FLAG_UV if user_verified else 0)
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + count.to_bytes(4, "big")
