"""The users table as the :class:`nimbus_core.domain.user_ports.UserStore`: :class:`DynamoUsers`.

Its parts live by concern beside it, each a class it inherits, all on the one table:

- ``user_items``: the keys and the stored form of a user, the claim and count keys;
- ``user_claims``: the uniqueness claims of usernames and addresses, creating a user with them;
- ``user_changes``: changing and deleting a user, and the checks other writes ride on;
- ``user_factors``: second factors and backup codes, in the user item;
- ``user_listing``: many users at once, the newest first, and the user count;
- ``user_imports``: accounts imported from upstream.

Here: reading one user (by id, username or address) and counting failed answers on it. Callers
import the table's public names from here (``__all__``), wherever they are defined.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.counters import hit_on_record
from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record
from nimbus_core.adapters.user_changes import UserChanges
from nimbus_core.adapters.user_claims import UserClaims
from nimbus_core.adapters.user_factors import UserFactors
from nimbus_core.adapters.user_imports import ImportState, UserImports
from nimbus_core.adapters.user_items import (
    COUNT_KEY_PREFIX,
    count_shard,
    user_id_from_key,
    user_item,
    user_key,
)
from nimbus_core.adapters.user_listing import UserListing
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import CounterState

__all__ = [
    "COUNT_KEY_PREFIX",
    "EMAIL_LOOKUP",
    "USERNAME_LOOKUP",
    "DynamoUsers",
    "ImportState",
    "count_shard",
    "user_id_from_key",
    "user_item",
    "user_key",
]

# The login lookups (template.yaml): every attribute of a user but its sealed secrets.
USERNAME_LOOKUP = "UsernameLookup"
EMAIL_LOOKUP = "EmailLookup"


def _index_unusable(exc: ClientError) -> bool:
    """Whether a Query failed because its index does not exist (yet) or is still backfilling.
    DynamoDB says ValidationException ("The table does not have the specified index", "Cannot
    read from backfilling global secondary index"); moto, ResourceNotFoundException."""
    message = str(exc.response.get("Error", {}).get("Message", "")).lower()
    unusable = {"ValidationException", "ResourceNotFoundException"}
    return error_code(exc) in unusable and "index" in message


class DynamoUsers(UserClaims, UserChanges, UserFactors, UserListing, UserImports):
    """The :class:`nimbus_core.domain.user_ports.UserStore` on the users table, built from
    ``(client, table name)``."""

    def get(self, user_id: str) -> User | None:
        """A user by id (strongly consistent), or None."""
        with aws_errors("GetItem (user)"):
            item = self._client.get_item(TableName=self._table, Key=user_key(user_id), ConsistentRead=True)
        found = item.get("Item")
        return read_record(User, found) if found else None

    def find_by_username(self, username: str, *, index_only: bool = False) -> User | None:
        """A user by username, case-insensitively."""
        return self._find(USERNAME_LOOKUP, "usernameKey", "USERNAME#", username_key(username), index_only)

    def find_by_email(self, email: str, *, index_only: bool = False) -> User | None:
        """A user by email address (case-folded, IDNA domain)."""
        return self._find(EMAIL_LOOKUP, "emailKey", "EMAIL#", email_key(email), index_only)

    def _find(self, index: str, attr: str, prefix: str, key: str, index_only: bool) -> User | None:
        """One round trip on the common path: the index is eventually consistent, so a miss falls
        back to the claim item (strongly consistent) and a user registered a moment ago is found;
        ``index_only`` skips that second look, so a miss costs what a hit costs. An index that is
        not there yet (or still backfilling: an upgrade, docs/operations.md) is a miss too, so
        login works meanwhile at two more round trips. The user read from the index has every
        attribute but its sealed TOTP secrets, which only the checking of a code needs."""
        items: list[dict[str, Any]] = []
        with aws_errors(f"Query ({index})"):
            try:
                result = self._client.query(
                    TableName=self._table,
                    IndexName=index,
                    KeyConditionExpression="#k = :k",
                    ExpressionAttributeNames={"#k": attr},
                    ExpressionAttributeValues={":k": {"S": key}},
                    Limit=2,
                )
                items = list(result.get("Items", []))
            except ClientError as exc:
                if not _index_unusable(exc):
                    raise
        if len(items) == 1:
            return read_record(User, items[0])
        if index_only:
            return None
        with aws_errors("GetItem (claim)"):
            claim = self._client.get_item(
                TableName=self._table, Key={"pk": {"S": prefix + key}}, ConsistentRead=True
            ).get("Item")
        if not claim:
            return None
        return self.get(claim["userId"]["S"])

    def count_auth_failure(self, user_id: str, *, limit: int, window: int, now: float) -> CounterState | None:
        """Count a failed answer on the user item itself, so reading it costs nothing at login."""
        attrs = ("authFailures", "authFailuresResetAt")
        return hit_on_record(
            self._client, self._table, user_key(user_id), attrs, limit=limit, window=window, now=now
        )
