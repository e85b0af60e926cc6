"""Second factors and backup codes, stored in the user item: each write is one conditional update
of that item, so a concurrent enrolment, removal or replayed answer is refused, never lost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.adapters.transactions import Explain, TransactOp, fails_with
from nimbus_core.adapters.user_items import NOT_EXISTS, UsersTable, credential_claim, number, user_key
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.domain.ports import WriteOp


class UserFactors(UsersTable):
    """Enrolling, removing and using second factors, and the backup codes."""

    def add_factor_op(
        self,
        user: User,
        factor: SecondFactor,
        *,
        max_factors: int,
        backup_codes: Sequence[str] | None = None,
        sealed_secret: str | None = None,
    ) -> WriteOp:
        """Enrol ``factor`` (and, with ``backup_codes``, a first set of backup codes, in the same
        write) with its ``sealed_secret`` (a TOTP seed, stored as ``totpSecret#<factor id>``): the
        user must still exist and have room (INVALID_FIELDS_ERROR beyond ``max_factors``); a
        concurrent enrolment of the same id is refused."""
        stored = to_item(stored_values(factor))
        update = "SET secondFactors.#f = :factor"
        values: dict[str, Any] = {":factor": {"M": stored}, ":max": number(max_factors)}
        names = {"#f": factor.id}
        if sealed_secret is not None:
            update += ", #secret = :secret"
            names["#secret"] = totp_secret_attribute(factor.id)
            values[":secret"] = {"S": sealed_secret}
        if backup_codes is not None:
            update += ", backupCodes = :codes"
            values[":codes"] = {"M": {h: {"BOOL": True} for h in backup_codes}}
        return self._factor_update(
            user,
            update,
            condition="attribute_not_exists(secondFactors.#f) AND size(secondFactors) < :max",
            names=names,
            values=values,
            explain=lambda old: (
                NimbusError(ErrorCode.INVALID_SESSION_ERROR)
                if old is None
                else NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=["type"])
            ),
        )

    def claim_credential_op(self, user: User, factor: SecondFactor) -> WriteOp:
        """Claim a security key's credential id for ``user``, in the transaction that enrols it: an
        id already stored for any account (a cloned or shared authenticator's, or one enrolled by
        another account first) is INVALID_SECOND_FACTOR_RESPONSE_ERROR."""
        item = {"pk": credential_claim(factor.credential_id or ""), "userId": user.id, "factorId": factor.id}
        return TransactOp(
            {"Put": {"TableName": self._table, "Item": to_item(item), "ConditionExpression": NOT_EXISTS}},
            fails_with(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR),
        )

    def release_credentials_ops(self, user: User, factor_ids: Sequence[str]) -> list[WriteOp]:
        """Release the credential ids of ``user``'s security keys among ``factor_ids``, with their
        removal (or the user's deletion): each only while it is still theirs, and idempotent (a key
        enrolled before claims existed has none)."""
        keys = [user.second_factors.get(fid) for fid in dict.fromkeys(factor_ids)]
        return [
            TransactOp(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": {"pk": {"S": credential_claim(key.credential_id)}},
                        "ConditionExpression": "attribute_not_exists(pk) OR userId = :me",
                        "ExpressionAttributeValues": {":me": {"S": user.id}},
                    }
                },
                fails_with(ErrorCode.INVALID_SECOND_FACTOR_ERROR),
            )
            for key in keys
            if key is not None and key.credential_id
        ]

    def remove_factors_op(self, user: User, factor_ids: Sequence[str]) -> WriteOp:
        """Remove factors that must all still be enrolled (else INVALID_SECOND_FACTOR_ERROR, nothing
        removed). Removing the last ones also drops the backup codes, which only back a factor up;
        that case also requires that no factor was enrolled meanwhile. A TOTP factor's sealed seed
        goes with it."""
        ids = list(dict.fromkeys(factor_ids))
        names = {f"#f{i}": fid for i, fid in enumerate(ids)}
        conditions = [f"attribute_exists(secondFactors.{name})" for name in names]
        secrets = {f"#s{i}": totp_secret_attribute(fid) for i, fid in enumerate(ids)}
        update = "REMOVE " + ", ".join([*(f"secondFactors.{name}" for name in names), *secrets])
        names |= secrets
        values: dict[str, Any] = {}
        if set(user.second_factors) <= set(factor_ids):
            update += " SET backupCodes = :empty"
            conditions.append("size(secondFactors) = :count")
            values = {":empty": {"M": {}}, ":count": number(len(user.second_factors))}
        return self._factor_update(
            user,
            update,
            condition=" AND ".join(conditions),
            names=names,
            values=values,
            explain=_gone_or(ErrorCode.INVALID_SECOND_FACTOR_ERROR),
        )

    def use_totp_step_op(self, user: User, factor_id: str, step: int, used_at: str) -> WriteOp:
        """Record that ``step`` was used on a TOTP factor, at ``used_at``: only a newer step than
        the last one is accepted, so a code is never accepted twice
        (INVALID_SECOND_FACTOR_RESPONSE_ERROR)."""
        return self._factor_update(
            user,
            "SET secondFactors.#f.lastStep = :step, secondFactors.#f.usedAt = :usedAt",
            condition="secondFactors.#f.lastStep < :step",
            names={"#f": factor_id},
            values={":step": number(step), ":usedAt": {"S": used_at}},
            explain=_gone_or(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR),
        )

    def use_sign_count_op(self, user: User, factor_id: str, *, seen: int, new: int, used_at: str) -> WriteOp:
        """Store a WebAuthn key's new signature counter and when it answered, if no other
        assertion moved the counter meanwhile."""
        return self._factor_update(
            user,
            "SET secondFactors.#f.signCount = :new, secondFactors.#f.usedAt = :usedAt",
            condition="secondFactors.#f.signCount = :seen",
            names={"#f": factor_id},
            values={":seen": number(seen), ":new": number(new), ":usedAt": {"S": used_at}},
            explain=_gone_or(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR),
        )

    def use_backup_code_op(self, user: User, code_hash: str, used_at: str) -> WriteOp:
        """Spend one backup code (single use: INVALID_SECOND_FACTOR_RESPONSE_ERROR once spent) and
        record when (``twoFactorBackupCodeUsedAt``)."""
        return self._factor_update(
            user,
            "REMOVE backupCodes.#c SET twoFactorBackupCodeUsedAt = :t",
            condition="attribute_exists(backupCodes.#c)",
            names={"#c": code_hash},
            values={":t": {"S": used_at}},
            explain=_gone_or(ErrorCode.INVALID_SECOND_FACTOR_RESPONSE_ERROR),
        )

    def set_backup_codes_op(self, user: User, code_hashes: Sequence[str]) -> WriteOp:
        """Replace the backup codes with a new set (the old ones stop working)."""
        return self._factor_update(
            user,
            "SET backupCodes = :codes",
            condition="",
            names={},
            values={":codes": {"M": {h: {"BOOL": True} for h in code_hashes}}},
            explain=fails_with(ErrorCode.INVALID_SESSION_ERROR),
        )

    def _factor_update(
        self,
        user: User,
        update: str,
        *,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        explain: Explain,
    ) -> TransactOp:
        exists = "attribute_exists(pk)"
        body: dict[str, Any] = {
            "TableName": self._table,
            "Key": user_key(user.id),
            "UpdateExpression": update,
            "ConditionExpression": f"{exists} AND {condition}" if condition else exists,
        }
        if names:
            body["ExpressionAttributeNames"] = names
        if values:
            body["ExpressionAttributeValues"] = values
        return TransactOp({"Update": body}, explain)


def totp_secret_attribute(factor_id: str) -> str:
    """The attribute of the user item that holds a TOTP factor's sealed seed (see
    ``User.totp_secrets``)."""
    return f"totpSecret#{factor_id}"


def _gone_or(code: ErrorCode) -> Explain:
    """The user was deleted meanwhile (INVALID_SESSION_ERROR), or else ``code``."""
    return lambda old: NimbusError(ErrorCode.INVALID_SESSION_ERROR if old is None else code)
