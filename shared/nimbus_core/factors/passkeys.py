"""WebAuthn (security keys; passkeys, which also sign in alone): browser options, verified answers.

Pure functions over plain data: options are the JSON dicts ``navigator.credentials.create``/``get``
take, with the challenge bytes the caller keeps for :data:`CHALLENGE_SECONDS`; responses are the
dicts browsers send (``PublicKeyCredential.toJSON()``); stored keys are bytes. No I/O here.

py_webauthn (and through it cryptography, cbor2, pyOpenSSL, pyasn1) is imported inside the functions
that need it, never at module import: every function's guard may import this module, and only the
WebAuthn routes should pay that import cost (ARCHITECTURE principle 7; a unit test checks it).

Every invalid response, whatever its shape, raises :class:`PasskeyError` and nothing else; invalid
*arguments* from our own code (a relying party without origins, an empty username) raise ``ValueError``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger

from nimbus_core.factors.passkey_answers import (
    MAX_CREDENTIAL_ID_BYTES,
    MAX_USER_HANDLE_BYTES,
    PasskeyError,
    check_not_framed,
    check_shape,
    credential_id_of,
    user_handle_of,
)

# No webauthn (nor cryptography, cbor2) import at module level: each function imports what it uses, so
# importing this module costs nothing until a WebAuthn ceremony runs. Annotations only below.
if TYPE_CHECKING:
    from collections.abc import Iterable

    from webauthn.helpers.cose import COSEAlgorithmIdentifier
    from webauthn.helpers.structs import UserVerificationRequirement

    from nimbus_core.domain.models import SecondFactor
    from nimbus_core.platform.settings import RelyingParty

__all__ = [
    "CHALLENGE_SECONDS",
    "MAX_CREDENTIAL_ID_BYTES",
    "NewCredential",
    "PasskeyError",
    "authentication_options",
    "b64url",
    "b64url_decode",
    "credential_id_of",
    "registration_options",
    "stored_credential_ids",
    "user_handle_of",
    "verify_authentication",
    "verify_registration",
]

CHALLENGE_SECONDS: Final = 300
"""How long a challenge is valid; also the browser's timeout hint in the options."""

_MIN_CHALLENGE_BYTES: Final = 16
_MAX_SIGN_COUNT: Final = 2**32 - 1

_log = Logger(child=True)


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


def _user_verification(rp: RelyingParty, *, required: bool = False) -> UserVerificationRequirement:
    from webauthn.helpers.structs import UserVerificationRequirement

    return UserVerificationRequirement("required" if required else rp.user_verification)


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
            user_verification=_user_verification(rp, required=passkey),
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=bytes(cid)) for cid in exclude_credential_ids],
        supported_pub_key_algs=_algorithms(),
    )
    # py_webauthn 3.0.1 takes no extensions: credProps is the one we ask for, added to its JSON.
    return {**json.loads(options_to_json(options)), "extensions": {"credProps": True}}, options.challenge


def authentication_options(
    rp: RelyingParty, *, credential_ids: list[bytes], passkey: bool = False
) -> tuple[dict[str, Any], bytes]:
    """PublicKeyCredentialRequestOptions for ``navigator.credentials.get`` and their challenge.

    ``credential_ids`` may answer (allowCredentials): a second factor's user's keys; none for a
    passkey sign-in (the authenticator offers the passkeys it holds for us). A ``passkey`` answer
    requires user verification. ``ValueError`` when a second factor has no key to ask for.
    """
    from webauthn import generate_authentication_options
    from webauthn.helpers import options_to_json
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

    if not credential_ids and not passkey:
        raise ValueError("authentication options need at least one enrolled credential")
    options = generate_authentication_options(
        rp_id=rp.id,
        timeout=CHALLENGE_SECONDS * 1000,
        allow_credentials=[PublicKeyCredentialDescriptor(id=bytes(cid)) for cid in credential_ids],
        user_verification=_user_verification(rp, required=passkey),
    )
    return json.loads(options_to_json(options)), options.challenge


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
    _check_challenge(expected_challenge)
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
        raise _refused("registration", exc) from exc

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


def verify_authentication(
    rp: RelyingParty,
    *,
    response: dict[str, Any],
    expected_challenge: bytes,
    credential_id: bytes,
    credential_public_key: bytes,
    current_sign_count: int,
    passkey: bool = False,
) -> int:
    """Verify the browser's answer to :func:`authentication_options` against one stored key.

    ``credential_id``, ``credential_public_key`` and ``current_sign_count`` are the stored key's (found
    with :func:`credential_id_of`; the count as an ``int``, not DynamoDB's ``Decimal``). Returns the
    new signature counter, to store (compare-and-set it, so two racing assertions cannot both pass). Raises
    :class:`PasskeyError` when the response names another credential, its challenge, origin or rp id
    is not ours, the user was not present (or not verified when ``rp.user_verification`` is
    "required"), the signature does not verify with the stored key, or the counter did not grow while
    either counter is non-zero (a cloned key or a replay; authenticators without a counter send 0).
    A ``passkey`` answer must carry user verification whatever is configured.
    """
    check_shape(response, ("clientDataJSON", "authenticatorData", "signature"))
    _check_challenge(expected_challenge)
    if type(current_sign_count) is not int or not 0 <= current_sign_count <= _MAX_SIGN_COUNT:
        raise PasskeyError("authentication refused: the stored signature counter is not a 32-bit count")
    # py_webauthn 3.0.1 checks only that id and rawId agree with each other, not that they name the key
    # the signature is checked with; an assertion for another credential must not pass as this one's.
    if not hmac.compare_digest(credential_id_of(response), credential_id):
        raise PasskeyError("authentication refused: the response is for another credential")
    check_not_framed(response)

    from webauthn import verify_authentication_response
    from webauthn.helpers import parse_authentication_credential_json

    try:
        credential = parse_authentication_credential_json(response)
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=expected_challenge,
            expected_rp_id=rp.id,
            expected_origin=list(rp.origins),
            credential_public_key=credential_public_key,
            credential_current_sign_count=current_sign_count,
            require_user_verification=passkey or rp.user_verification == "required",
        )
    except Exception as exc:  # see _refused: any failure on hostile input is a refusal
        raise _refused("authentication", exc) from exc
    return verified.new_sign_count


def b64url(data: bytes) -> str:
    """Unpadded base64url: how WebAuthn's JSON carries bytes, and how we store keys and challenges."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    """Bytes we stored with :func:`b64url` (client input goes through the strict decoder instead).

    Stored data is ours or an import's, but a value no encoder makes raises :class:`PasskeyError`,
    so a damaged key is a refused answer, never a 500.
    """
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise PasskeyError("stored value is not base64url") from exc


def stored_credential_ids(factors: Iterable[SecondFactor]) -> list[bytes]:
    """The raw credential ids of the stored ``factors`` (to name in options). A damaged one is
    left out and logged as an error naming its factor, so the user's other factors still work."""
    found = []
    for factor in factors:
        try:
            found.append(b64url_decode(factor.credential_id or ""))
        except PasskeyError:
            _log.error(
                "stored WebAuthn credential id is not base64url: the key is left out",
                extra={"factor": factor.id},
            )
    return found


def _refused(ceremony: str, exc: Exception) -> PasskeyError:
    """The refusal for whatever py_webauthn raised while parsing or verifying a response.

    Everything is caught, not a list of types: py_webauthn 3.0.1 wraps most failures in
    ``InvalidRegistrationResponse``/``InvalidAuthenticationResponse`` but lets others through (shape
    errors are ``InvalidJSONStructure``, a malformed COSE key a ``KeyError``, ``TypeError`` or
    ``IndexError``, an off-curve point or non-ASCII base64 a ``ValueError``, all seen in the fuzz tests),
    and the attestation formats it verifies on request of the *client* (packed, tpm, android-key,
    apple, fido-u2f) parse certificates with cryptography, pyOpenSSL and pyasn1, each with its own
    exceptions. Only calls on the response are inside the ``try``; the cause is chained for the logs.
    """
    return PasskeyError(f"{ceremony} refused: {type(exc).__name__}: {str(exc)[:200]}")


def _check_challenge(expected_challenge: bytes) -> None:
    if not isinstance(expected_challenge, bytes) or len(expected_challenge) < _MIN_CHALLENGE_BYTES:
        raise PasskeyError("expected challenge missing or shorter than 16 bytes")


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
