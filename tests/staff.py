"""Making a staff user in tests: the staff flag and, as staff endpoints require by default
(CONTRACT section 4 step 4), a second factor, written straight to the users table."""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.domain.models import SecondFactor
from nimbus_core.factors import otp
from nimbus_core.platform.ids import new_id

STAMP = "2026-01-01T00:00:00.000Z"


def promote(dynamodb: Any, users_table: str, user_id: str, *, with_factor: bool = True) -> str | None:
    """Set the staff flag (and enrol a TOTP factor unless ``with_factor`` is False); the TOTP seed."""
    if not with_factor:
        dynamodb.update_item(
            TableName=users_table,
            Key={"pk": {"S": f"USER#{user_id}"}},
            UpdateExpression="SET staff = :t",
            ExpressionAttributeValues={":t": {"BOOL": True}},
        )
        return None
    secret = otp.new_totp_secret()
    factor = SecondFactor(
        id=new_id(), type="totp", name="Staff phone", created_at=STAMP, updated_at=STAMP, secret=secret
    )
    dynamodb.update_item(
        TableName=users_table,
        Key={"pk": {"S": f"USER#{user_id}"}},
        UpdateExpression="SET staff = :t, secondFactors.#f = :factor",
        ExpressionAttributeNames={"#f": factor.id},
        ExpressionAttributeValues={
            ":t": {"BOOL": True},
            ":factor": {"M": to_item(stored_values(factor))},
        },
    )
    return secret
