"""Signing in and reverifying with a passkey alone (CONTRACT section 16).

A passkey is a discoverable WebAuthn credential enrolled with user verification: the PIN or
biometric stands for the password and the key for the second factor, so its answer alone opens a
session or passes a reverification. Two steps, as a second-factor challenge:

1. :func:`issue` stores a challenge (5 minutes, single use, stored under the hash of its token)
   and answers ``{token, exp, challenge}``: request options that require user verification. At
   sign-in they name no credential and the challenge no user (the authenticator offers the
   passkeys it holds for us); on reverification they name the account's passkeys and the
   challenge is bound to the session.
2. At sign-in, :func:`answer_sign_in` finds the user by the user handle the passkey gives back (the
   id enrolment set), reads the challenge and the user in one BatchGetItem, and checks the
   assertion with py_webauthn against that user's passkey. A reverification's answer goes through
   :func:`nimbus_core.factors.challenges.answer` like any second factor's.

Every refusal at sign-in is the same 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR, whether the
credential is unknown, deleted or wrong; it is counted on the challenge (the 5th kills it). No
login lock applies: no secret is being guessed, and the endpoint's own limit holds the rate.
"""

from __future__ import annotations

from typing import Any, NoReturn

from aws_lambda_powertools import Logger

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Challenge, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.secret_kinds import CHALLENGE
from nimbus_core.factors import webauthn_assertion, webauthn_encoding
from nimbus_core.factors.challenges import (
    CHALLENGE_SECONDS,
    MAX_ATTEMPTS,
    PASSKEY_REVERIFY_ENDPOINT,
    verified_key_ops,
)
from nimbus_core.platform import clock, ids, metrics
from nimbus_core.sessions.tokens import hash_secret, new_user_token, secret_matches

_log = Logger(child=True)

SIGN_IN_ENDPOINT = "POST /login/passkey"
REVERIFY_ENDPOINT = PASSKEY_REVERIFY_ENDPOINT


def issue(
    deps: Deps, now: float, *, user: User | None = None, session_id: str | None = None
) -> dict[str, Any]:
    """Store a passkey challenge and answer ``{token, exp, challenge}``: for signing in (no
    ``user``), or for ``user``'s session ``session_id`` to reverify with one of their passkeys
    (400 INVALID_SECOND_FACTOR_METHOD_ERROR when they have none). One write."""
    if user is None:
        keys: list[bytes] = []
        secret = token = ids.new_secret()
        user_id = None
    else:
        keys = webauthn_encoding.stored_credential_ids(user.passkey_factors())
        if not keys:
            raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
        # The user's token shape, so the answer reads it with the session like any challenge.
        issued = new_user_token(user.id)
        secret, token, user_id = issued.secret, str(issued), user.id
    rp = deps.settings.relying_party()
    options, raw = webauthn_assertion.authentication_options(rp, credential_ids=keys, passkey=True)
    challenge = Challenge(
        hash=hash_secret(secret),
        user_id=user_id,
        session_id=session_id,
        endpoint=SIGN_IN_ENDPOINT if user is None else REVERIFY_ENDPOINT,
        webauthn_challenge=webauthn_encoding.b64url(raw),
        created_at=clock.iso(now),
        exp=int(now) + CHALLENGE_SECONDS,
    )
    deps.tx.commit([deps.tokens.put_op(CHALLENGE, challenge)])
    return {"token": token, "exp": challenge.exp, "challenge": options}


def answer_sign_in(
    deps: Deps, token: str, response: dict[str, Any], now: float
) -> tuple[User, list[WriteOp]]:
    """The user a sign-in challenge's answer proves, and the writes that record it (challenge used
    up, the passkey's counter moved) for the session's transaction; else 401
    INVALID_SECOND_FACTOR_RESPONSE_ERROR, counted on the challenge."""
    token_hash = hash_secret(token)
    try:
        user_id = webauthn_encoding.user_handle_of(response)
    except webauthn_encoding.PasskeyError as refused:
        return _refused(deps, token_hash, str(refused))
    if not ids.is_id(user_id):
        return _refused(deps, token_hash, "the user handle is not one of our ids")
    challenge, user = deps.tokens.read_with_user(CHALLENGE, token_hash, user_id)
    if (
        challenge is None
        or not secret_matches(token, challenge.hash)
        or challenge.user_id is not None
        or challenge.endpoint != SIGN_IN_ENDPOINT
        or challenge.exp <= now
        or challenge.attempts >= MAX_ATTEMPTS
        or challenge.webauthn_challenge is None
    ):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    if user is None:
        return _refused(deps, token_hash, "no such user (deleted, or never ours)")
    ops = verified_key_ops(deps, user, response, challenge.webauthn_challenge, now, passkey=True)
    if ops is None:
        return _refused(deps, token_hash, "not one of the user's passkeys, or not proven")
    metrics.count(metrics.Event.SECOND_FACTOR_PASSED)
    return user, [deps.tokens.take_op(CHALLENGE, token_hash, max_attempts=MAX_ATTEMPTS), *ops]


def _refused(deps: Deps, token_hash: str, reason: str) -> NoReturn:
    """Count a refused answer on its challenge (if it is still there) and answer the one 401."""
    _log.info("passkey sign-in refused", extra={"reason": reason})
    deps.tokens.count_wrong_answer(CHALLENGE, token_hash)
    metrics.count(metrics.Event.SECOND_FACTOR_FAILED)
    raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
