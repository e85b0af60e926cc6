"""Making a staff user in tests: the staff flag and, as staff endpoints require by default
(CONTRACT section 4 step 4), a second factor, written straight to the users table: its TOTP seed
sealed as an enrolment seals it, or (no ``sealer``) in plaintext as releases before sealing stored it."""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.adapters.user_factors import totp_secret_attribute
from nimbus_core.domain.models import SecondFactor
from nimbus_core.domain.ports import SecretSealer
from nimbus_core.factors import otp
from nimbus_core.platform.ids import new_id

STAMP = "2026-01-01T00:00:00.000Z"


def promote(
    dynamodb: Any,
    users_table: str,
    user_id: str,
    *,
    with_factor: bool = True,
    sealer: SecretSealer | None = None,
) -> str | None:
    """Set the staff flag (and enrol a TOTP factor unless ``with_factor`` is False, its seed sealed
    with ``sealer``, else stored in plaintext); the TOTP seed."""
    if not with_factor:
        dynamodb.update_item(
            TableName=users_table,
            Key={"pk": {"S": f"USER#{user_id}"}},
            UpdateExpression="SET staff = :t",
            ExpressionAttributeValues={":t": {"BOOL": True}},
        )
        return None
    secret = otp.new_totp_secret()
    factor_id = new_id()
    plaintext = None if sealer else secret
    factor = SecondFactor(
        id=factor_id, type="totp", name="Staff phone", created_at=STAMP, updated_at=STAMP, secret=plaintext
    )
    update = "SET staff = :t, secondFactors.#f = :factor"
    names = {"#f": factor.id}
    values: dict[str, Any] = {":t": {"BOOL": True}, ":factor": {"M": to_item(stored_values(factor))}}
    if sealer is not None:
        update += ", #s = :s"
        names["#s"] = totp_secret_attribute(factor_id)
        values[":s"] = {"S": sealer.seal(secret, user_id=user_id, factor_id=factor_id)}
    dynamodb.update_item(
        TableName=users_table,
        Key={"pk": {"S": f"USER#{user_id}"}},
        UpdateExpression=update,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
    )
    return secret
