"""The second-factor challenge (CONTRACT section 9), shared by login and every reverification.

1. A correct password on an account with a factor answers 401 SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR
   with ``token`` (``<userId>.<secret>``: random, stored hashed, 5 minutes, single use), ``exp``,
   ``types`` and, with a key enrolled, ``challenge`` (WebAuthn request options). The challenge is
   bound to the user and, on reverification, to the calling session and the endpoint.
2. The client repeats the request with ``2fa: {token, type, code | response}`` instead of the
   password. A right answer is recorded in the request's own transaction (with the new session at
   login, with the change on reverification): the challenge is used up and the factor's replay
   guard moves (TOTP step, backup code spent, WebAuthn counter). A wrong one is 401
   INVALID_SECOND_FACTOR_RESPONSE_ERROR, counted on the challenge (the 5th kills it) and on the
   limit of the request it answers (:class:`Binding`): the login lock at login, the session's own
   limit at reverification, the recovery token at a password reset. Only login is refused by the
   login lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import Challenge, KnownDevice, User
from nimbus_core.domain.ports import CounterWindowMovedError, WriteOp
from nimbus_core.domain.ratelimits import RECOVERY_WRONG_ANSWERS
from nimbus_core.domain.secret_kinds import CHALLENGE, RECOVERY
from nimbus_core.factors import otp, seeds, webauthn_assertion, webauthn_encoding
from nimbus_core.platform import clock, metrics
from nimbus_core.sessions import credentials, known_devices
from nimbus_core.sessions.tokens import hash_secret, new_user_token, parse_user_token, secret_matches

_log = Logger(child=True)

CHALLENGE_SECONDS = 300
MAX_ATTEMPTS = 5
# Where a passkey reverification's challenge is issued (see nimbus_core.factors.passkey_sign_in).
PASSKEY_REVERIFY_ENDPOINT = "POST /users/me/reverify"
_MAX_CODE = 64


class ChallengeRequiredError(NimbusError):
    """The 401 that asks for a second factor. Not counted by the endpoint's rate limit (the answer
    that completes it is), so answering never costs a second hit.

    ``writes`` store the challenge. They are committed by whoever answers the request (the HTTP
    guard, see :func:`store`), together with the rate limit's give-back, in one transaction.
    """

    def __init__(
        self,
        *,
        token: str,
        exp: int,
        types: list[str],
        challenge: dict[str, Any] | None,
        writes: list[WriteOp],
    ) -> None:
        extra: dict[str, Any] = {"token": token, "exp": exp, "types": types}
        if challenge is not None:
            extra["challenge"] = challenge
        super().__init__(ErrorCode.SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR, **extra)
        self.writes = writes


@dataclass(frozen=True, slots=True)
class Binding:
    """What a challenge is bound to besides its user: the endpoint, and the session reverifying
    or the recovery token resetting the password. It also says where wrong answers count: on the
    session, on the recovery token, or (neither: a login) on the account's login lock."""

    endpoint: str
    session_id: str | None = None
    recovery: str | None = None
    # At login: the known device the request presented (read, not yet checked against the user).
    device: KnownDevice | None = None

    @property
    def login(self) -> bool:
        """Whether this is a login's challenge, the only kind the login lock holds."""
        return self.session_id is None and self.recovery is None


def require(deps: Deps, user: User, binding: Binding, now: float) -> ChallengeRequiredError:
    """A new challenge for ``user``: the 401 that carries it, to raise; the challenge is stored
    when the 401 is answered (:func:`store`). With a security key enrolled, the 401 carries WebAuthn
    request options too (only then is py_webauthn imported)."""
    issued = new_user_token(user.id)
    options, webauthn_challenge = _webauthn_options(deps, user)
    challenge = Challenge(
        hash=hash_secret(issued.secret),
        user_id=user.id,
        session_id=binding.session_id,
        recovery=binding.recovery,
        endpoint=binding.endpoint,
        webauthn_challenge=webauthn_challenge,
        created_at=clock.iso(now),
        exp=int(now) + CHALLENGE_SECONDS,
    )
    return ChallengeRequiredError(
        token=str(issued),
        exp=challenge.exp,
        types=user.second_factor_types(),
        challenge=options,
        writes=[deps.tokens.put_op(CHALLENGE, challenge)],
    )


def store(deps: Deps, required: ChallengeRequiredError, *, give_back: WriteOp | None = None) -> None:
    """Store the challenge ``required`` carries, with the rate limit's ``give_back`` in the same
    transaction (one round trip). A window that ended meanwhile has nothing to give back: the
    challenge is then stored alone."""
    try:
        deps.tx.commit([*required.writes, *([give_back] if give_back else [])])
    except CounterWindowMovedError:
        deps.tx.commit(required.writes)
    metrics.count(metrics.Event.SECOND_FACTOR_CHALLENGED)


def _webauthn_options(deps: Deps, user: User) -> tuple[dict[str, Any] | None, str | None]:
    """Request options for the user's keys and their challenge (base64url), or (None, None)."""
    keys = webauthn_encoding.stored_credential_ids(user.webauthn_factors())
    if not keys:
        return None, None
    options, raw = webauthn_assertion.authentication_options(
        deps.settings.relying_party(), credential_ids=keys
    )
    return options, webauthn_encoding.b64url(raw)


@dataclass(frozen=True, slots=True)
class Answer:
    """A well-formed ``2fa`` object."""

    user_id: str
    secret: str
    type: str
    code: str | None
    response: dict[str, Any] | None


def parse_answer(value: Any) -> Answer:
    """The ``2fa`` object, or 400 MISSING_FIELDS_ERROR naming what is missing or of the wrong type
    (``2fa``, ``2fa.token``, ``2fa.type``, ``2fa.code``/``2fa.response``); an unknown ``type`` is
    400 INVALID_SECOND_FACTOR_METHOD_ERROR; a token of the wrong shape is simply unknown (401)."""
    if not isinstance(value, dict):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["2fa"])
    token, kind = value.get("token"), value.get("type")
    if not isinstance(token, str) or not isinstance(kind, str):
        fields = [name for name, v in (("2fa.token", token), ("2fa.type", kind)) if not isinstance(v, str)]
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=fields)
    if kind not in {"totp", "backup", "webauthn"}:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
    code, response = value.get("code"), value.get("response")
    if kind == "webauthn" and not isinstance(response, dict):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["2fa.response"])
    if kind != "webauthn" and not isinstance(code, str):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["2fa.code"])
    parsed = parse_user_token(token)
    if parsed is None:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    return Answer(
        user_id=parsed.user_id,
        secret=parsed.secret,
        type=kind,
        code=code[:_MAX_CODE] if isinstance(code, str) else None,
        response=response if isinstance(response, dict) else None,
    )


def answered_hash(value: Any) -> str | None:
    """The hash of the challenge a ``2fa`` value names, when it names one (to read it early)."""
    token = value.get("token") if isinstance(value, dict) else None
    parsed = parse_user_token(token) if isinstance(token, str) else None
    return hash_secret(parsed.secret) if parsed is not None else None


def answer(
    deps: Deps,
    answer: Answer,
    binding: Binding,
    now: float,
    *,
    expected_user: str | None,
    read: tuple[Challenge | None, User] | None = None,
) -> tuple[User, list[WriteOp]]:
    """Check ``answer`` against its challenge: the user it authenticates and the writes that record
    it (challenge used up, replay guard moved), for the caller to commit, alone or with its own
    change. ``expected_user`` is the reverifying caller (None at login, where the challenge alone
    names the user); ``read`` the challenge and user already read with the caller's session. A
    wrong answer raises (after counting it)."""
    token_hash = hash_secret(answer.secret)
    challenge, user = (
        read if read is not None else deps.tokens.read_with_user(CHALLENGE, token_hash, answer.user_id)
    )
    if (
        challenge is None
        or user is None
        or user.id != answer.user_id
        or not secret_matches(answer.secret, challenge.hash)
        or challenge.user_id != user.id
        or (expected_user is not None and user.id != expected_user)
        or not _for_this_request(challenge, binding, answer)
        or challenge.session_id != binding.session_id
        or challenge.recovery != binding.recovery
        or challenge.exp <= now
        or challenge.attempts >= MAX_ATTEMPTS
    ):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    device = known_devices.lifts_lock(binding.device, user, now) if binding.login else None
    if binding.login and device is None:
        credentials.refuse_if_locked(user, now)
    if answer.type not in user.second_factor_types():
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
    ops = _verified_ops(deps, user, answer, challenge, now)
    if ops is None:
        _wrong(deps, user, token_hash, binding, now, device=device)
        raise AssertionError("unreachable")  # pragma: no cover - _wrong always raises
    metrics.count(metrics.Event.SECOND_FACTOR_PASSED)
    return user, [deps.tokens.take_op(CHALLENGE, token_hash, max_attempts=MAX_ATTEMPTS), *ops]


def _for_this_request(challenge: Challenge, binding: Binding, answer: Answer) -> bool:
    """Whether ``challenge`` may answer the request ``binding`` describes: one issued for its
    endpoint, or a passkey reverification's (POST /users/me/reverify, bound to the session) for
    any endpoint that session reverifies on, answered by a passkey."""
    if challenge.endpoint == binding.endpoint:
        return True
    return (
        challenge.endpoint == PASSKEY_REVERIFY_ENDPOINT
        and binding.session_id is not None
        and answer.type == "webauthn"
    )


def _verified_ops(
    deps: Deps, user: User, answer: Answer, challenge: Challenge, now: float
) -> list[WriteOp] | None:
    """The writes that record a right answer, or None for a wrong one."""
    if answer.type == "totp" and answer.code is not None:
        for factor in user.second_factors.values():
            # Each seed is opened only when a code is checked against it (sealed: docs/security.md).
            seed = seeds.factor_seed(deps, user, factor) if factor.type == "totp" else None
            if seed:
                step = otp.totp_step(seed, answer.code, now, factor_id=factor.id)
                if step is not None and step > factor.last_step:
                    return [deps.users.use_totp_step_op(user, factor.id, step, clock.iso(now))]
        return None
    if answer.type == "backup" and answer.code is not None:
        # Ours, or a digest imported from upstream (kept until the user makes a new set).
        code_hash = next((k for k in otp.backup_code_keys(answer.code) if k in user.backup_codes), None)
        if code_hash is None:
            return None
        return [deps.users.use_backup_code_op(user, code_hash, clock.iso(now))]
    if answer.type == "webauthn" and answer.response is not None and challenge.webauthn_challenge:
        # Only a passkey, with user verification, answers a passkey reverification's challenge.
        passkey = challenge.endpoint == PASSKEY_REVERIFY_ENDPOINT
        expected = challenge.webauthn_challenge
        return verified_key_ops(deps, user, answer.response, expected, now, passkey=passkey)
    return None


def verified_key_ops(
    deps: Deps, user: User, response: dict[str, Any], expected_challenge: str, now: float, *, passkey: bool
) -> list[WriteOp] | None:
    """A WebAuthn assertion checked against the key of ``user`` it names (a ``passkey`` only, with
    user verification, when ``passkey``) and the challenge's request options (``expected_challenge``,
    base64url): the write that moves the key's signature counter (compare-and-set), or None when
    refused."""
    try:
        credential_id = webauthn_encoding.credential_id_of(response)
        named = webauthn_encoding.b64url(credential_id)
        keys = user.passkey_factors() if passkey else user.webauthn_factors()
        factor = next((f for f in keys if f.credential_id == named), None)
        if factor is None or factor.public_key is None:
            return None
        new_count = webauthn_assertion.verify_authentication(
            deps.settings.relying_party(),
            response=response,
            expected_challenge=webauthn_encoding.b64url_decode(expected_challenge),
            credential_id=credential_id,
            credential_public_key=webauthn_encoding.b64url_decode(factor.public_key),
            current_sign_count=factor.sign_count,
            passkey=passkey,
        )
    except webauthn_encoding.PasskeyError as refused:
        _log.info("WebAuthn answer refused", extra={"reason": str(refused)})
        return None
    used_at = clock.iso(now)
    return [
        deps.users.use_sign_count_op(user, factor.id, seen=factor.sign_count, new=new_count, used_at=used_at)
    ]


def _wrong(
    deps: Deps, user: User, token_hash: str, binding: Binding, now: float, *, device: KnownDevice | None
) -> None:
    """Count a wrong answer on its challenge and on the limit of the request it answers; 401."""
    deps.tokens.count_wrong_answer(CHALLENGE, token_hash)
    metrics.count(metrics.Event.SECOND_FACTOR_FAILED)
    if binding.recovery is not None:
        # The token takes RECOVERY_WRONG_ANSWERS, then is void: new challenges buy no more guesses.
        deps.tokens.count_wrong_answer(RECOVERY, binding.recovery, limit=RECOVERY_WRONG_ANSWERS)
    elif binding.session_id is not None:
        credentials.record_reverify_failure(deps, user.id, binding.session_id, now)  # 429 past the limit
    else:
        credentials.record_failure(deps, user, now, device=device)  # 429 when it locks the account
    raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
