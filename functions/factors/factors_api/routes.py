"""Routes of the second-factor group: enrolment and management of the caller's own factors, and
staff reads and removals of another user's (CONTRACT section 9; the upstream-compatible paths the
client library calls)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from factors_api import service
from nimbus_core.accounts.notices import STAFF
from nimbus_core.domain import ratelimits
from nimbus_core.domain.errors import ErrorCode, SuccessCode
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_core.domain.models import SecondFactor
from nimbus_core.domain.scopes import Scope
from nimbus_core.factors import challenges
from nimbus_core.http.guard import Request
from nimbus_core.http.policy import Policy
from nimbus_core.http.registry import EndpointRouter
from nimbus_core.http.responses import Reply, counted, success

if TYPE_CHECKING:
    from factors_api.models import (
        ConfirmTotpBody,
        ConfirmWebAuthnBody,
        DeleteFactorsBody,
        FactorsQuery,
        StartWebAuthnBody,
    )
    from nimbus_core.http.views import (
        BackupCodesView,
        CountedSuccessView,
        EnrolledFactorView,
        PasskeyChallengeView,
        SecondFactorListView,
        SecondFactorView,
        SuccessView,
        TotpSetupView,
        WebAuthnSetupView,
    )

routes = EndpointRouter(models="factors_api.models")

_MODIFY = (KillSwitch.ACCOUNT_MODIFY,)
# Enrolling, regenerating backup codes and removing factors are never open to scoped sessions,
# whatever their scopes (CONTRACT section 9).
_OWN_CHANGE = Policy(scoped_sessions=False, killswitches=_MODIFY)
_OWN_REVERIFIED = Policy(scoped_sessions=False, killswitches=_MODIFY, reverify=True)
_STAFF_READ = Policy(staff=True, target="uid", scope=Scope.STAFF_READ_SECOND_FACTORS)
# A factor removed by another request between this one's read and its write (or one enrolled
# meanwhile, when the last ones are removed): nothing is removed, 404.
_REMOVED_MEANWHILE = (ErrorCode.INVALID_SECOND_FACTOR_ERROR,)
_STAFF_REMOVE = Policy(
    staff=True,
    audit=True,
    target="uid",
    scope=Scope.STAFF_MODIFY_SECOND_FACTORS,
    scoped_self=False,
    # Removing a staff account's factors is the first step of taking it: never by a scoped session.
    scoped_staff=False,
    reverify=True,
)


@routes.endpoint(
    "POST",
    "/users/me/2fa/totp",
    _OWN_REVERIFIED,
    summary="Start enrolling a TOTP app: its secret and otpauth URI, and a token to confirm with",
)
def start_totp(request: Request) -> Reply[TotpSetupView]:
    """POST /users/me/2fa/totp: 200 with the seed (shown once) and the enrolment token (nothing is
    created until the confirmation, so 200 as upstream)."""
    return Reply(
        service.start_totp(request.deps, request.require_caller(), request.now, answer=request.answer)
    )


@routes.endpoint(
    "POST",
    "/users/me/2fa/totp/confirm",
    _OWN_CHANGE,
    status=201,
    errors=(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,),
    summary="Confirm a TOTP app with a code: the factor (and a first set of backup codes)",
)
def confirm_totp(request: Request[ConfirmTotpBody]) -> Reply[EnrolledFactorView]:
    """POST /users/me/2fa/totp/confirm: 201 ``{id, type, name, codes?}``."""
    factor, codes = service.confirm_totp(
        request.deps,
        request.require_caller(),
        token=request.body.token,
        name=request.body.name,
        code=request.body.code,
        now=request.now,
        actor=request.actor(),
    )
    return _enrolled(factor, codes)


def _enrolled(factor: SecondFactor, codes: list[str] | None) -> Reply[EnrolledFactorView]:
    answer: EnrolledFactorView = {
        "id": factor.id,
        "type": factor.type,
        "name": factor.name,
        "passkey": factor.passkey,
    }
    if codes is not None:
        answer["codes"] = codes
    return Reply(answer)


@routes.endpoint(
    "POST",
    "/users/me/2fa/webauthn",
    _OWN_REVERIFIED,
    summary="Start enrolling a security key or a passkey: creation options and a token to confirm with",
)
def start_webauthn(request: Request[StartWebAuthnBody]) -> Reply[WebAuthnSetupView]:
    """POST /users/me/2fa/webauthn: 200 with the token and PublicKeyCredentialCreationOptions
    (nothing is created until the confirmation, so 200 as upstream). ``passkey: true`` asks for a
    discoverable credential with user verification, which can then sign in alone."""
    caller = request.require_caller()
    return Reply(
        service.start_webauthn(
            request.deps, caller, request.now, passkey=request.body.passkey, answer=request.answer
        )
    )


@routes.endpoint(
    "POST",
    "/users/me/reverify",
    Policy(scoped_sessions=False, rate_limit=ratelimits.PASSKEY_REVERIFY),
    errors=(ErrorCode.INVALID_SECOND_FACTOR_METHOD_ERROR,),
    summary="A challenge to reverify with a passkey instead of the password",
)
def passkey_reverify_challenge(request: Request) -> Reply[PasskeyChallengeView]:
    """POST /users/me/reverify: 200 ``{token, exp, challenge}``, bound to the calling session, whose
    request options name the account's passkeys and require user verification. A reverified
    request then sends ``2fa: {type: "webauthn", token, response}`` and no password. 400
    INVALID_SECOND_FACTOR_METHOD_ERROR for an account without a passkey."""
    caller = request.require_caller()
    challenge = challenges.issue_passkey(
        request.deps, request.now, user=caller.user, session_id=caller.session.id
    )
    return Reply(challenge)


@routes.endpoint(
    "POST",
    "/users/me/2fa/webauthn/confirm",
    _OWN_CHANGE,
    status=201,
    errors=(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR,),
    summary="Confirm a security key with its attestation: the factor (and a first set of backup codes)",
)
def confirm_webauthn(request: Request[ConfirmWebAuthnBody]) -> Reply[EnrolledFactorView]:
    """POST /users/me/2fa/webauthn/confirm: 201 ``{id, type, name, codes?}``."""
    factor, codes = service.confirm_webauthn(
        request.deps,
        request.require_caller(),
        token=request.body.token,
        name=request.body.name,
        response=request.body.response,
        now=request.now,
        actor=request.actor(),
    )
    return _enrolled(factor, codes)


@routes.endpoint(
    "POST",
    "/users/me/2fa/backup",
    _OWN_REVERIFIED,
    status=201,
    errors=(ErrorCode.USER_REQUIRES_SECOND_FACTOR_ERROR,),
    summary="A new set of backup codes (the old ones stop working)",
)
def regenerate_backup_codes(request: Request) -> Reply[BackupCodesView]:
    """POST /users/me/2fa/backup: 201 ``{codes}``, shown once."""
    codes = service.regenerate_backup_codes(
        request.deps, request.require_caller(), actor=request.actor(), now=request.now, answer=request.answer
    )
    return Reply({"codes": codes})


@routes.endpoint(
    "GET",
    "/users/me/2fa",
    Policy(scope=Scope.SECOND_FACTOR_READ),
    summary="The caller's second factors, newest first",
)
def list_factors(request: Request[None, FactorsQuery]) -> Reply[SecondFactorListView]:
    """GET /users/me/2fa: ``{count, items}`` (no read beyond authentication)."""
    user, query = request.require_caller().user, request.query
    count, page = service.list_factors(user, limit=query.limit, offset=query.offset)
    return Reply({"count": count, "items": [f.to_public() for f in page]})


@routes.endpoint(
    "GET",
    "/users/me/2fa/<id>",
    Policy(scope=Scope.SECOND_FACTOR_READ),
    errors=(ErrorCode.INVALID_SECOND_FACTOR_ERROR,),
    summary="One of the caller's second factors",
)
def get_factor(request: Request) -> Reply[SecondFactorView]:
    """GET /users/me/2fa/:id, or 404 INVALID_SECOND_FACTOR_ERROR."""
    return Reply(service.get_factor(request.require_caller().user, request.path["id"]).to_public())


@routes.endpoint(
    "DELETE",
    "/users/me/2fa/<id>",
    _OWN_REVERIFIED,
    errors=(ErrorCode.INVALID_SECOND_FACTOR_ERROR,),
    summary="Remove one of the caller's second factors",
)
def delete_factor(request: Request) -> Reply[SuccessView]:
    """DELETE /users/me/2fa/:id: 200 DELETE_SECOND_FACTOR_SUCCESS."""
    service.remove_factor(
        request.deps,
        request.require_caller().user,
        request.path["id"],
        actor=request.actor(),
        now=request.now,
        answer=request.answer,
    )
    return success(SuccessCode.DELETE_SECOND_FACTOR_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/me/2fa",
    _OWN_REVERIFIED,
    errors=_REMOVED_MEANWHILE,
    summary="Remove several of the caller's second factors (at most 50 ids)",
)
def delete_factors(request: Request[DeleteFactorsBody]) -> Reply[CountedSuccessView]:
    """DELETE /users/me/2fa: 200 DELETE_SECOND_FACTORS_SUCCESS with how many were removed."""
    count = service.remove_factors(
        request.deps,
        request.require_caller().user,
        request.body.ids,
        actor=request.actor(),
        now=request.now,
        answer=request.answer,
    )
    return counted(SuccessCode.DELETE_SECOND_FACTORS_SUCCESS, count)


@routes.endpoint(
    "DELETE",
    "/users/me/2fa/all",
    _OWN_REVERIFIED,
    errors=_REMOVED_MEANWHILE,
    summary="Remove every second factor of the caller (and the backup codes)",
)
def delete_all_factors(request: Request) -> Reply[CountedSuccessView]:
    """DELETE /users/me/2fa/all: 200 DELETE_SECOND_FACTORS_SUCCESS with how many were removed."""
    user = request.require_caller().user
    count = service.remove_factors(
        request.deps,
        user,
        list(user.second_factors),
        actor=request.actor(),
        now=request.now,
        answer=request.answer,
    )
    return counted(SuccessCode.DELETE_SECOND_FACTORS_SUCCESS, count)


# ------------------------------------------------------------------------------ staff: another user's


@routes.endpoint("GET", "/users/<uid>/2fa", _STAFF_READ, summary="A user's second factors, newest first")
def list_user_factors(request: Request[None, FactorsQuery]) -> Reply[SecondFactorListView]:
    """GET /users/:uid/2fa: ``{count, items}``, or 404 INVALID_USER_ERROR."""
    query = request.query
    count, page = service.list_factors(request.target(), limit=query.limit, offset=query.offset)
    return Reply({"count": count, "items": [f.to_public() for f in page]})


@routes.endpoint(
    "GET",
    "/users/<uid>/2fa/<id>",
    _STAFF_READ,
    errors=(ErrorCode.INVALID_SECOND_FACTOR_ERROR,),
    summary="One of a user's second factors",
)
def get_user_factor(request: Request) -> Reply[SecondFactorView]:
    """GET /users/:uid/2fa/:id: 404 INVALID_USER_ERROR or INVALID_SECOND_FACTOR_ERROR."""
    return Reply(service.get_factor(request.target(), request.path["id"]).to_public())


@routes.endpoint(
    "DELETE",
    "/users/<uid>/2fa/<id>",
    _STAFF_REMOVE,
    errors=(ErrorCode.INVALID_SECOND_FACTOR_ERROR,),
    summary="Remove one of a user's second factors",
)
def delete_user_factor(request: Request) -> Reply[SuccessView]:
    """DELETE /users/:uid/2fa/:id: 200 DELETE_SECOND_FACTOR_SUCCESS."""
    service.remove_factor(
        request.deps,
        request.target(),
        request.path["id"],
        actor=STAFF,
        now=request.now,
        answer=request.answer,
    )
    return success(SuccessCode.DELETE_SECOND_FACTOR_SUCCESS)


@routes.endpoint(
    "DELETE",
    "/users/<uid>/2fa",
    _STAFF_REMOVE,
    errors=_REMOVED_MEANWHILE,
    summary="Remove several of a user's second factors (at most 50 ids)",
)
def delete_user_factors(request: Request[DeleteFactorsBody]) -> Reply[CountedSuccessView]:
    """DELETE /users/:uid/2fa: 200 DELETE_SECOND_FACTORS_SUCCESS with how many were removed."""
    count = service.remove_factors(
        request.deps, request.target(), request.body.ids, actor=STAFF, now=request.now, answer=request.answer
    )
    return counted(SuccessCode.DELETE_SECOND_FACTORS_SUCCESS, count)


@routes.endpoint(
    "DELETE",
    "/users/<uid>/2fa/all",
    _STAFF_REMOVE,
    errors=_REMOVED_MEANWHILE,
    summary="Remove every second factor of a user (and the backup codes)",
)
def delete_all_user_factors(request: Request) -> Reply[CountedSuccessView]:
    """DELETE /users/:uid/2fa/all: 200 DELETE_SECOND_FACTORS_SUCCESS with how many were removed."""
    user = request.target()
    count = service.remove_factors(
        request.deps, user, list(user.second_factors), actor=STAFF, now=request.now, answer=request.answer
    )
    return counted(SuccessCode.DELETE_SECOND_FACTORS_SUCCESS, count)
