"""Security keys and passkeys as a kind of second factor (:class:`nimbus_core.factors.kinds.FactorKind`):
a challenge carries WebAuthn request options naming the user's keys, and the answer is an assertion
checked with py_webauthn against the key it names (:mod:`nimbus_core.factors.webauthn_assertion`);
a right one moves the key's signature counter, compare-and-set, so two racing assertions cannot
both pass.

A passkey also answers alone (CONTRACT section 16): the challenges of a passkey sign-in and of a
passkey reverification (:data:`PASSKEY_ONLY`) are answered by a passkey only, with user
verification.

Enrolled in two steps: creation options (the user's keys excluded; for a passkey, a discoverable
credential with user verification) and their challenge kept with the pending enrolment; the
browser's attestation, verified (:mod:`nimbus_core.factors.webauthn_registration`), confirms it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from aws_lambda_powertools import Logger
from typing_extensions import TypedDict

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.factors import webauthn_assertion, webauthn_registration
from nimbus_core.factors.webauthn_encoding import (
    PasskeyError,
    b64url,
    b64url_decode,
    credential_id_of,
    stored_credential_ids,
)
from nimbus_core.platform import clock

if TYPE_CHECKING:
    from nimbus_core.domain.deps import Deps
    from nimbus_core.domain.models import Challenge, PendingFactor, SecondFactor, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer

_log = Logger(child=True)

SIGN_IN_ENDPOINT: Final = "POST /login/passkey"
# Where a passkey reverification's challenge is issued; it answers any endpoint its session
# reverifies on (see nimbus_core.factors.challenges).
REVERIFY_ENDPOINT: Final = "POST /users/me/reverify"
# The challenges only a passkey answers, with user verification.
PASSKEY_ONLY: Final = frozenset({SIGN_IN_ENDPOINT, REVERIFY_ENDPOINT})


class CreationOptions(TypedDict, closed=True):
    """What a security key's enrolment shows once: the PublicKeyCredentialCreationOptions (JSON
    form) for ``navigator.credentials.create``."""

    rp: dict[str, str]
    user: dict[str, str]
    challenge: str
    pubKeyCredParams: list[dict[str, str | int]]
    timeout: int
    excludeCredentials: list[dict[str, str | list[str]]]
    authenticatorSelection: dict[str, str | bool]
    attestation: str
    extensions: dict[str, bool]


class SecurityKeysKind:
    """WebAuthn: a security key, or a passkey (a discoverable key that verified its user)."""

    name = "webauthn"
    factor_type: Literal["totp", "webauthn"] = "webauthn"
    answered_with: Literal["code", "response"] = "response"

    def held_by(self, user: User) -> bool:
        """Whether ``user`` has a security key or a passkey."""
        return any(f.type == self.name for f in user.second_factors.values())

    def challenge_options(self, deps: Deps, user: User) -> tuple[dict[str, Any], str] | None:
        """Request options naming the user's keys, and their challenge (base64url); None when no
        stored key can be named (each damaged one is logged)."""
        return self.request_options(deps, user, passkey=False)

    def request_options(
        self, deps: Deps, user: User | None, *, passkey: bool
    ) -> tuple[dict[str, Any], str] | None:
        """Request options and their challenge (base64url): for ``user``'s keys (their passkeys
        only, with user verification, when ``passkey``), or, with no ``user``, for any passkey
        the authenticator holds for us (a sign-in). None when ``user`` has no key to name."""
        keys: list[bytes] = []
        if user is not None:
            keys = stored_credential_ids(user.passkey_factors() if passkey else user.webauthn_factors())
            if not keys:
                return None
        rp = deps.settings.relying_party()
        options, raw = webauthn_assertion.authentication_options(rp, credential_ids=keys, passkey=passkey)
        return options, b64url(raw)

    def carries_over(self, challenge: Challenge) -> bool:
        """A passkey reverification's challenge answers any endpoint of its session."""
        return challenge.endpoint == REVERIFY_ENDPOINT

    def verified(
        self, deps: Deps, user: User, answer: Answer, challenge: Challenge, now: float
    ) -> list[WriteOp] | None:
        """The write that moves the named key's signature counter, or None when refused: no key
        of the user's (a passkey, for :data:`PASSKEY_ONLY` challenges) or not proven."""
        if answer.response is None or not challenge.webauthn_challenge:
            return None
        passkey = challenge.endpoint in PASSKEY_ONLY
        try:
            credential_id = credential_id_of(answer.response)
            named = b64url(credential_id)
            keys = user.passkey_factors() if passkey else user.webauthn_factors()
            factor = next((f for f in keys if f.credential_id == named), None)
            if factor is None or factor.public_key is None:
                return None
            new_count = webauthn_assertion.verify_authentication(
                deps.settings.relying_party(),
                response=answer.response,
                expected_challenge=b64url_decode(challenge.webauthn_challenge),
                credential_id=credential_id,
                credential_public_key=b64url_decode(factor.public_key),
                current_sign_count=factor.sign_count,
                passkey=passkey,
            )
        except PasskeyError as refused:
            _log.info("WebAuthn answer refused", extra={"reason": str(refused)})
            return None
        used_at = clock.iso(now)
        return [
            deps.users.use_sign_count_op(
                user, factor.id, seen=factor.sign_count, new=new_count, used_at=used_at
            )
        ]

    def started(
        self, deps: Deps, user: User, token_hash: str, *, passkey: bool
    ) -> tuple[dict[str, Any], CreationOptions]:
        """Creation options for ``navigator.credentials.create`` (shown), their challenge kept."""
        options, challenge = webauthn_registration.registration_options(
            deps.settings.relying_party(),
            user_id=user.id,
            username=user.username,
            exclude_credential_ids=stored_credential_ids(user.webauthn_factors()),
            passkey=passkey,
        )
        # py_webauthn's JSON is untyped: each key the options hold is taken by name.
        shown: CreationOptions = {
            "rp": options["rp"],
            "user": options["user"],
            "challenge": options["challenge"],
            "pubKeyCredParams": options["pubKeyCredParams"],
            "timeout": options["timeout"],
            "excludeCredentials": options["excludeCredentials"],
            "authenticatorSelection": options["authenticatorSelection"],
            "attestation": options["attestation"],
            "extensions": options["extensions"],
        }
        return {"webauthn_challenge": b64url(challenge), "passkey": passkey}, shown

    def confirmed(
        self, deps: Deps, user: User, pending: PendingFactor, proof: object, *, factor_id: str, now: float
    ) -> tuple[dict[str, Any], str | None]:
        """The key the attestation ``proof`` verifies (py_webauthn: challenge, origin, rp id, user
        presence and verification as configured, algorithm; for a passkey, user verification and a
        key the browser does not call non-discoverable); 401 when refused or the user has it already."""
        if pending.webauthn_challenge is None or not isinstance(proof, dict):
            raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
        try:
            key = webauthn_registration.verify_registration(
                deps.settings.relying_party(),
                response=proof,
                expected_challenge=b64url_decode(pending.webauthn_challenge),
                passkey=pending.passkey,
            )
        except PasskeyError as refused:
            _log.info("WebAuthn enrolment refused", extra={"reason": str(refused)})
            raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR) from refused
        credential_id = b64url(key.credential_id)
        if any(f.credential_id == credential_id for f in user.webauthn_factors()):
            raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
        fields = {
            "credential_id": credential_id,
            "public_key": b64url(key.public_key),
            "sign_count": key.sign_count,
            "passkey": pending.passkey,
        }
        return fields, None

    def label(self, factor: SecondFactor) -> str:
        """A passkey, or a security key."""
        return "Passkey" if factor.passkey else "Security key"


WEBAUTHN: Final = SecurityKeysKind()
