"""The uniqueness claims: one item per username (``USERNAME#<key>``) and per address
(``EMAIL#<key>``), each naming the user who holds it, written in the transaction that creates,
renames or deletes that user, so no two users ever hold one name (case-insensitively)."""

from __future__ import annotations

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.user_items import (
    NOT_EXISTS,
    UsersTable,
    credential_claim,
    email_claim,
    user_item,
    username_claim,
)
from nimbus_core.adapters.user_listing import count_op
from nimbus_core.domain.errors import ErrorCode, UserChangedError
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import WriteOp


def claim_op(table: str, pk: str, user: User, *, factor_id: str | None = None) -> TransactOp:
    """Claim ``pk`` for ``user`` (a security key's credential id names the ``factor_id``); a claim
    already taken is USER_EXISTS_ERROR."""
    values = {"pk": pk, "userId": user.id, "createdAt": user.updated_at}
    item = to_item(values if factor_id is None else {**values, "factorId": factor_id})
    return TransactOp(
        {"Put": {"TableName": table, "Item": item, "ConditionExpression": NOT_EXISTS}},
        fails_with(ErrorCode.USER_EXISTS_ERROR),
    )


def release_op(table: str, pk: str, user: User) -> TransactOp:
    """Release ``user``'s claim ``pk`` (a rename or an address change)."""
    # Only our own claim may be released: a claim that moved on means a concurrent change won.
    return TransactOp(
        {
            "Delete": {
                "TableName": table,
                "Key": {"pk": {"S": pk}},
                "ConditionExpression": "userId = :me",
                "ExpressionAttributeValues": {":me": {"S": user.id}},
            }
        },
        fails_with(ErrorCode.USER_EXISTS_ERROR),
    )


def delete_own_claim_op(table: str, pk: str, user: User) -> TransactOp:
    """Delete the claim ``pk`` with its user ``user``; a claim now another user's is a
    UserChangedError (the user's names moved on since the read: built again on a fresh one)."""
    # Unconditional on existence (idempotent), but never another user's claim. A claim changes hands
    # only in a transaction that also changes its holder's user item, so the user item's own
    # condition in the deletion fails with it; either reason asks for the same fresh read.
    return TransactOp(
        {
            "Delete": {
                "TableName": table,
                "Key": {"pk": {"S": pk}},
                "ConditionExpression": "attribute_not_exists(pk) OR userId = :me",
                "ExpressionAttributeValues": {":me": {"S": user.id}},
            }
        },
        lambda _old: UserChangedError(),
    )


class UserClaims(UsersTable):
    """Creating a user with its claims, and who holds a name."""

    def create_ops(self, user: User) -> list[WriteOp]:
        """Create ``user`` with its claims; a taken claim cancels everything (USER_EXISTS_ERROR)."""
        put = TransactOp(
            {"Put": {"TableName": self._table, "Item": user_item(user), "ConditionExpression": NOT_EXISTS}}
        )
        return [
            put,
            claim_op(self._table, username_claim(user), user),
            claim_op(self._table, email_claim(user), user),
            count_op(self._table, user, +1),
        ]

    def claim_holders(self, user: User) -> dict[str, str | None]:
        """Who holds ``user``'s username, address and security keys' credential ids under Nimbus's
        rules (None: free)."""
        claims = {"username": username_claim(user), "email": email_claim(user)}
        for key in user.webauthn_factors():
            claims[f'security key "{key.name}"'] = credential_claim(key.credential_id or "")
        found = batch_get(
            self._client,
            {self._table: {"Keys": [{"pk": {"S": pk}} for pk in claims.values()], "ConsistentRead": True}},
        )
        holders = {item["pk"]["S"]: item["userId"]["S"] for item in found.get(self._table, [])}
        return {name: holders.get(pk) for name, pk in claims.items()}
