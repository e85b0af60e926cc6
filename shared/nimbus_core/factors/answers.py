"""The ``2fa`` object a request answers a second-factor challenge with (CONTRACT section 9):
``{token, type, code | response}``, checked for shape before anything is read, and the answer a
passkey gives alone at sign-in (CONTRACT section 16). Which ``type`` exists and whether it answers
with a ``code`` or a ``response`` is the factor kinds' to say (:data:`nimbus_core.factors.kinds.KINDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.factors.kinds import KINDS
from nimbus_core.factors.security_keys import WEBAUTHN
from nimbus_core.factors.webauthn_encoding import PasskeyError, user_handle_of
from nimbus_core.platform import ids
from nimbus_core.sessions.tokens import hash_secret, parse_user_token

_MAX_CODE = 64


@dataclass(frozen=True, slots=True)
class Answer:
    """A well-formed answer: the user it claims (named by the challenge's token, or by a passkey's
    user handle at sign-in; empty when a passkey named none of ours), the token's secret, the
    factor kind and what it answers with."""

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
    token, type_ = value.get("token"), value.get("type")
    if not isinstance(token, str) or not isinstance(type_, str):
        fields = [name for name, v in (("2fa.token", token), ("2fa.type", type_)) if not isinstance(v, str)]
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=fields)
    kind = KINDS.get(type_)
    if kind is None:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR)
    code, response = value.get("code"), value.get("response")
    if kind.answered_with == "response" and not isinstance(response, dict):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["2fa.response"])
    if kind.answered_with == "code" and not isinstance(code, str):
        raise NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=["2fa.code"])
    parsed = parse_user_token(token)
    if parsed is None:
        raise NimbusError(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR)
    return Answer(
        user_id=parsed.user_id,
        secret=parsed.secret,
        type=kind.name,
        code=code[:_MAX_CODE] if kind.answered_with == "code" and isinstance(code, str) else None,
        response=response if kind.answered_with == "response" and isinstance(response, dict) else None,
    )


def passkey_answer(token: str, response: dict[str, Any]) -> tuple[Answer, str | None]:
    """A passkey's answer at sign-in: the user its user handle names (the id enrolment set), and
    why it names none of ours (None when it does), for the refusal to log."""
    why: str | None = None
    try:
        user_id = user_handle_of(response)
    except PasskeyError as refused:
        user_id, why = "", str(refused)
    if why is None and not ids.is_id(user_id):
        user_id, why = "", "the user handle is not one of our ids"
    return Answer(user_id=user_id, secret=token, type=WEBAUTHN.name, code=None, response=response), why


def answered_hash(value: Any) -> str | None:
    """The hash of the challenge a ``2fa`` value names, when it names one (to read it early)."""
    token = value.get("token") if isinstance(value, dict) else None
    parsed = parse_user_token(token) if isinstance(token, str) else None
    return hash_secret(parsed.secret) if parsed is not None else None
