"""Accounts imported from upstream: created as a registration creates one, marked pending until
their sessions are written, and leaving an ``IMPORTED#<id>`` item that outlives the account."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.errors import aws_errors
from nimbus_core.adapters.items import to_item
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.adapters.user_claims import claim_op
from nimbus_core.adapters.user_items import (
    IMPORTED_KEY_PREFIX,
    NOT_EXISTS,
    USER_KEY_PREFIX,
    UsersTable,
    credential_claim,
    email_claim,
    user_item,
    user_key,
    username_claim,
)
from nimbus_core.adapters.user_listing import count_op
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import WriteOp


@dataclass(frozen=True, slots=True)
class ImportState:
    """How Nimbus holds an upstream account: ``kind`` is pending, done, deleted or native; for an
    imported one, the ids of the second factors it holds now and its session generation."""

    kind: str
    upstream_updated_at: str | None = None
    factor_ids: frozenset[str] = frozenset()
    session_generation: int = 0


class UserImports(UsersTable):
    """The writes and reads of the import from upstream."""

    def import_ops(self, user: User, *, upstream_updated_at: str) -> list[WriteOp]:
        """Create an account imported from upstream, as ``create_ops`` creates one, marked
        ``importPending`` until :meth:`finish_import` (its sessions written), with the upstream row's
        ``updatedAt`` (to tell a later run it changed), and an ``IMPORTED#<id>`` item that outlives
        the account: an account deleted in Nimbus is never imported again."""
        item = {
            **user_item(user),
            "importedFrom": {"S": "upstream"},
            "importPending": {"BOOL": True},
            "upstreamUpdatedAt": {"S": upstream_updated_at},
        }
        put = TransactOp({"Put": {"TableName": self._table, "Item": item, "ConditionExpression": NOT_EXISTS}})
        mark = to_item({"pk": f"{IMPORTED_KEY_PREFIX}{user.id}", "importedAt": user.updated_at})
        return [
            put,
            TransactOp({"Put": {"TableName": self._table, "Item": mark, "ConditionExpression": NOT_EXISTS}}),
            claim_op(self._table, username_claim(user), user),
            claim_op(self._table, email_claim(user), user),
            # Its security keys' credential ids, each stored once across accounts (upstream let two
            # accounts enrol one: the second is then reported as taken, not imported).
            *(
                claim_op(self._table, credential_claim(key.credential_id or ""), user, factor_id=key.id)
                for key in user.webauthn_factors()
            ),
            count_op(self._table, user, +1),
        ]

    def import_states(self, user_ids: Sequence[str]) -> dict[str, ImportState]:
        """How Nimbus holds each of ``user_ids`` (at most 50) that it has or had: imported and
        ``"pending"`` (its sessions not all written) or ``"done"``, ``"deleted"`` since its import,
        or ``"native"`` (never imported); with the upstream ``updatedAt`` it was imported at, and
        what a later run reports as already there (its factors' ids, its session generation)."""
        wanted = list(dict.fromkeys(user_ids))
        if not wanted:
            return {}
        keys = [user_key(u) for u in wanted] + [{"pk": {"S": f"{IMPORTED_KEY_PREFIX}{u}"}} for u in wanted]
        request = {
            "Keys": keys,
            "ConsistentRead": True,
            "ProjectionExpression": (
                "pk, importedFrom, importPending, upstreamUpdatedAt, secondFactors, sessionGeneration"
            ),
        }
        found = batch_get(self._client, {self._table: request})
        users: dict[str, dict[str, Any]] = {}
        marked: set[str] = set()
        for item in found.get(self._table, []):
            pk = item["pk"]["S"]
            if pk.startswith(IMPORTED_KEY_PREFIX):
                marked.add(pk.removeprefix(IMPORTED_KEY_PREFIX))
            else:
                users[pk.removeprefix(USER_KEY_PREFIX)] = item
        states: dict[str, ImportState] = {}
        for user_id in wanted:
            stored = users.get(user_id)
            if stored is None:
                if user_id in marked:
                    states[user_id] = ImportState("deleted")
                continue
            if "importedFrom" not in stored:
                states[user_id] = ImportState("native")
                continue
            kind = "pending" if "importPending" in stored else "done"
            states[user_id] = ImportState(
                kind,
                stored.get("upstreamUpdatedAt", {}).get("S"),
                factor_ids=frozenset(stored.get("secondFactors", {}).get("M", {})),
                session_generation=int(stored.get("sessionGeneration", {}).get("N", "0")),
            )
        return states

    def finish_import(self, user_id: str) -> None:
        """Mark an imported account's sessions as all written (a later import leaves it alone)."""
        with aws_errors("UpdateItem (import done)"):
            self._client.update_item(
                TableName=self._table,
                Key=user_key(user_id),
                UpdateExpression="REMOVE importPending",
                ConditionExpression="attribute_exists(pk)",
            )
