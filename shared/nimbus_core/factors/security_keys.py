"""Security keys and passkeys as a kind of second factor (:class:`nimbus_core.factors.kinds.FactorKind`):
a challenge carries WebAuthn request options naming the user's keys, and the answer is an assertion
checked with py_webauthn against the key it names (:mod:`nimbus_core.factors.webauthn_assertion`);
a right one moves the key's signature counter, compare-and-set, so two racing assertions cannot
both pass.

A passkey also answers alone (CONTRACT section 16): the challenges of a passkey sign-in and of a
passkey reverification (:data:`PASSKEY_ONLY`) are answered by a passkey only, with user
verification.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from aws_lambda_powertools import Logger

from nimbus_core.factors import webauthn_assertion
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
    from nimbus_core.domain.models import Challenge, User
    from nimbus_core.domain.ports import WriteOp
    from nimbus_core.factors.answers import Answer

_log = Logger(child=True)

SIGN_IN_ENDPOINT: Final = "POST /login/passkey"
# Where a passkey reverification's challenge is issued; it answers any endpoint its session
# reverifies on (see nimbus_core.factors.challenges).
REVERIFY_ENDPOINT: Final = "POST /users/me/reverify"
# The challenges only a passkey answers, with user verification.
PASSKEY_ONLY: Final = frozenset({SIGN_IN_ENDPOINT, REVERIFY_ENDPOINT})


class SecurityKeysKind:
    """WebAuthn: a security key, or a passkey (a discoverable key that verified its user)."""

    name = "webauthn"
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


WEBAUTHN: Final = SecurityKeysKind()
