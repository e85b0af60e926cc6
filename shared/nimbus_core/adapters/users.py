"""The users table: user items (``USER#<id>``) and their uniqueness claims (``USERNAME#``/``EMAIL#``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nimbus_core.adapters.batch import batch_get
from nimbus_core.adapters.counters import CounterSpec, CounterTargetMissingError, hit
from nimbus_core.adapters.errors import aws_errors
from nimbus_core.adapters.items import read_record, record_item, stored_values, to_item
from nimbus_core.adapters.transactions import Explain, TransactOp, fails_with
from nimbus_core.domain.errors import ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import SecondFactor, User, iso_to_epoch
from nimbus_core.domain.ports import CounterState, WriteOp

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_NOT_EXISTS = "attribute_not_exists(pk)"
USER_KEY_PREFIX = "USER#"  # the key of a user item; claims are USERNAME#... and EMAIL#...
# An account imported from upstream leaves IMPORTED#<id> behind, which its deletion keeps.
IMPORTED_KEY_PREFIX = "IMPORTED#"
# GET /users: every user item carries LIST_PARTITION in ``listPartition`` and its creation time in
# ``listOrder``, so CreatedIndex (keys only) lists the newest first with one Query and no Scan, the
# accounts imported from upstream (whose ids are not time-ordered) among the others.
LIST_INDEX = "CreatedIndex"
LIST_PARTITION = "USERS"
# The number of users is kept exact by the transactions that create and delete them, spread over
# COUNT_SHARDS counter items (USERCOUNT#<n>, n from the user id) so that no single item takes every
# registration: DynamoDB allows about 1,000 writes per second on one item, 500 in transactions.
# Raising it later is safe (new shards start at 0); lowering it would drop counts.
COUNT_SHARDS = 16
COUNT_KEY_PREFIX = "USERCOUNT#"


def user_key(user_id: str) -> dict[str, Any]:
    """The primary key of a user item."""
    return {"pk": {"S": f"USER#{user_id}"}}


@dataclass(frozen=True, slots=True)
class ImportState:
    """How Nimbus holds an upstream account: ``kind`` is pending, done, deleted or native; for an
    imported one, the ids of the second factors it holds now and its session generation."""

    kind: str
    upstream_updated_at: str | None = None
    factor_ids: frozenset[str] = frozenset()
    session_generation: int = 0


def user_id_from_key(keys: Mapping[str, Any]) -> str | None:
    """The user id of a users-table key in DynamoDB's JSON (a stream record's ``Keys``); None for a
    claim item (``USERNAME#``/``EMAIL#``) or anything else."""
    pk = keys.get("pk")
    value = pk.get("S") if isinstance(pk, Mapping) else None
    if not isinstance(value, str) or not value.startswith(USER_KEY_PREFIX):
        return None
    return value.removeprefix(USER_KEY_PREFIX) or None


def user_item(user: User) -> dict[str, Any]:
    """The stored form of a user, with the index keys login and the staff listing look it up by."""
    return record_item(
        user,
        pk=f"USER#{user.id}",
        usernameKey=username_key(user.username),
        emailKey=email_key(user.email),
        listPartition=LIST_PARTITION,
        listOrder=list_order(user),
    )


def list_order(user: User) -> str:
    """Where ``user`` sorts in the list: creation time (milliseconds, fixed width), then id."""
    return f"{round(iso_to_epoch(user.created_at) * 1000):015d}#{user.id}"


def count_key(shard: int) -> dict[str, Any]:
    """The primary key of one shard of the user count."""
    return {"pk": {"S": f"{COUNT_KEY_PREFIX}{shard}"}}


def count_shard(user_id: str) -> int:
    """The count shard a user is counted in (fixed by the id, so a deletion undoes its creation)."""
    return zlib.crc32(user_id.encode()) % COUNT_SHARDS


def _username_claim(user: User) -> str:
    return f"USERNAME#{username_key(user.username)}"


def _email_claim(user: User) -> str:
    return f"EMAIL#{email_key(user.email)}"


class DynamoUsers:
    """The :class:`nimbus_core.domain.ports.UserStore` on the users table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, user_id: str) -> User | None:
        """A user by id (strongly consistent), or None."""
        with aws_errors("GetItem (user)"):
            item = self._client.get_item(TableName=self._table, Key=user_key(user_id), ConsistentRead=True)
        found = item.get("Item")
        return read_record(User, found) if found else None

    def find_by_username(self, username: str, *, index_only: bool = False) -> User | None:
        """A user by username, case-insensitively."""
        return self._find("UsernameIndex", "usernameKey", "USERNAME#", username_key(username), index_only)

    def find_by_email(self, email: str, *, index_only: bool = False) -> User | None:
        """A user by email address (case-folded, IDNA domain)."""
        return self._find("EmailIndex", "emailKey", "EMAIL#", email_key(email), index_only)

    def _find(self, index: str, attr: str, prefix: str, key: str, index_only: bool) -> User | None:
        """One round trip on the common path: the index is eventually consistent, so a miss falls
        back to the claim item (strongly consistent) and a user registered a moment ago is found;
        ``index_only`` skips that second look, so a miss costs what a hit costs."""
        with aws_errors(f"Query ({index})"):
            result = self._client.query(
                TableName=self._table,
                IndexName=index,
                KeyConditionExpression="#k = :k",
                ExpressionAttributeNames={"#k": attr},
                ExpressionAttributeValues={":k": {"S": key}},
                Limit=2,
            )
        items = result.get("Items", [])
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

    def _claim_op(self, pk: str, user: User) -> TransactOp:
        item = to_item({"pk": pk, "userId": user.id, "createdAt": user.updated_at})
        return TransactOp(
            {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": _NOT_EXISTS}},
            fails_with(ErrorCode.USER_EXISTS_ERROR),
        )

    def _release_op(self, pk: str, user: User) -> TransactOp:
        # Only our own claim may be released: a claim that moved on means a concurrent change won.
        return TransactOp(
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": pk}},
                    "ConditionExpression": "userId = :me",
                    "ExpressionAttributeValues": {":me": {"S": user.id}},
                }
            },
            fails_with(ErrorCode.USER_EXISTS_ERROR),
        )

    def create_ops(self, user: User) -> list[WriteOp]:
        """Create ``user`` with its claims; a taken claim cancels everything (USER_EXISTS_ERROR)."""
        put = TransactOp(
            {"Put": {"TableName": self._table, "Item": user_item(user), "ConditionExpression": _NOT_EXISTS}}
        )
        return [
            put,
            self._claim_op(_username_claim(user), user),
            self._claim_op(_email_claim(user), user),
            self._count_op(user, +1),
        ]

    # ------------------------------------------------------------------ accounts imported from upstream

    def import_ops(self, user: User, *, upstream_updated_at: str) -> list[WriteOp]:
        """Create an account imported from upstream, as :meth:`create_ops` creates one, marked
        ``importPending`` until :meth:`finish_import` (its sessions written), with the upstream row's
        ``updatedAt`` (to tell a later run it changed), and an ``IMPORTED#<id>`` item that outlives
        the account: an account deleted in Nimbus is never imported again."""
        item = {
            **user_item(user),
            "importedFrom": {"S": "upstream"},
            "importPending": {"BOOL": True},
            "upstreamUpdatedAt": {"S": upstream_updated_at},
        }
        put = TransactOp(
            {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": _NOT_EXISTS}}
        )
        mark = to_item({"pk": f"{IMPORTED_KEY_PREFIX}{user.id}", "importedAt": user.updated_at})
        return [
            put,
            TransactOp({"Put": {"TableName": self._table, "Item": mark, "ConditionExpression": _NOT_EXISTS}}),
            self._claim_op(_username_claim(user), user),
            self._claim_op(_email_claim(user), user),
            self._count_op(user, +1),
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

    def claim_holders(self, user: User) -> dict[str, str | None]:
        """Who holds ``user``'s username and address under Nimbus's rules (None: free)."""
        claims = {"username": _username_claim(user), "email": _email_claim(user)}
        found = batch_get(
            self._client,
            {self._table: {"Keys": [{"pk": {"S": pk}} for pk in claims.values()], "ConsistentRead": True}},
        )
        holders = {item["pk"]["S"]: item["userId"]["S"] for item in found.get(self._table, [])}
        return {name: holders.get(pk) for name, pk in claims.items()}

    def finish_import(self, user_id: str) -> None:
        """Mark an imported account's sessions as all written (a later import leaves it alone)."""
        with aws_errors("UpdateItem (import done)"):
            self._client.update_item(
                TableName=self._table,
                Key=user_key(user_id),
                UpdateExpression="REMOVE importPending",
                ConditionExpression="attribute_exists(pk)",
            )

    def _count_op(self, user: User, delta: int) -> TransactOp:
        # In the transaction that creates or deletes the user: the count moves exactly when a user
        # appears or disappears, whatever runs concurrently (ADD needs no read).
        return TransactOp(
            {
                "Update": {
                    "TableName": self._table,
                    "Key": count_key(count_shard(user.id)),
                    "UpdateExpression": "ADD #n :d",
                    "ExpressionAttributeNames": {"#n": "users"},
                    "ExpressionAttributeValues": {":d": _n(delta)},
                }
            }
        )

    def get_many(self, user_ids: Iterable[str]) -> list[User]:
        """The users among ``user_ids`` (at most 100) in one BatchGetItem, in no particular order."""
        keys = [user_key(u) for u in dict.fromkeys(user_ids)]
        if not keys:
            return []
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        return [read_record(User, item) for item in found.get(self._table, [])]

    def newest_page(self, *, limit: int, offset: int) -> tuple[int, list[User]]:
        """How many users there are, and one page of them, newest first: one Query of CreatedIndex
        (keys only; a further page per MB, about 10,000 keys) and one BatchGetItem for the page's
        users and the count's shards together."""
        ids = self._newest_ids(limit + offset)[offset:] if limit > 0 else []
        keys = [user_key(u) for u in ids] + [count_key(n) for n in range(COUNT_SHARDS)]
        found = batch_get(self._client, {self._table: {"Keys": keys, "ConsistentRead": True}})
        users: dict[str, User] = {}
        count = 0
        for item in found.get(self._table, []):
            if item["pk"]["S"].startswith(COUNT_KEY_PREFIX):
                count += int(item.get("users", {}).get("N", "0"))
            else:
                user = read_record(User, item)
                users[user.id] = user
        # A user deleted between the Query and the read is simply not on the page.
        return count, [users[u] for u in ids if u in users]

    def _newest_ids(self, wanted: int) -> list[str]:
        ids: list[str] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": LIST_INDEX,
            "KeyConditionExpression": "listPartition = :p",
            "ExpressionAttributeValues": {":p": {"S": LIST_PARTITION}},
            "ScanIndexForward": False,
        }
        while len(ids) < wanted:
            with aws_errors("Query (CreatedIndex)"):
                result = self._client.query(**request, Limit=wanted - len(ids))
            ids += [item["pk"]["S"].removeprefix(USER_KEY_PREFIX) for item in result.get("Items", [])]
            if "LastEvaluatedKey" not in result:
                break
            request["ExclusiveStartKey"] = result["LastEvaluatedKey"]
        return ids

    def change_ops(
        self,
        before: User,
        after: User,
        *,
        assume_unchanged: bool = False,
        rebuilt_when_stale: bool = False,
        sessions_unrevoked: bool = False,
    ) -> list[WriteOp]:
        """Replace ``before`` by ``after``, swapping the claims whose keys changed (one transaction);
        with ``assume_unchanged``, only while the stored hash and address are still ``before``'s;
        with ``sessions_unrevoked``, only while its session generation is; with
        ``rebuilt_when_stale``, any stale read is a UserChangedError (see the port)."""
        conditions = ["attribute_exists(pk)"]
        values: dict[str, Any] = {}
        if assume_unchanged:
            conditions += ["passwordHash = :readHash", "email = :readEmail"]
            values |= {":readHash": {"S": before.password_hash}, ":readEmail": {"S": before.email}}
        ops: list[WriteOp] = []
        if username_key(before.username) != username_key(after.username):
            conditions.append("usernameKey = :oldUsername")
            values[":oldUsername"] = {"S": username_key(before.username)}
            ops += [
                self._release_op(_username_claim(before), before),
                self._claim_op(_username_claim(after), after),
            ]
        if email_key(before.email) != email_key(after.email):
            conditions.append("emailKey = :oldEmail")
            values[":oldEmail"] = {"S": email_key(before.email)}
            ops += [
                self._release_op(_email_claim(before), before),
                self._claim_op(_email_claim(after), after),
            ]
        if before.password_hash != after.password_hash:
            conditions.append("passwordHash = :oldHash")
            values[":oldHash"] = {"S": before.password_hash}
        if sessions_unrevoked or before.session_generation != after.session_generation:
            # Two "revoke all but mine" from two sessions must not both keep theirs; and a change
            # made by a session of this user must not land once that session has been revoked.
            conditions.append("sessionGeneration = :oldGeneration")
            values[":oldGeneration"] = {"N": str(before.session_generation)}
        if before.recovery_mails != after.recovery_mails:
            # The silent per-account limit on recovery mails holds under concurrent requests: a
            # count read stale is rebuilt on the stored user (UserChangedError).
            for attr, seen in (
                ("recoveryMails", before.recovery_mails),
                ("recoveryMailsResetAt", before.recovery_mails_reset_at),
            ):
                # Users stored before the counter existed have no attribute: that reads as 0.
                absent = f"attribute_not_exists({attr}) OR " if seen == 0 else ""
                conditions.append(f"({absent}{attr} = :old_{attr})")
                values[f":old_{attr}"] = _n(seen)
        # A verification link is issued or spent on the link (and so the address) the change read:
        # a resend racing an address change cannot bind its link to the old address. A recovery
        # link likewise: a reset racing an address change (which voids it) cannot land on the new.
        for link, read, written in (
            ("pendingVerification", before.pending_verification, after.pending_verification),
            ("pendingRecovery", before.pending_recovery, after.pending_recovery),
        ):
            if read != written:
                conditions.append(_unchanged(link, read, values))
        update = _diff_update(before, after)
        if update is None:  # nothing differs (a changed key always changes an attribute)
            return []
        names, set_values, expression = update
        body: dict[str, Any] = {
            "TableName": self._table,
            "Key": user_key(before.id),
            "UpdateExpression": expression,
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
        }
        if values or set_values:  # DynamoDB refuses an empty map (a change made only of REMOVEs)
            body["ExpressionAttributeValues"] = {**values, **set_values}
        explain = _gone_or_changed if rebuilt_when_stale else (lambda old: _explain_stale(old, before))
        return [TransactOp({"Update": body}, explain), *ops]

    # ------------------------------------------------------------------ second factors (in the user item)

    def add_factor_op(
        self,
        user: User,
        factor: SecondFactor,
        *,
        max_factors: int,
        backup_codes: Sequence[str] | None = None,
    ) -> WriteOp:
        """Enrol ``factor`` (and, with ``backup_codes``, a first set of backup codes, in the same
        write): the user must still exist and have room (INVALID_FIELDS_ERROR beyond
        ``max_factors``); a concurrent enrolment of the same id is refused."""
        stored = to_item(stored_values(factor))
        update = "SET secondFactors.#f = :factor"
        values: dict[str, Any] = {":factor": {"M": stored}, ":max": _n(max_factors)}
        if backup_codes is not None:
            update += ", backupCodes = :codes"
            values[":codes"] = {"M": {h: {"BOOL": True} for h in backup_codes}}
        return self._factor_update(
            user,
            update,
            condition="attribute_not_exists(secondFactors.#f) AND size(secondFactors) < :max",
            names={"#f": factor.id},
            values=values,
            explain=lambda old: (
                NimbusError(ErrorCode.INVALID_SESSION_ERROR)
                if old is None
                else NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=["type"])
            ),
        )

    def remove_factors_op(self, user: User, factor_ids: Sequence[str]) -> WriteOp:
        """Remove factors that must all still be enrolled (else INVALID_SECOND_FACTOR_ERROR, nothing
        removed). Removing the last ones also drops the backup codes, which only back a factor up;
        that case also requires that no factor was enrolled meanwhile."""
        names = {f"#f{i}": fid for i, fid in enumerate(dict.fromkeys(factor_ids))}
        update = "REMOVE " + ", ".join(f"secondFactors.{name}" for name in names)
        conditions = [f"attribute_exists(secondFactors.{name})" for name in names]
        values: dict[str, Any] = {}
        if set(user.second_factors) <= set(factor_ids):
            update += " SET backupCodes = :empty"
            conditions.append("size(secondFactors) = :count")
            values = {":empty": {"M": {}}, ":count": _n(len(user.second_factors))}
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
            values={":step": _n(step), ":usedAt": {"S": used_at}},
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
            values={":seen": _n(seen), ":new": _n(new), ":usedAt": {"S": used_at}},
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

    def sessions_unrevoked_op(self, user: User) -> WriteOp:
        """A ConditionCheck that ``user`` is still stored with the session generation read (see the
        port): any failure is a UserChangedError, judged on a fresh read of the caller."""
        return TransactOp(
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": user_key(user.id),
                    "ConditionExpression": "attribute_exists(pk) AND sessionGeneration = :generation",
                    "ExpressionAttributeValues": {":generation": _n(user.session_generation)},
                }
            },
            lambda _old: UserChangedError(),
        )

    def delete_ops(self, user: User) -> list[WriteOp]:
        """Remove the user and both claims (each claim only if it is still this user's) and count
        one user less. The user must still exist (INVALID_SESSION_ERROR: deleted meanwhile), so two
        concurrent deletions count it once, and must still hold the claims and pending token that
        ``user`` names and its pending links (UserChangedError otherwise: a rename or address change
        landed after the read, and deleting the old claims would leave the new ones with no user)."""
        condition = "attribute_exists(pk) AND usernameKey = :username AND emailKey = :email"
        values: dict[str, Any] = {
            ":username": {"S": username_key(user.username)},
            ":email": {"S": email_key(user.email)},
        }
        # And the pending links it deletes with the user (account_changes.deletion_ops): a link
        # issued after the read would be left behind, with a mail to a user who is gone.
        condition += " AND " + _unchanged("pendingVerification", user.pending_verification, values)
        condition += " AND " + _unchanged("pendingRecovery", user.pending_recovery, values)
        key_delete = TransactOp(
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": user_key(user.id),
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": values,
                }
            },
            _gone_or_changed,
        )
        return [
            key_delete,
            self._delete_own_claim(_username_claim(user), user),
            self._delete_own_claim(_email_claim(user), user),
            self._count_op(user, -1),
        ]

    def _delete_own_claim(self, pk: str, user: User) -> TransactOp:
        # Unconditional on existence (idempotent), but never another user's claim.
        return TransactOp(
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": pk}},
                    "ConditionExpression": "attribute_not_exists(pk) OR userId = :me",
                    "ExpressionAttributeValues": {":me": {"S": user.id}},
                }
            }
        )

    def credentials_unchanged_op(
        self, user: User, *, new_password_hash: str | None, now: float, failure_limit: int | None
    ) -> WriteOp:
        """Assert ``user`` still has the verified password hash, is not banned and (with a
        ``failure_limit``) is not locked; with ``new_password_hash`` also store a rehashed password
        in the same step.

        Login's session write rides on this, so a password change or a ban that lands between reading
        the user and writing the session can never produce a session.
        """
        condition = "passwordHash = :verified AND attribute_not_exists(bannedAt)"
        values: dict[str, Any] = {":verified": {"S": user.password_hash}}
        if failure_limit is not None:
            condition += (
                " AND (attribute_not_exists(authFailures) OR authFailures < :limit"
                " OR authFailuresResetAt <= :now)"
            )
            values |= {":limit": {"N": str(failure_limit)}, ":now": {"N": str(int(now))}}
        refused = fails_with(ErrorCode.INVALID_PASSWORD_ERROR)
        if new_password_hash is None:
            check = {"TableName": self._table, "Key": user_key(user.id), "ConditionExpression": condition}
            return TransactOp({"ConditionCheck": {**check, "ExpressionAttributeValues": values}}, refused)
        values[":new"] = {"S": new_password_hash}
        update = {
            "TableName": self._table,
            "Key": user_key(user.id),
            "UpdateExpression": "SET passwordHash = :new",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        return TransactOp({"Update": update}, refused)

    def count_auth_failure(self, user_id: str, *, limit: int, window: int, now: float) -> CounterState | None:
        """Count a failed answer on the user item itself, so reading it costs nothing at login."""
        spec = CounterSpec(
            table=self._table,
            key=user_key(user_id),
            count_attr="authFailures",
            reset_attr="authFailuresResetAt",
            ttl_attr=None,
            must_exist=True,
        )
        try:
            return hit(self._client, spec, limit=limit, window=window, now=now)
        except CounterTargetMissingError:
            return None


def _diff_update(before: User, after: User) -> tuple[dict[str, str], dict[str, Any], str] | None:
    """An UpdateExpression that writes only the attributes that differ (so a concurrent ban or
    failure count on other attributes is never overwritten), plus the index keys they imply."""
    old = user_item(before)
    new = user_item(after)
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    sets: list[str] = []
    removes: list[str] = []
    for i, attr in enumerate(sorted(set(old) | set(new))):
        if old.get(attr) == new.get(attr):
            continue
        names[f"#a{i}"] = attr
        if attr in new:
            values[f":v{i}"] = new[attr]
            sets.append(f"#a{i} = :v{i}")
        else:
            removes.append(f"#a{i}")
    if not names:
        return None
    expression = " ".join(
        part
        for part in (
            f"SET {', '.join(sets)}" if sets else "",
            f"REMOVE {', '.join(removes)}" if removes else "",
        )
        if part
    )
    return names, values, expression


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _gone_or(code: ErrorCode) -> Explain:
    """The user was deleted meanwhile (INVALID_SESSION_ERROR), or else ``code``."""
    return lambda old: NimbusError(ErrorCode.INVALID_SESSION_ERROR if old is None else code)


def _unchanged(attr: str, seen: str | None, values: dict[str, Any]) -> str:
    """The condition that ``attr`` is still ``seen`` (None: still absent), its value put in ``values``."""
    if seen is None:
        return f"attribute_not_exists({attr})"
    values[f":old_{attr}"] = {"S": seen}
    return f"{attr} = :old_{attr}"


def _gone_or_changed(old: dict[str, Any] | None) -> Exception:
    """A deletion's condition failed: the user is gone, or changed after the read."""
    return NimbusError(ErrorCode.INVALID_SESSION_ERROR) if old is None else UserChangedError()


def _explain_stale(old: dict[str, Any] | None, before: User) -> Exception:
    if old is None:
        return NimbusError(ErrorCode.INVALID_SESSION_ERROR)  # the account was deleted meanwhile
    if old.get("passwordHash") != before.password_hash:
        return NimbusError(ErrorCode.INVALID_PASSWORD_ERROR)
    if old.get("sessionGeneration", 0) != before.session_generation:
        return NimbusError(ErrorCode.INVALID_SESSION_ERROR)  # sessions were revoked meanwhile
    # The username or address moved on under a concurrent change: no claim was refused, so this
    # is not USER_EXISTS_ERROR; the change is built again on the stored user.
    return UserChangedError()
