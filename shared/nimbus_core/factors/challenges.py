"""The second-factor challenge (CONTRACT sections 9 and 16), shared by login, every reverification,
the password reset, and a passkey's sign-in: its whole life here, from issued to used up.

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
3. A passkey answers alone (:func:`issue_passkey`, :func:`sign_in_with_passkey`): at sign-in the
   challenge names no user (the passkey's user handle does), and a refusal counts on the challenge
   only; no login lock applies, as nothing is being guessed.

Which kinds a user holds, what each puts in a challenge and how its answer is checked are the
kinds' (:mod:`nimbus_core.factors.kinds`, looked up once per answer); the answer's shape is
:mod:`nimbus_core.factors.answers`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeIs

from aws_lambda_powertools import Logger

from nimbus_core.domain.activity import Attempt
from nimbus_core.domain.deps import Deps
from nimbus_core.domain.errors import ChallengeRequiredError, ErrorCode, NimbusError
from nimbus_core.domain.models import Challenge, KnownDevice, User
from nimbus_core.domain.ports import WriteOp
from nimbus_core.domain.ratelimits import RECOVERY_WRONG_ANSWERS
from nimbus_core.domain.secret_kinds import CHALLENGE, RECOVERY
from nimbus_core.factors.answers import Answer, passkey_answer
from nimbus_core.factors.kinds import KINDS, FactorKind, held_kinds
from nimbus_core.factors.security_keys import REVERIFY_ENDPOINT, SIGN_IN_ENDPOINT, WEBAUTHN
from nimbus_core.platform import clock, ids, metrics
from nimbus_core.sessions import credentials, known_devices
from nimbus_core.sessions.tokens import hash_secret, new_user_token, secret_matches

if TYPE_CHECKING:
    from nimbus_core.domain.views import PasskeyChallengeView

_log = Logger(child=True)

CHALLENGE_SECONDS = 300
MAX_ATTEMPTS = 5


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
    # Where the answer comes from, for the activity event of a wrong one.
    attempt: Attempt | None = None

    @property
    def login(self) -> bool:
        """Whether this is a login's challenge, the only kind the login lock holds."""
        return self.session_id is None and self.recovery is None


def require(deps: Deps, user: User, binding: Binding, now: float) -> ChallengeRequiredError:
    """A new challenge for ``user``: the 401 that carries it, to raise; the challenge is stored
    when the 401 is answered (its ``writes``, committed by the HTTP guard). With a security key
    enrolled, the 401 carries WebAuthn request options too (only then is py_webauthn imported)."""
    issued = new_user_token(user.id)
    held = held_kinds(user)
    asked = next((o for o in (kind.challenge_options(deps, user) for kind in held) if o is not None), None)
    challenge = _challenge(issued.secret, user.id, binding.endpoint, asked, now, binding=binding)
    return ChallengeRequiredError(
        token=str(issued),
        exp=challenge.exp,
        types=[kind.name for kind in held],
        challenge=asked[0] if asked else None,
        writes=[deps.tokens.put_op(CHALLENGE, challenge)],
    )


def issue_passkey(
    deps: Deps, now: float, *, user: User | None = None, session_id: str | None = None
) -> PasskeyChallengeView:
    """Store a passkey challenge and answer ``{token, exp, challenge}``: for signing in (no
    ``user``: the options name no credential, the challenge no user), or for ``user``'s session
    ``session_id`` to reverify with one of their passkeys (400 INVALID_SECOND_FACTOR_METHOD_ERROR
    when they have none). The options require user verification. One write."""
    asked = WEBAUTHN.request_options(deps, user, passkey=True)
    if asked is None:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
    if user is None:
        secret = token = ids.new_secret()
        endpoint, user_id = SIGN_IN_ENDPOINT, None
    else:
        # The user's token shape, so the answer reads it with the session like any challenge.
        issued = new_user_token(user.id)
        secret, token, endpoint, user_id = issued.secret, str(issued), REVERIFY_ENDPOINT, user.id
    challenge = _challenge(secret, user_id, endpoint, asked, now, binding=Binding(endpoint, session_id))
    deps.tx.commit([deps.tokens.put_op(CHALLENGE, challenge)])
    return {"token": token, "exp": challenge.exp, "challenge": asked[0]}


def _challenge(
    secret: str,
    user_id: str | None,
    endpoint: str,
    asked: tuple[dict[str, Any], str] | None,
    now: float,
    *,
    binding: Binding,
) -> Challenge:
    return Challenge(
        hash=hash_secret(secret),
        user_id=user_id,
        session_id=binding.session_id,
        recovery=binding.recovery,
        endpoint=endpoint,
        webauthn_challenge=asked[1] if asked else None,
        created_at=clock.iso(now),
        exp=int(now) + CHALLENGE_SECONDS,
    )


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
    challenge, user = read if read is not None else _read(deps, token_hash, answer.user_id)
    kind = KINDS[answer.type]
    if (
        not _alive(challenge, answer.secret, now)
        or user is None
        or user.id != answer.user_id
        or challenge.user_id != user.id
        or (expected_user is not None and user.id != expected_user)
        or not _for_this_request(challenge, binding, kind)
        or challenge.session_id != binding.session_id
        or challenge.recovery != binding.recovery
    ):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    device = known_devices.lifts_lock(binding.device, user, now) if binding.login else None
    if binding.login and device is None:
        credentials.refuse_if_locked(user, now)
    if not kind.held_by(user):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
    ops = kind.verified(deps, user, answer, challenge, now)
    if ops is None:
        _wrong(deps, user, token_hash, binding, now, device=device, kind=answer.type)
    return user, _passed(deps, token_hash, ops)


def sign_in_with_passkey(
    deps: Deps, token: str, response: dict[str, Any], now: float
) -> tuple[User, list[WriteOp]]:
    """The user a passkey sign-in challenge's answer proves (found by the user handle the passkey
    gives back: the id enrolment set; challenge and user read in one BatchGetItem), and the writes
    that record it (challenge used up, the passkey's counter moved) for the session's transaction;
    else 401 INVALID_SECOND_FACTOR_RESPONSE_ERROR, the same whether the credential is unknown,
    deleted or wrong, counted on the challenge."""
    token_hash = hash_secret(token)
    given, why = passkey_answer(token, response)
    if why is not None:
        _refused_alone(deps, token_hash, why)
    challenge, user = deps.tokens.read_with_user(CHALLENGE, token_hash, given.user_id)
    if (
        not _alive(challenge, token, now)
        or challenge.user_id is not None
        or challenge.endpoint != SIGN_IN_ENDPOINT
        or challenge.webauthn_challenge is None
    ):
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    if user is None:
        _refused_alone(deps, token_hash, "no such user (deleted, or never ours)")
    ops = WEBAUTHN.verified(deps, user, given, challenge, now)
    if ops is None:
        _refused_alone(deps, token_hash, "not one of the user's passkeys, or not proven")
    return user, _passed(deps, token_hash, ops)


def _read(deps: Deps, token_hash: str, user_id: str) -> tuple[Challenge | None, User | None]:
    return deps.tokens.read_with_user(CHALLENGE, token_hash, user_id)


def _alive(challenge: Challenge | None, secret: str, now: float) -> TypeIs[Challenge]:
    """Whether ``challenge`` is there, is the one ``secret`` names, and may still be answered."""
    return (
        challenge is not None
        and secret_matches(secret, challenge.hash)
        and challenge.exp > now
        and challenge.attempts < MAX_ATTEMPTS
    )


def _for_this_request(challenge: Challenge, binding: Binding, kind: FactorKind) -> bool:
    """Whether ``challenge`` may answer the request ``binding`` describes: one issued for its
    endpoint, or, on a session's reverification, one the answering kind carries over (a passkey
    reverification's, answered by a passkey)."""
    if challenge.endpoint == binding.endpoint:
        return True
    return binding.session_id is not None and kind.carries_over(challenge)


def _passed(deps: Deps, token_hash: str, ops: list[WriteOp]) -> list[WriteOp]:
    """A right answer's writes: the challenge used up (single use, still alive), then the kind's."""
    metrics.count(metrics.Event.SECOND_FACTOR_PASSED)
    return [deps.tokens.take_op(CHALLENGE, token_hash, max_attempts=MAX_ATTEMPTS), *ops]


def _wrong(
    deps: Deps,
    user: User,
    token_hash: str,
    binding: Binding,
    now: float,
    *,
    device: KnownDevice | None,
    kind: str,
) -> NoReturn:
    """Count a wrong answer (of ``kind``) on its challenge and on the limit of the request it
    answers; 401."""
    deps.tokens.count_wrong_answer(CHALLENGE, token_hash)
    metrics.count(metrics.Event.SECOND_FACTOR_FAILED)
    wrong = ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR
    attempt = binding.attempt.answering(kind) if binding.attempt else None
    if binding.recovery is not None:
        # The token takes RECOVERY_WRONG_ANSWERS, then is void: new challenges buy no more guesses.
        deps.tokens.count_wrong_answer(RECOVERY, binding.recovery, limit=RECOVERY_WRONG_ANSWERS)
    elif binding.session_id is not None:
        # 429 past the session's limit
        credentials.record_reverify_failure(
            deps, user.id, binding.session_id, now, attempt=attempt, code=wrong
        )
    else:
        # 429 when it locks the account
        credentials.record_failure(deps, user, now, device=device, attempt=attempt, code=wrong)
    raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)


def _refused_alone(deps: Deps, token_hash: str, reason: str) -> NoReturn:
    """Count a passkey's refused answer on its challenge (if it is still there); the one 401."""
    _log.info("passkey sign-in refused", extra={"reason": reason})
    deps.tokens.count_wrong_answer(CHALLENGE, token_hash)
    metrics.count(metrics.Event.SECOND_FACTOR_FAILED)
    raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
