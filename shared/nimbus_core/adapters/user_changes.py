"""Changing and deleting a user: one conditional write of the user item (only the attributes that
differ), with the claims it swaps or drops, guarded by exactly what the change read; and the checks
other writes ride on (the caller's sessions not revoked, login's credentials unchanged)."""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.transactions import TransactOp, fails_with
from nimbus_core.adapters.user_claims import claim_op, delete_own_claim_op, release_op
from nimbus_core.adapters.user_items import (
    UsersTable,
    email_claim,
    number,
    user_item,
    user_key,
    username_claim,
)
from nimbus_core.adapters.user_listing import count_op
from nimbus_core.domain.errors import ErrorCode, NimbusError, UserChangedError
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import User
from nimbus_core.domain.ports import WriteOp


class UserChanges(UsersTable):
    """The writes that change or delete a user item, and the checks that ride on one."""

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
        update = _diff_update(before, after)
        if update is None:  # nothing differs (a changed key always changes an attribute)
            return []
        conditions = ["attribute_exists(pk)"]
        values: dict[str, Any] = {}
        if assume_unchanged:
            conditions += ["passwordHash = :readHash", "email = :readEmail"]
            values |= {":readHash": {"S": before.password_hash}, ":readEmail": {"S": before.email}}
        claims = self._claim_swaps(before, after, conditions, values)
        _guard_what_changes(before, after, conditions, values, sessions_unrevoked=sessions_unrevoked)
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
        return [TransactOp({"Update": body}, explain), *claims]

    def _claim_swaps(
        self, before: User, after: User, conditions: list[str], values: dict[str, Any]
    ) -> list[WriteOp]:
        """The claims released and taken when the username or address key changes, and the
        conditions (added to ``conditions``) that the user still holds the old ones."""
        ops: list[WriteOp] = []
        if username_key(before.username) != username_key(after.username):
            conditions.append("usernameKey = :oldUsername")
            values[":oldUsername"] = {"S": username_key(before.username)}
            ops += [
                release_op(self._table, username_claim(before), before),
                claim_op(self._table, username_claim(after), after),
            ]
        if email_key(before.email) != email_key(after.email):
            conditions.append("emailKey = :oldEmail")
            values[":oldEmail"] = {"S": email_key(before.email)}
            ops += [
                release_op(self._table, email_claim(before), before),
                claim_op(self._table, email_claim(after), after),
            ]
        return ops

    def sessions_unrevoked_op(self, user: User) -> WriteOp:
        """A ConditionCheck that ``user`` is still stored with the session generation read (see the
        port): any failure is a UserChangedError, judged on a fresh read of the caller."""
        return TransactOp(
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": user_key(user.id),
                    "ConditionExpression": "attribute_exists(pk) AND sessionGeneration = :generation",
                    "ExpressionAttributeValues": {":generation": number(user.session_generation)},
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
            delete_own_claim_op(self._table, username_claim(user), user),
            delete_own_claim_op(self._table, email_claim(user), user),
            count_op(self._table, user, -1),
        ]

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


def _guard_what_changes(
    before: User, after: User, conditions: list[str], values: dict[str, Any], *, sessions_unrevoked: bool
) -> None:
    """Add to ``conditions`` (and ``values``) that what the change replaces is still what was read:
    the password hash, the session generation, the recovery mail count, the pending links."""
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
            values[f":old_{attr}"] = number(seen)
    # A verification link is issued or spent on the link (and so the address) the change read:
    # a resend racing an address change cannot bind its link to the old address. A recovery
    # link likewise: a reset racing an address change (which voids it) cannot land on the new.
    for link, read, written in (
        ("pendingVerification", before.pending_verification, after.pending_verification),
        ("pendingRecovery", before.pending_recovery, after.pending_recovery),
    ):
        if read != written:
            conditions.append(_unchanged(link, read, values))


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
