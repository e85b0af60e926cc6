"""WebAuthn second factors: real ceremonies with a software authenticator, no mocks of py_webauthn.

Every refusal must be a PasskeyError and nothing else, whatever the browser (or an attacker) sends.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import cbor2
import pytest

from nimbus_core.factors.webauthn_assertion import authentication_options, verify_authentication
from nimbus_core.factors.webauthn_encoding import CHALLENGE_SECONDS, PasskeyError, credential_id_of
from nimbus_core.factors.webauthn_registration import NewCredential, registration_options, verify_registration
from nimbus_core.platform.settings import RelyingParty
from tests.passkey_authenticator import (
    TEST_AAGUID,
    Algorithm,
    AuthenticatorRefusedError,
    SoftwareAuthenticator,
    b64url,
    b64url_decode,
)

RP = RelyingParty(
    id="files.example",
    name="Nimbus",
    origins=("https://files.example", "https://app.files.example"),
    user_verification="preferred",
)
RP_UV = dataclasses.replace(RP, user_verification="required")
ORIGIN = "https://files.example"
USER_ID = "01M83M99VZ0PQ19JM98VB8SN17"  # fixed: values made at collection time differ between xdist workers


def enrol(authenticator: SoftwareAuthenticator, rp: RelyingParty = RP, **create: Any) -> NewCredential:
    options, challenge = registration_options(
        rp, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    response = authenticator.create(options, origin=ORIGIN, **create)
    return verify_registration(rp, response=response, expected_challenge=challenge)


def assertion(
    authenticator: SoftwareAuthenticator, credential: NewCredential, rp: RelyingParty = RP, **get: Any
) -> tuple[dict[str, Any], bytes]:
    options, challenge = authentication_options(rp, credential_ids=[credential.credential_id])
    return authenticator.get(options, origin=get.pop("origin", ORIGIN), **get), challenge


def verify(
    response: dict[str, Any],
    challenge: bytes,
    credential: NewCredential,
    sign_count: int,
    rp: RelyingParty = RP,
) -> int:
    return verify_authentication(
        rp,
        response=response,
        expected_challenge=challenge,
        credential_id=credential.credential_id,
        credential_public_key=credential.public_key,
        current_sign_count=sign_count,
    )


@pytest.fixture(scope="module")
def key() -> SoftwareAuthenticator:
    """One ES256 authenticator for the tests that do not depend on its counter."""
    return SoftwareAuthenticator()


@pytest.fixture(scope="module")
def enrolled(key: SoftwareAuthenticator) -> NewCredential:
    return enrol(key)


# -- round trips --------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "RS256"])
def test_register_then_authenticate_round_trip(algorithm: Algorithm) -> None:
    authenticator = SoftwareAuthenticator(algorithm=algorithm)
    credential = enrol(authenticator)

    assert credential.credential_id == authenticator.credential_id
    assert cbor2.loads(credential.public_key) == cbor2.loads(authenticator.cose_public_key())
    assert credential.sign_count == 0
    assert credential.transports == ["usb", "nfc"]
    assert credential.aaguid == "6e696d62-7573-2073-6f66-7477617265ff"
    assert bytes.fromhex(credential.aaguid.replace("-", "")) == TEST_AAGUID

    response, challenge = assertion(authenticator, credential)
    assert credential_id_of(response) == credential.credential_id
    assert verify(response, challenge, credential, credential.sign_count) == 1


def test_packed_self_attestation_and_the_second_origin_are_accepted() -> None:
    authenticator = SoftwareAuthenticator()
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    response = authenticator.create(options, origin="https://app.files.example", attestation="packed")
    credential = verify_registration(RP, response=response, expected_challenge=challenge)
    response, challenge = assertion(authenticator, credential, origin="https://app.files.example")
    assert verify(response, challenge, credential, 0) == 1


def test_a_packed_self_attestation_is_verified_not_just_accepted() -> None:
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    response = SoftwareAuthenticator().create(options, origin=ORIGIN, attestation="packed")
    attestation = cbor2.loads(b64url_decode(response["response"]["attestationObject"]))
    attestation["attStmt"]["sig"] = SoftwareAuthenticator().sign(b"something else")
    response["response"]["attestationObject"] = b64url(cbor2.dumps(attestation))
    with pytest.raises(PasskeyError, match="signature"):
        verify_registration(RP, response=response, expected_challenge=challenge)


def test_counter_must_grow_and_a_replayed_or_stale_counter_is_refused() -> None:
    authenticator = SoftwareAuthenticator()
    credential = enrol(authenticator)
    stored = credential.sign_count
    for expected in range(1, 6):
        response, challenge = assertion(authenticator, credential)
        stored = verify(response, challenge, credential, stored)
        assert stored == expected

    # The very same response again (its challenge stored server-side was not spent here): stale counter.
    with pytest.raises(PasskeyError, match="sign count"):
        verify(response, challenge, credential, stored)
    for old in (stored, stored - 1, 1, 0):
        response, challenge = assertion(authenticator, credential, sign_count=old)
        with pytest.raises(PasskeyError, match="sign count"):
            verify(response, challenge, credential, stored)
    # A jump forward is fine (the key was used elsewhere for this relying party... or another one).
    response, challenge = assertion(authenticator, credential, sign_count=stored + 100)
    assert verify(response, challenge, credential, stored) == stored + 100


def test_authenticators_without_a_counter_send_zero_and_are_accepted_while_both_are_zero() -> None:
    authenticator = SoftwareAuthenticator(counter=False)
    credential = enrol(authenticator)
    for _ in range(3):
        response, challenge = assertion(authenticator, credential)
        assert verify(response, challenge, credential, 0) == 0
    # Once we saw a non-zero counter, a zero one is a clone or a replay.
    response, challenge = assertion(authenticator, credential)
    with pytest.raises(PasskeyError):
        verify(response, challenge, credential, 7)


# -- not for us ---------------------------------------------------------------------------------------

BAD_ORIGINS = [
    "https://evil.example",
    "http://files.example",
    "https://files.example:8443",
    "https://other.files.example",
    "https://files.example/",
    "https://files.example.evil.example",
    "null",
    "",
]


@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_wrong_origin_is_refused(key: SoftwareAuthenticator, enrolled: NewCredential, origin: str) -> None:
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    with pytest.raises(PasskeyError, match="origin"):
        verify_registration(
            RP, response=SoftwareAuthenticator().create(options, origin=origin), expected_challenge=challenge
        )
    response, challenge = assertion(key, enrolled, origin=origin)
    with pytest.raises(PasskeyError, match="origin"):
        verify(response, challenge, enrolled, 0)


@pytest.mark.parametrize("rp_id", ["evil.example", "example", "app.files.example", "FILES.EXAMPLE", ""])
def test_wrong_rp_id_is_refused(key: SoftwareAuthenticator, enrolled: NewCredential, rp_id: str) -> None:
    with pytest.raises(PasskeyError, match="RP ID"):
        enrol(SoftwareAuthenticator(), rp_id=rp_id)
    response, challenge = assertion(key, enrolled, rp_id=rp_id)
    with pytest.raises(PasskeyError, match="RP ID"):
        verify(response, challenge, enrolled, 0)


def test_wrong_challenge_is_refused(key: SoftwareAuthenticator, enrolled: NewCredential) -> None:
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    _, other_challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    assert other_challenge != challenge
    response = SoftwareAuthenticator().create(options, origin=ORIGIN)
    with pytest.raises(PasskeyError, match="challenge"):
        verify_registration(RP, response=response, expected_challenge=other_challenge)

    response, challenge = assertion(key, enrolled)
    with pytest.raises(PasskeyError, match="challenge"):
        verify(response, challenge[:-1] + bytes([challenge[-1] ^ 1]), enrolled, 0)
    response, challenge = assertion(key, enrolled, challenge=b64url(b"x" * 64))
    with pytest.raises(PasskeyError, match="challenge"):
        verify(response, challenge, enrolled, 0)


def test_a_registration_answer_is_not_an_assertion_and_back(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> None:
    with pytest.raises(PasskeyError, match="client data type"):
        enrol(SoftwareAuthenticator(), client_data_type="webauthn.get")
    response, challenge = assertion(key, enrolled, client_data_type="webauthn.create")
    with pytest.raises(PasskeyError, match="client data type"):
        verify(response, challenge, enrolled, 0)


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "RS256"])
def test_tampered_signature_is_refused(algorithm: Algorithm) -> None:
    authenticator = SoftwareAuthenticator(algorithm=algorithm)
    credential = enrol(authenticator)
    response, challenge = assertion(authenticator, credential, tamper_signature=True)
    with pytest.raises(PasskeyError, match="signature"):
        verify(response, challenge, credential, 0)


def test_tampered_authenticator_data_or_client_data_breaks_the_signature(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> None:
    response, challenge = assertion(key, enrolled)
    data = bytearray(b64url_decode(response["response"]["authenticatorData"]))
    data[36] ^= 0x01  # the counter's last byte: still a valid, higher-looking counter
    forged = copy.deepcopy(response)
    forged["response"]["authenticatorData"] = b64url(bytes(data))
    with pytest.raises(PasskeyError, match="signature"):
        verify(forged, challenge, enrolled, 0)

    client = json.loads(b64url_decode(response["response"]["clientDataJSON"]))
    client["extension"] = "added"  # still our challenge and origin, not framed, but not what was signed
    forged = copy.deepcopy(response)
    forged["response"]["clientDataJSON"] = b64url(json.dumps(client).encode())
    with pytest.raises(PasskeyError, match="signature"):
        verify(forged, challenge, enrolled, 0)


@pytest.mark.parametrize(
    "frame",
    [{"cross_origin": True}, {"top_origin": "https://evil.test"}, {"top_origin": ORIGIN}],
    ids=["crossOrigin", "another page's topOrigin", "our own origin as topOrigin"],
)
def test_an_assertion_made_in_a_frame_is_refused_though_signed_for_our_origin(
    key: SoftwareAuthenticator, enrolled: NewCredential, frame: dict[str, Any]
) -> None:
    response, challenge = assertion(key, enrolled, **frame)

    with pytest.raises(PasskeyError, match="frame"):
        verify(response, challenge, enrolled, 0)


def test_an_assertion_whose_cross_origin_is_no_boolean_false_is_refused(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> None:
    for value in ("false", None, 0):
        response, challenge = assertion(key, enrolled)
        client = json.loads(b64url_decode(response["response"]["clientDataJSON"]))
        client["crossOrigin"] = value
        response["response"]["clientDataJSON"] = b64url(json.dumps(client).encode())
        with pytest.raises(PasskeyError):
            verify(response, challenge, enrolled, 0)


def test_another_keys_assertion_is_refused(enrolled: NewCredential) -> None:
    other = SoftwareAuthenticator()
    other_credential = enrol(other)
    # The other key answers as itself: not the credential we look at.
    response, challenge = assertion(other, other_credential)
    with pytest.raises(PasskeyError, match="another credential"):
        verify(response, challenge, enrolled, 0)
    # The other key claims our key's id: its signature does not verify with our public key.
    options, challenge = authentication_options(RP, credential_ids=[enrolled.credential_id])
    response = other.get(
        options, origin=ORIGIN, credential_id=enrolled.credential_id, ignore_allow_credentials=True
    )
    with pytest.raises(PasskeyError, match="signature"):
        verify(response, challenge, enrolled, 0)


def test_wrong_credential_id_is_refused(key: SoftwareAuthenticator, enrolled: NewCredential) -> None:
    response, challenge = assertion(key, enrolled, credential_id=b"\x01" * 32)
    with pytest.raises(PasskeyError, match="another credential"):
        verify(response, challenge, enrolled, 0)
    response, challenge = assertion(key, enrolled)
    response["id"] = b64url(b"\x01" * 32)  # id and rawId disagree
    with pytest.raises(PasskeyError):
        verify(response, challenge, enrolled, 0)


def test_registration_rawid_must_be_the_attested_credential_id() -> None:
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    response = SoftwareAuthenticator().create(options, origin=ORIGIN)
    response["id"] = response["rawId"] = b64url(b"\x02" * 32)
    with pytest.raises(PasskeyError, match="attested credential id"):
        verify_registration(RP, response=response, expected_challenge=challenge)


def test_credential_ids_longer_than_1023_bytes_are_refused() -> None:
    with pytest.raises(PasskeyError):
        enrol(SoftwareAuthenticator(credential_id=b"\x03" * 1024))
    assert enrol(SoftwareAuthenticator(credential_id=b"\x03" * 1023)).credential_id == b"\x03" * 1023


def test_user_verification_is_enforced_only_when_required() -> None:
    authenticator = SoftwareAuthenticator()
    with pytest.raises(PasskeyError, match="User verification"):
        enrol(authenticator, RP_UV, user_verified=False)
    credential = enrol(authenticator, RP, user_verified=False)  # "preferred": accepted without UV
    response, challenge = assertion(authenticator, credential, RP_UV, user_verified=False)
    with pytest.raises(PasskeyError, match="User verification"):
        verify(response, challenge, credential, 0, RP_UV)
    response, challenge = assertion(authenticator, credential, RP, user_verified=False)
    assert verify(response, challenge, credential, 0, RP) == 2
    response, challenge = assertion(authenticator, credential, RP_UV)
    assert verify(response, challenge, credential, 2, RP_UV) == 3
    assert enrol(SoftwareAuthenticator(), RP_UV).sign_count == 0
    discouraged = dataclasses.replace(RP, user_verification="discouraged")
    response, challenge = assertion(authenticator, credential, discouraged, user_verified=False)
    assert verify(response, challenge, credential, 3, discouraged) == 4


def test_user_presence_is_always_required(key: SoftwareAuthenticator, enrolled: NewCredential) -> None:
    with pytest.raises(PasskeyError, match="presen"):
        enrol(SoftwareAuthenticator(), user_present=False)
    response, challenge = assertion(key, enrolled, user_present=False)
    with pytest.raises(PasskeyError, match="present"):
        verify(response, challenge, enrolled, 0)


def test_assertions_without_a_user_handle_are_accepted() -> None:
    authenticator = SoftwareAuthenticator()
    credential = enrol(authenticator)
    response, challenge = assertion(authenticator, credential)
    response["response"]["userHandle"] = None
    assert verify(response, challenge, credential, 0) == 1
    response, challenge = assertion(authenticator, credential)
    del response["response"]["userHandle"]
    assert verify(response, challenge, credential, 1) == 2


# -- attested keys we could never verify with are refused at registration ------------------------------


def _ec2(changes: dict[int, Any]) -> dict[int, Any]:
    """A real P-256 COSE key with some parameters replaced."""
    cose = cbor2.loads(SoftwareAuthenticator().cose_public_key())
    assert isinstance(cose, dict)
    return cose | changes


@pytest.mark.parametrize(
    "cose",
    [
        _ec2({-2: b"\x01" * 32, -3: b"\x02" * 32}),  # not a point on P-256
        _ec2({3: -257}),  # an EC key claiming RS256
        _ec2({3: -8}),  # an EC key claiming EdDSA
        _ec2({3: -36}),  # ES512: not an algorithm we accept
        _ec2({-1: 2}),  # P-384 named, P-256 coordinates
        _ec2({-1: 99}),  # unknown curve
        _ec2({1: 99}),  # unknown key type
        {1: 1, 3: -8, -1: 6, -2: b"\x00" * 31},  # Ed25519 key of the wrong length
        {1: 3, 3: -257, -1: (2**1023 + 1).to_bytes(128, "big"), -2: b"\x01\x00\x01"},  # RSA-1024
        {1: 2, 3: -7},  # no curve, no coordinates
        {},
    ],
    ids=[
        "off-curve",
        "ec-as-rs256",
        "ec-as-eddsa",
        "es512",
        "p384-label",
        "unknown-curve",
        "unknown-kty",
        "short-ed25519",
        "rsa-1024",
        "no-coordinates",
        "empty",
    ],
)
def test_unusable_attested_keys_are_refused(cose: dict[int, Any]) -> None:
    # With "none" attestation nothing signs the attested key: an authenticator can send any bytes.
    authenticator = SoftwareAuthenticator()
    authenticator.cose_public_key = lambda: cbor2.dumps(cose)  # type: ignore[method-assign]  # forged key
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    response = authenticator.create(options, origin=ORIGIN)
    with pytest.raises(PasskeyError):
        verify_registration(RP, response=response, expected_challenge=challenge)


def test_unusable_stored_keys_and_counters_are_refused(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> None:
    response, challenge = assertion(key, enrolled)
    for stored_key in (b"", b"\x04", b"\xff", cbor2.dumps([1, 2]), cbor2.dumps({1: 2})):
        with pytest.raises(PasskeyError):
            verify_authentication(
                RP,
                response=response,
                expected_challenge=challenge,
                credential_id=enrolled.credential_id,
                credential_public_key=stored_key,
                current_sign_count=0,
            )
    for counter in (-1, 2**32, True, 1.0, "1", None):
        with pytest.raises(PasskeyError):
            verify(response, challenge, enrolled, counter)  # type: ignore[arg-type]  # stored junk


@pytest.mark.parametrize("challenge", [b"", b"short", "a" * 64, None, bytearray(64)])
def test_an_unusable_expected_challenge_refuses_everything(
    key: SoftwareAuthenticator, enrolled: NewCredential, challenge: Any
) -> None:
    response, _ = assertion(key, enrolled)
    with pytest.raises(PasskeyError):
        verify(response, challenge, enrolled, 0)
    options, _ = registration_options(RP, user_id=USER_ID, username="alice", exclude_credential_ids=[])
    with pytest.raises(PasskeyError):
        verify_registration(
            RP, response=SoftwareAuthenticator().create(options, origin=ORIGIN), expected_challenge=challenge
        )


# -- options ------------------------------------------------------------------------------------------


def test_registration_options_are_what_the_browser_needs() -> None:
    excluded = [b"\x10" * 16, b"\x11" * 64]
    options, challenge = registration_options(
        RP_UV, user_id=USER_ID, username="alice", exclude_credential_ids=excluded
    )
    assert json.loads(json.dumps(options)) == options  # JSON-ready as it is
    assert options["rp"] == {"id": "files.example", "name": "Nimbus"}
    assert options["user"] == {"id": b64url(USER_ID.encode()), "name": "alice", "displayName": "alice"}
    assert b64url_decode(options["challenge"]) == challenge
    assert len(challenge) >= 32
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7, -8, -257]
    assert {p["type"] for p in options["pubKeyCredParams"]} == {"public-key"}
    assert options["excludeCredentials"] == [{"id": b64url(cid), "type": "public-key"} for cid in excluded]
    assert options["attestation"] == "none"
    assert options["authenticatorSelection"]["residentKey"] == "discouraged"
    assert options["authenticatorSelection"]["requireResidentKey"] is False
    assert options["authenticatorSelection"]["userVerification"] == "required"
    assert options["timeout"] == CHALLENGE_SECONDS * 1000
    again, other_challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    assert other_challenge != challenge
    assert again["excludeCredentials"] == []
    assert again["authenticatorSelection"]["userVerification"] == "preferred"


def test_an_enrolled_authenticator_is_excluded_from_registering_again() -> None:
    authenticator = SoftwareAuthenticator()
    credential = enrol(authenticator)
    options, _ = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[credential.credential_id]
    )
    with pytest.raises(AuthenticatorRefusedError, match="excluded"):
        authenticator.create(options, origin=ORIGIN)


def test_authentication_options_allow_exactly_the_users_keys(enrolled: NewCredential) -> None:
    ids = [enrolled.credential_id, b"\x20" * 40]
    options, challenge = authentication_options(RP, credential_ids=ids)
    assert json.loads(json.dumps(options)) == options
    assert options["rpId"] == "files.example"
    assert options["allowCredentials"] == [{"id": b64url(cid), "type": "public-key"} for cid in ids]
    assert options["userVerification"] == "preferred"
    assert options["timeout"] == CHALLENGE_SECONDS * 1000
    assert b64url_decode(options["challenge"]) == challenge
    assert len(challenge) >= 32
    assert authentication_options(RP_UV, credential_ids=ids)[0]["userVerification"] == "required"
    with pytest.raises(AuthenticatorRefusedError, match="allowCredentials"):
        SoftwareAuthenticator().get(options, origin=ORIGIN)
    with pytest.raises(ValueError, match="at least one"):
        authentication_options(RP, credential_ids=[])


@pytest.mark.parametrize(
    ("user_id", "username"),
    [("", "alice"), ("x" * 65, "alice"), (USER_ID, "")],
    ids=["no-id", "long-id", "no-name"],
)
def test_registration_options_refuse_bad_arguments(user_id: str, username: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011  # our own programming errors, not a response's
        registration_options(RP, user_id=user_id, username=username, exclude_credential_ids=[])


def test_relying_party_settings_are_checked() -> None:
    assert RelyingParty(
        id="localhost", name="Nimbus", origins=("http://localhost:3000",), user_verification="required"
    )
    bad_settings: list[dict[str, Any]] = [
        {"origins": ()},
        {"origins": ("http://files.example",)},
        {"origins": ("https://evil.example",)},
        {"origins": ("https://files.example/login",)},
        {"origins": ("https://files.example.evil.example",)},
        {"origins": ("https://FILES.example",)},
        {"origins": ("files.example",)},
        {"id": "https://files.example"},
        {"id": "Files.Example"},
        {"id": ""},
        {"name": ""},
        {"user_verification": "always"},
    ]
    for bad in bad_settings:
        with pytest.raises(ValueError):  # noqa: PT011  # deployment settings, not a response
            dataclasses.replace(RP, **bad)


# -- malformed responses: PasskeyError, never anything else -------------------------------------------

Mutation = Callable[[dict[str, Any]], Any]


def _set(path: str, value: Any) -> Mutation:
    def mutate(response: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        node = response
        for part in parents:
            node = node[part]
        node[last] = value
        return response

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(response: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        node = response
        for part in parents:
            node = node[part]
        del node[last]
        return response

    return mutate


def _encoded(path: str, raw: bytes) -> Mutation:
    return _set(path, b64url(raw))


def _client_data(**fields: Any) -> Mutation:
    """clientDataJSON with some members replaced (challenge and origin otherwise as sent)."""

    def mutate(response: dict[str, Any]) -> Any:
        client = json.loads(b64url_decode(response["response"]["clientDataJSON"]))
        client.update(fields)
        response["response"]["clientDataJSON"] = b64url(json.dumps(client).encode())
        return response

    return mutate


HUGE = "A" * 1_000_000
COMMON_SHAPES: dict[str, Mutation] = {
    "none": lambda r: None,
    "list": lambda r: [r],
    "string": json.dumps,
    "number": lambda r: 42,
    "empty": lambda r: {},
    "no-id": _drop("id"),
    "no-rawId": _drop("rawId"),
    "no-response": _drop("response"),
    "no-type": _drop("type"),
    "type-private-key": _set("type", "private-key"),
    "type-number": _set("type", 1),
    "response-list": _set("response", []),
    "response-string": _set("response", "x"),
    "id-number": _set("id", 5),
    "rawId-number": _set("rawId", 5),
    "id-list": _set("id", []),
    "rawId-dict": _set("rawId", {}),
    "id-empty": _set("id", ""),
    "ids-bad-base64": lambda r: _set("id", "!!!!")(_set("rawId", "!!!!")(r)),
    "ids-one-char": lambda r: _set("id", "A")(_set("rawId", "A")(r)),
    "ids-padded": lambda r: _set("id", r["id"] + "=")(_set("rawId", r["rawId"] + "=")(r)),
    "ids-standard-base64": lambda r: _set("id", "a+/a")(_set("rawId", "a+/a")(r)),
    "ids-non-ascii": lambda r: _set("id", "é" * 8)(_set("rawId", "é" * 8)(r)),
    "ids-huge": lambda r: _set("id", HUGE)(_set("rawId", HUGE)(r)),
    "no-clientDataJSON": _drop("response.clientDataJSON"),
    "clientDataJSON-null": _set("response.clientDataJSON", None),
    "clientDataJSON-number": _set("response.clientDataJSON", 3.5),
    "clientDataJSON-bool": _set("response.clientDataJSON", True),
    "clientDataJSON-dict": _set("response.clientDataJSON", {"type": "webauthn.get"}),
    "clientDataJSON-bad-base64": _set("response.clientDataJSON", "!!!!"),
    "clientDataJSON-non-ascii": _set("response.clientDataJSON", "ü"),
    "clientDataJSON-huge": _set("response.clientDataJSON", HUGE),
    "clientDataJSON-not-json": _encoded("response.clientDataJSON", b"not json"),
    "clientDataJSON-not-utf8": _encoded("response.clientDataJSON", b"\xff\xfe\xfd"),
    "clientDataJSON-list": _encoded("response.clientDataJSON", b"[]"),
    "clientDataJSON-empty-object": _encoded("response.clientDataJSON", b"{}"),
    "clientDataJSON-deep": _encoded("response.clientDataJSON", b"[" * 20_000 + b"]" * 20_000),
    "clientData-challenge-number": _client_data(challenge=5),
    "clientData-challenge-list": _client_data(challenge=[]),
    "clientData-origin-list": _client_data(origin=[ORIGIN]),
    "clientData-origin-null": _client_data(origin=None),
    "clientData-type-null": _client_data(type=None),
    "clientData-tokenBinding-junk": _client_data(tokenBinding={"status": "bogus", "id": 5}),
    "extra-fields": lambda r: r | {"extra": "x" * 1000, "response": r["response"] | {"extra": [1, {}]}},
}


def _att(**changes: Any) -> Mutation:
    """The attestation object with members replaced (or removed when the value is ...)."""

    def mutate(response: dict[str, Any]) -> Any:
        att = cbor2.loads(b64url_decode(response["response"]["attestationObject"]))
        for name, value in changes.items():
            if value is ...:
                att.pop(name, None)
            else:
                att[name] = value(att) if callable(value) else value
        response["response"]["attestationObject"] = b64url(cbor2.dumps(att))
        return response

    return mutate


def _auth_data(transform: Callable[[bytes], bytes]) -> Callable[[dict[str, Any]], bytes]:
    return lambda att: transform(att["authData"])


REGISTRATION_SHAPES: dict[str, Mutation] = {
    **COMMON_SHAPES,
    "no-attestationObject": _drop("response.attestationObject"),
    "attestationObject-number": _set("response.attestationObject", 1),
    "attestationObject-bad-base64": _set("response.attestationObject", "$$$$"),
    "attestationObject-huge": _set("response.attestationObject", HUGE),
    "attestationObject-not-cbor": _encoded("response.attestationObject", b"\xff\x00\x01"),
    "attestationObject-cbor-list": _encoded("response.attestationObject", cbor2.dumps([1, 2, 3])),
    "attestationObject-cbor-int": _encoded("response.attestationObject", cbor2.dumps(7)),
    "attestationObject-truncated": lambda r: _set(
        "response.attestationObject", r["response"]["attestationObject"][:40]
    )(r),
    "attestationObject-duplicate-keys": _encoded(
        "response.attestationObject", b"\xa2\x63fmt\x64none\x63fmt\x66packed"
    ),
    "no-authData": _att(authData=...),
    "no-fmt": _att(fmt=...),
    "fmt-unknown": _att(fmt="bogus"),
    "fmt-number": _att(fmt=5),
    "fmt-packed-no-sig": _att(fmt="packed"),
    "fmt-packed-garbage-x5c": _att(
        fmt="packed", attStmt={"alg": -7, "sig": b"\x30\x00", "x5c": [b"\x30\x82"]}
    ),
    "fmt-packed-x5c-number": _att(fmt="packed", attStmt={"alg": -7, "sig": b"x", "x5c": 5}),
    "fmt-tpm-garbage": _att(
        fmt="tpm", attStmt={"ver": "2.0", "alg": -7, "sig": b"x", "certInfo": b"", "pubArea": b""}
    ),
    "fmt-android-key-garbage": _att(fmt="android-key", attStmt={"alg": -7, "sig": b"x", "x5c": [b"\x00"]}),
    "fmt-safetynet-garbage": _att(fmt="android-safetynet", attStmt={"ver": "1", "response": b"a.b.c"}),
    "fmt-u2f-garbage": _att(fmt="fido-u2f", attStmt={"sig": b"x", "x5c": [b"\x00" * 10]}),
    "fmt-apple-garbage": _att(fmt="apple", attStmt={"x5c": []}),
    "none-with-statement": _att(attStmt={"sig": b"x"}),
    "attStmt-number": _att(attStmt=5),
    "authData-number": _att(authData=5),
    "authData-string": _att(authData="x" * 40),
    "authData-short": _att(authData=b"\x00" * 36),
    "authData-truncated": _att(authData=_auth_data(lambda d: d[:60])),
    "authData-leftover": _att(authData=_auth_data(lambda d: d + b"\x00")),
    "authData-no-AT-flag": _att(authData=_auth_data(lambda d: d[:32] + bytes([d[32] & ~0x40]) + d[33:37])),
    "authData-ED-flag-no-extensions": _att(
        authData=_auth_data(lambda d: d[:32] + bytes([d[32] | 0x80]) + d[33:])
    ),
    "authData-credential-length-huge": _att(authData=_auth_data(lambda d: d[:53] + b"\xff\xff" + d[55:])),
    "authData-empty-credential": _att(authData=_auth_data(lambda d: d[:53] + b"\x00\x00" + d[55 + 32 :])),
    "authData-key-not-cbor": _att(authData=_auth_data(lambda d: d[: 55 + 32] + b"\xff\xff")),
    "authData-key-uncompressed-short": _att(authData=_auth_data(lambda d: d[: 55 + 32] + b"\x04\x01")),
    "transports-junk": _set("response.transports", [5, None, "usb", {"x": 1}]),
    "transports-string": _set("response.transports", "usb"),
    "authenticatorAttachment-junk": _set("authenticatorAttachment", "glued-on"),
}


def _assertion_data(transform: Callable[[bytes], bytes]) -> Mutation:
    def mutate(response: dict[str, Any]) -> Any:
        data = b64url_decode(response["response"]["authenticatorData"])
        response["response"]["authenticatorData"] = b64url(transform(data))
        return response

    return mutate


AUTHENTICATION_SHAPES: dict[str, Mutation] = {
    **COMMON_SHAPES,
    "no-authenticatorData": _drop("response.authenticatorData"),
    "no-signature": _drop("response.signature"),
    "authenticatorData-number": _set("response.authenticatorData", 0),
    "authenticatorData-bad-base64": _set("response.authenticatorData", "@@@@"),
    "authenticatorData-huge": _set("response.authenticatorData", HUGE),
    "authenticatorData-short": _encoded("response.authenticatorData", b"\x00" * 36),
    "authenticatorData-leftover": _assertion_data(lambda d: d + b"\x00"),
    "authenticatorData-AT-without-data": _assertion_data(lambda d: d[:32] + bytes([d[32] | 0x40]) + d[33:]),
    "authenticatorData-ED-without-extensions": _assertion_data(
        lambda d: d[:32] + bytes([d[32] | 0x80]) + d[33:]
    ),
    "signature-null": _set("response.signature", None),
    "signature-empty": _set("response.signature", ""),
    "signature-list": _set("response.signature", [1]),
    "signature-bad-base64": _set("response.signature", "%%%%"),
    "signature-garbage": _encoded("response.signature", b"\x30\x06\x02\x01\x01\x02\x01\x01"),
    "signature-not-der": _encoded("response.signature", b"\x00" * 64),
    "signature-huge": _set("response.signature", HUGE),
    "userHandle-number": _set("response.userHandle", 5),
    "userHandle-dict": _set("response.userHandle", {}),
    "userHandle-non-ascii": _set("response.userHandle", "ß"),
    "userHandle-huge": _set("response.userHandle", HUGE),
}


@pytest.fixture(scope="module")
def registration_case() -> tuple[dict[str, Any], bytes]:
    options, challenge = registration_options(
        RP, user_id=USER_ID, username="alice", exclude_credential_ids=[]
    )
    return SoftwareAuthenticator().create(options, origin=ORIGIN), challenge


@pytest.fixture(scope="module")
def authentication_case(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> tuple[dict[str, Any], bytes, NewCredential]:
    response, challenge = assertion(key, enrolled)
    return response, challenge, enrolled


def test_the_unmutated_cases_are_accepted(
    registration_case: tuple[dict[str, Any], bytes],
    authentication_case: tuple[dict[str, Any], bytes, NewCredential],
) -> None:
    """The control for the shapes below: only the mutation makes them fail."""
    response, challenge = registration_case
    verify_registration(RP, response=copy.deepcopy(response), expected_challenge=challenge)
    response, challenge, credential = authentication_case
    assert verify(copy.deepcopy(response), challenge, credential, 0) >= 1


@pytest.mark.parametrize("shape", REGISTRATION_SHAPES)
def test_malformed_registration_responses_raise_passkey_error(
    registration_case: tuple[dict[str, Any], bytes], shape: str
) -> None:
    response, challenge = registration_case
    malformed = REGISTRATION_SHAPES[shape](copy.deepcopy(response))
    if shape in ("extra-fields", "transports-junk", "transports-string"):
        # Browsers add members over time; unknown ones are ignored, junk transports dropped.
        credential = verify_registration(RP, response=malformed, expected_challenge=challenge)
        assert credential.transports in (["usb", "nfc"], ["usb"], [])
        return
    with pytest.raises(PasskeyError):
        verify_registration(RP, response=malformed, expected_challenge=challenge)


@pytest.mark.parametrize("shape", AUTHENTICATION_SHAPES)
def test_malformed_assertions_raise_passkey_error(
    authentication_case: tuple[dict[str, Any], bytes, NewCredential], shape: str
) -> None:
    response, challenge, credential = authentication_case
    malformed = AUTHENTICATION_SHAPES[shape](copy.deepcopy(response))
    if shape == "extra-fields":
        assert verify(malformed, challenge, credential, 0) >= 1
        return
    with pytest.raises(PasskeyError):
        verify(malformed, challenge, credential, 0)


@pytest.mark.parametrize(
    "shape",
    [
        name
        for name in COMMON_SHAPES
        if name.startswith(
            ("none", "list", "string", "number", "empty", "no-id", "no-rawId", "id", "rawId", "ids")
        )
    ],
)
def test_credential_id_of_malformed_responses_raises_passkey_error(
    authentication_case: tuple[dict[str, Any], bytes, NewCredential], shape: str
) -> None:
    malformed = COMMON_SHAPES[shape](copy.deepcopy(authentication_case[0]))
    with pytest.raises(PasskeyError):
        credential_id_of(malformed)


def _mutate(rng: random.Random, response: dict[str, Any], members: tuple[str, ...]) -> Any:
    """One random corruption of one member that matters: bit flips, truncation, junk bytes, junk values."""
    name = rng.choice(("id", "rawId", "type", *members))
    holder = response if name in ("id", "rawId", "type") else response["response"]
    value = holder[name]
    roll = rng.random()
    if isinstance(value, str) and roll < 0.6:
        raw = bytearray(b64url_decode(value)) if value else bytearray()
        if raw and roll < 0.3:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        elif raw and roll < 0.45:
            del raw[rng.randrange(len(raw)) :]
        else:
            raw += rng.randbytes(rng.randrange(1, 9))
        holder[name] = b64url(bytes(raw))
    elif roll < 0.8:
        holder[name] = rng.choice([None, 0, -1, 2**70, 1.5, True, "", "=", "!", [], {}, [None], {"a": 1}])
    else:
        del holder[name]
    return response


def test_random_corruptions_are_refused_with_passkey_error_only(
    registration_case: tuple[dict[str, Any], bytes],
    authentication_case: tuple[dict[str, Any], bytes, NewCredential],
) -> None:
    """Anything but PasskeyError escaping fails the test by itself; the counts show the fuzz bites."""
    rng = random.Random(20240611)
    registrations_refused, assertions_accepted = 0, []
    for _ in range(300):
        response, challenge = registration_case
        malformed = _mutate(rng, copy.deepcopy(response), ("clientDataJSON", "attestationObject"))
        try:
            verify_registration(RP, response=malformed, expected_challenge=challenge)
        except PasskeyError:
            registrations_refused += 1
        response, challenge, credential = authentication_case
        malformed = _mutate(
            rng, copy.deepcopy(response), ("clientDataJSON", "authenticatorData", "signature")
        )
        with contextlib.suppress(PasskeyError):
            verify(malformed, challenge, credential, 0)
            assertions_accepted.append(malformed)
    # A "none" attestation signs nothing: a flipped bit in its AAGUID, counter or an unused flag passes.
    assert registrations_refused > 270
    # An assertion is signed over everything that matters: no corruption passes.
    assert assertions_accepted == []


# -- import cost --------------------------------------------------------------------------------------

_PROBE = """
import json, sys
import nimbus_core.factors.webauthn_assertion as a
import nimbus_core.factors.webauthn_encoding as e
import nimbus_core.factors.webauthn_registration
import nimbus_core.platform.settings as s
heavy = ("webauthn", "cbor2", "cryptography", "OpenSSL", "pyasn1")
def loaded():
    return sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy})
print(json.dumps(loaded()))
s.RelyingParty(id="localhost", name="n", origins=("http://localhost",), user_verification="preferred")
try:
    e.credential_id_of({"id": "AAAA", "rawId": "AAAA"})
    e.credential_id_of(None)
except e.PasskeyError:
    pass
print(json.dumps(loaded()))
a.authentication_options(s.RelyingParty(id="localhost", name="n", origins=("http://localhost",),
                         user_verification="preferred"), credential_ids=[b"x"])
print(json.dumps(loaded()))
"""


def test_importing_the_webauthn_modules_does_not_import_py_webauthn() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    at_import, after_pure_calls, after_options = (json.loads(line) for line in result.stdout.splitlines())
    assert at_import == []
    assert after_pure_calls == []
    assert "webauthn" in after_options  # the control: the probe does see webauthn once it is used


def test_client_data_hash_is_what_the_authenticator_signs(
    key: SoftwareAuthenticator, enrolled: NewCredential
) -> None:
    """The software authenticator signs authData || SHA-256(clientDataJSON): checked independently here."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    response, _ = assertion(key, enrolled)
    signed = (
        b64url_decode(response["response"]["authenticatorData"])
        + hashlib.sha256(b64url_decode(response["response"]["clientDataJSON"])).digest()
    )
    public = key.private_key.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(b64url_decode(response["response"]["signature"]), signed, ec.ECDSA(hashes.SHA256()))
