"""Enrolling a WebAuthn key (a security key, or a passkey, which also signs in alone): the creation
options for ``navigator.credentials.create`` and the verified attestation, the key to store.

Pure functions over plain data (options are the JSON dicts browsers take, responses the dicts they
send, ``PublicKeyCredential.toJSON()``); py_webauthn is imported inside them, never at module import
(see :mod:`nimbus_core.factors.webauthn_encoding`).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from nimbus_core.factors.webauthn_encoding import (
    CHALLENGE_SECONDS,
    MAX_CREDENTIAL_ID_BYTES,
    MAX_USER_HANDLE_BYTES,
    PasskeyError,
    check_challenge,
    check_shape,
    credential_id_of,
    refused,
    user_verification,
)

if TYPE_CHECKING:
    from webauthn.helpers.cose import COSEAlgorithmIdentifier

    from nimbus_core.platform.settings import RelyingParty


@dataclass(frozen=True, slots=True)
class NewCredential:
    """A verified new key, as the second-factor store should keep it."""

    credential_id: bytes
    public_key: bytes  # the COSE_Key, as verify_authentication takes it back
    sign_count: int
    transports: list[str]  # what the browser reported, e.g. ["usb", "nfc"]; known values only
    aaguid: str  # the authenticator model, "00000000-0000-0000-0000-000000000000" when anonymised
    user_verified: bool  # the authenticator's UV flag: it checked a PIN or a biometric
    # The credProps extension's answer: True or False where the browser says whether the key is
    # discoverable, None where it does not say.
    discoverable: bool | None


# The algorithms we accept, in order of preference: ES256, EdDSA (Ed25519), RS256.
_ALGORITHMS: Final = (-7, -8, -257)


def _algorithms() -> list[COSEAlgorithmIdentifier]:
    from webauthn.helpers.cose import COSEAlgorithmIdentifier

    return [COSEAlgorithmIdentifier(alg) for alg in _ALGORITHMS]


def registration_options(
    rp: RelyingParty,
    *,
    user_id: str,
    username: str,
    exclude_credential_ids: list[bytes],
    passkey: bool = False,
) -> tuple[dict[str, Any], bytes]:
    """PublicKeyCredentialCreationOptions for ``navigator.credentials.create`` and their challenge.

    The user handle is ``user_id``'s UTF-8 bytes (opaque, no personal data; a passkey gives it back
    at sign-in). ``exclude_credential_ids``: the user's keys, not to enrol twice. Attestation
    "none", ES256/EdDSA/RS256. A ``passkey`` requires a discoverable credential and user
    verification; otherwise a resident key is discouraged and user verification is as configured.
    credProps asks the browser whether the key is discoverable. ``ValueError`` for bad arguments.
    """
    from webauthn import generate_registration_options
    from webauthn.helpers import options_to_json
    from webauthn.helpers.structs import (
        AttestationConveyancePreference,
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
    )

    user_handle = user_id.encode()
    if not 0 < len(user_handle) <= MAX_USER_HANDLE_BYTES:
        raise ValueError("user_id must be 1..64 bytes in UTF-8")
    if not username:
        raise ValueError("username must not be empty")
    options = generate_registration_options(
        rp_id=rp.id,
        rp_name=rp.name,
        user_id=user_handle,
        user_name=username,
        user_display_name=username,
        timeout=CHALLENGE_SECONDS * 1000,
        attestation=AttestationConveyancePreference.NONE,
        authenticator_selection=AuthenticatorSelectionCriteria(
            # A key that is no passkey is asked not to be discoverable (the passkey list would offer it)
            resident_key=ResidentKeyRequirement.REQUIRED if passkey else ResidentKeyRequirement.DISCOURAGED,
            require_resident_key=passkey,
            user_verification=user_verification(rp, required=passkey),
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=bytes(cid)) for cid in exclude_credential_ids],
        supported_pub_key_algs=_algorithms(),
    )
    # py_webauthn 3.0.1 takes no extensions: credProps is the one we ask for, added to its JSON.
    return {**json.loads(options_to_json(options)), "extensions": {"credProps": True}}, options.challenge


def verify_registration(
    rp: RelyingParty, *, response: dict[str, Any], expected_challenge: bytes, passkey: bool = False
) -> NewCredential:
    """Verify the browser's answer to :func:`registration_options` and return the key to store.

    Checks (py_webauthn): type, challenge, origin among ``rp.origins``, rp id hash, user presence,
    user verification when ``rp.user_verification`` is "required", an accepted algorithm, a "none" (or
    otherwise valid) attestation. Checks (here): ``rawId`` is the attested credential id and at most
    1023 bytes, the public key is a usable P-256 / Ed25519 / RSA >= 2048 key for its algorithm; a
    ``passkey`` verified its user and is not called non-discoverable by credProps. Raises
    :class:`PasskeyError` for anything else, whatever the shape of ``response``.
    """
    check_shape(response, ("clientDataJSON", "attestationObject"))
    check_challenge(expected_challenge)
    raw_id = credential_id_of(response)

    from webauthn import verify_registration_response
    from webauthn.helpers import parse_registration_credential_json

    try:
        credential = parse_registration_credential_json(response)
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=expected_challenge,
            expected_rp_id=rp.id,
            expected_origin=list(rp.origins),
            require_user_presence=True,
            require_user_verification=passkey or rp.user_verification == "required",
            supported_pub_key_algs=_algorithms(),
        )
        _check_public_key(verified.credential_public_key)
    except Exception as exc:  # see _refused: any failure on hostile input is a refusal
        raise refused("registration", exc) from exc

    # py_webauthn checks id == base64url(rawId) but not rawId against the attested credential id.
    if not hmac.compare_digest(raw_id, verified.credential_id):
        raise PasskeyError("registration refused: rawId is not the attested credential id")
    if len(verified.credential_id) > MAX_CREDENTIAL_ID_BYTES:
        raise PasskeyError("registration refused: credential id longer than 1023 bytes")
    discoverable = _discoverable(response)
    if passkey and discoverable is False:
        raise PasskeyError("registration refused: a passkey must be discoverable, the browser says it is not")
    transports = list(dict.fromkeys(t.value for t in credential.response.transports or []))
    return NewCredential(
        credential_id=verified.credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        transports=transports,
        aaguid=verified.aaguid,
        user_verified=verified.user_verified,
        discoverable=discoverable,
    )


def _discoverable(response: dict[str, Any]) -> bool | None:
    """credProps' ``rk`` in the browser's answer (py_webauthn reads no client extension results)."""
    results = response.get("clientExtensionResults")
    props = results.get("credProps") if isinstance(results, dict) else None
    rk = props.get("rk") if isinstance(props, dict) else None
    return rk if isinstance(rk, bool) else None


def _check_public_key(cose_key: bytes) -> None:
    """The attested key must be usable with its algorithm, so a stored key never fails only at sign-in."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from webauthn.helpers import decode_credential_public_key, decoded_public_key_to_cryptography

    decoded = decode_credential_public_key(cose_key)
    key = decoded_public_key_to_cryptography(decoded)
    alg = int(decoded.alg)
    usable = (
        (alg == -7 and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1")
        or (alg == -8 and isinstance(key, ed25519.Ed25519PublicKey))
        or (alg == -257 and isinstance(key, rsa.RSAPublicKey) and key.key_size >= 2048)
    )
    if not usable:
        raise ValueError(f"public key of type {type(key).__name__} is not usable with algorithm {alg}")
