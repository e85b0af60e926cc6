"""The one-time tokens table: email verification tokens, stored under the hash of their secret."""

from __future__ import annotations

from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.settings import get_settings


def put_verification_token_op(
    *, token_hash: str, user_id: str, email: str, created_at: str, exp: int
) -> TransactOp:
    """A transaction item storing a verification token bound to the user and the address it was sent to."""
    item = to_item(
        {
            "pk": f"VERIFY#{token_hash}",
            "kind": "verify-email",
            "userId": user_id,
            "email": email,
            "createdAt": created_at,
            "exp": exp,
            "expiresAt": exp,
        }
    )
    return TransactOp(
        {
            "Put": {
                "TableName": get_settings().tokens_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
    )


def delete_verification_token_op(token_hash: str) -> TransactOp:
    """A transaction item removing a verification token."""
    return TransactOp(
        {"Delete": {"TableName": get_settings().tokens_table, "Key": {"pk": {"S": f"VERIFY#{token_hash}"}}}}
    )
