"""What must hold in the stack's tables at every moment, whatever ran concurrently or failed part way:
the writes that keep these are transactions, so they hold between any two of them.

The users table (:func:`users_table_violations`):

- every username and address claim names a user whose key it is, and every user holds both claims;
- the user count (its shards) equals the number of users;
- every sealed TOTP secret (``totpSecret#<factor id>``) belongs to an enrolled TOTP factor of its
  user (removing a factor removes its secret in the same write), and every TOTP factor has its
  secret, sealed beside it or (stored by releases before sealing) in plaintext in it, never both.

Across the tables (:func:`stack_violations`, which includes the above):

- sessions: no stored session can authenticate when it must not, now or after a later change of its
  user (see :func:`_session_violations` for what "authenticate" means in ``nimbus_core.sessions.auth``);
- tokens: no verification token outlives its user (the kinds that may are named, with why, in
  :data:`_OUTLIVE_THEIR_USER`), and every item of the tokens table is of a kind the code writes;
- outbox: every message names the user it is about, and a message carrying a one-time link
  (verify-email, recover-password) matches the token record that link names, which exists for as
  long as the user's pending link is that one; every other item is a readable recovery request
  (waiting for the recovery function, which removes it).

Read with (consistent) Scans: for tests and operators only, never a request path. A Scan is not a
snapshot, so read a stack no request is writing to (after a test, or with the API held by a kill
switch); the tables are read in the order that leaves the fewest windows (outbox, tokens, sessions,
users), and what a sweep deletes meanwhile cannot make a finding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Mapping
from typing import Any

from nimbus_core.adapters.activity_items import event_from_image
from nimbus_core.adapters.items import from_item, from_stored
from nimbus_core.adapters.outbox import (
    ACTIVITY,
    NOTICE_SENT,
    RECOVERY_REQUEST,
    OutboxMessage,
    message_from_image,
    recovery_request_from_image,
)
from nimbus_core.domain.models import Session, User, iso_to_epoch
from nimbus_core.factors.security_keys import SIGN_IN_ENDPOINT
from nimbus_core.platform.settings import Settings
from nimbus_core.sessions.tokens import hash_secret, parse_user_token

# The link tokens' lifetimes when a deployment keeps the defaults (CONTRACT sections 8 and 14): a
# pending link whose record TTL has removed is no finding once its lifetime is over.
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Settings)}
VERIFICATION_SECONDS = int(_DEFAULTS["verification_token_hours"]) * 3600
RECOVERY_SECONDS = int(_DEFAULTS["recovery_token_minutes"]) * 60

# Items of the tokens table by key prefix (adapters/tokens.py, adapters/challenges.py).
_VERIFY, _RECOVER, _CHALLENGE, _ENROL, _DEVICE = "VERIFY#", "RECOVER#", "CHALLENGE#", "ENROL#", "DEVICE#"
# Kinds that may outlive their user. Deleting a user (account_changes.deletion_ops) removes the user
# item and, in the same transaction, the user's pending verification and recovery tokens; the others
# stay until their TTL, and none of them can act without their user:
# - RECOVER#: a reset reads the token with its user and refuses it when the user is gone (or is not
#   pointing at it: a password or address change drops the pointer and leaves the record, which a
#   later deletion then leaves too); 30 minutes.
# - CHALLENGE#: answering reads the challenge with its user (login) or with the caller's session,
#   which died with the user; 5 minutes.
# - ENROL#: a factor setup is confirmed only by the session that began it, which died with the user.
# - DEVICE#: a known device lifts the login lock only for a login of its own user (by id, which no
#   later account reuses); 180 days.
_OUTLIVE_THEIR_USER = (_RECOVER, _CHALLENGE, _ENROL, _DEVICE)
# Outbox kinds: the ones with a link token, the ban notice, and the security notices (notice-*).
_LINK_KINDS = {
    "verify-email": (_VERIFY, "pendingVerification"),
    "recover-password": (_RECOVER, "pendingRecovery"),
}
_OTHER_KINDS = {"ban"}
_NOTICE_PREFIX = "notice-"
# A one-time token as a link carries it: ``<userId>.<secret>`` (nimbus_core.sessions.tokens.UserToken).
_LINK_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])([0-9A-Z]{26}|[0-9]{1,20})\.([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"
)


def _scan_items(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table`` as stored (a strongly consistent, paged Scan)."""
    pages = dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return [item for page in pages for item in page["Items"]]


def _scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table`` as plain values."""
    return [from_item(item) for item in _scan_items(dynamodb, table)]


def users_table_violations(dynamodb: Any, table: str = "UsersTable") -> list[str]:
    """Every broken invariant of the users table, in words (empty when all hold)."""
    return _users_table_problems(_scan(dynamodb, table))


def _users_table_problems(items: list[dict[str, Any]]) -> list[str]:
    users = {str(i["id"]): i for i in items if str(i["pk"]).startswith("USER#")}
    claims = {
        str(i["pk"]): str(i["userId"]) for i in items if str(i["pk"]).startswith(("USERNAME#", "EMAIL#"))
    }
    counted = sum(int(i.get("users", 0)) for i in items if str(i["pk"]).startswith("USERCOUNT#"))
    problems: list[str] = []
    for claim, holder in claims.items():
        user = users.get(holder)
        kind, _, key = claim.partition("#")
        field = "usernameKey" if kind == "USERNAME" else "emailKey"
        if user is None:
            problems.append(f"{claim} names user {holder}, who does not exist")
        elif user.get(field) != key:
            problems.append(f"{claim} names user {holder}, whose {field} is {user.get(field)!r}")
    for user_id, user in users.items():
        for kind, field in (("USERNAME", "usernameKey"), ("EMAIL", "emailKey")):
            if claims.get(f"{kind}#{user.get(field)}") != user_id:
                problems.append(f"user {user_id} does not hold its {kind.lower()} claim {user.get(field)!r}")
    for item in items:
        if str(item["pk"]).startswith("CREDENTIAL#"):
            problems += _credential_claim_problems(item, users)
    if counted != len(users):
        problems.append(f"the user count says {counted}, the table holds {len(users)} users")
    for user_id, user in users.items():
        problems += _secret_problems(user_id, user)
    return problems


def _credential_claim_problems(claim: dict[str, Any], users: dict[str, dict[str, Any]]) -> list[str]:
    """A security key's credential claim names a user who has that key (a claim left behind would
    keep the key out of every account; one missing would let a second account enrol it)."""
    pk, holder, factor_id = str(claim["pk"]), str(claim["userId"]), str(claim.get("factorId"))
    factor = ((users.get(holder) or {}).get("secondFactors") or {}).get(factor_id) or {}
    credential = str(factor.get("credentialId", ""))
    if pk != "CREDENTIAL#" + hashlib.sha256(credential.encode()).hexdigest():
        return [f"{pk[:24]} names key {factor_id} of user {holder}, who has no such key"]
    return []


def _secret_problems(user_id: str, user: dict[str, Any]) -> list[str]:
    factors: dict[str, Any] = user.get("secondFactors") or {}
    sealed = {k.removeprefix("totpSecret#") for k in user if k.startswith("totpSecret#")}
    problems = [
        f"user {user_id} holds a sealed TOTP secret for {fid}, which is no TOTP factor of theirs"
        for fid in sorted(sealed)
        if (factors.get(fid) or {}).get("type") != "totp"
    ]
    for fid, factor in factors.items():
        if factor.get("type") != "totp":
            continue
        if fid in sealed and factor.get("secret"):
            problems.append(f"user {user_id}'s TOTP factor {fid} holds its secret sealed and in plaintext")
        elif fid not in sealed and not factor.get("secret"):
            problems.append(f"user {user_id}'s TOTP factor {fid} has no secret")
    return problems


def stack_violations(dynamodb: Any, tables: Mapping[str, str], *, now: float | None = None) -> list[str]:
    """Every broken invariant of the stack whose tables are ``tables`` (logical id -> physical name:
    UsersTable, SessionsTable, TokensTable, OutboxTable; the counters and domains tables hold none),
    in words (empty when all hold). ``now``: the time sessions and links are judged at."""
    at = time.time() if now is None else now
    outbox: list[OutboxMessage] = []
    unreadable: list[str] = []
    for item in _scan_items(dynamodb, tables["OutboxTable"]):
        try:
            if item.get("kind", {}).get("S") == RECOVERY_REQUEST:
                recovery_request_from_image(item)  # waiting for the recovery function: no finding
            elif item.get("kind", {}).get("S") == ACTIVITY:
                event_from_image(item)  # waiting for the activity function: no finding
            elif item.get("kind", {}).get("S") == NOTICE_SENT:
                continue  # when an account's last new sign-in notice went: no message
            else:
                outbox.append(message_from_image(item))
        except (KeyError, ValueError, TypeError):
            unreadable.append(f"outbox item {item.get('id', {}).get('S')} is not a message no change writes")
    tokens = {str(item["pk"]): item for item in _scan(dynamodb, tables["TokensTable"])}
    sessions = _scan(dynamodb, tables["SessionsTable"])
    user_items = _scan(dynamodb, tables["UsersTable"])
    users = {str(i["id"]): from_stored(User, i) for i in user_items if str(i["pk"]).startswith("USER#")}
    return [
        *unreadable,
        *_users_table_problems(user_items),
        *_session_violations(sessions, users, at),
        *_token_violations(tokens, users),
        *_outbox_violations(outbox, tokens, users, at),
    ]


def _session_violations(sessions: list[dict[str, Any]], users: dict[str, User], now: float) -> list[str]:
    """``nimbus_core.sessions.auth.authenticate`` accepts a session when its item and its user are read in the
    same BatchGetItem, the secret matches, it has not expired, the user is not banned and the session
    is of the user's current generation (``sessionGeneration``: a revoke-all moves it on).

    So a session whose user is gone never authenticates, and never will: user ids are never made
    again (ids.new_id; an account imported from upstream leaves IMPORTED#<id>, so it is never imported
    twice). Such items are left to the sweep (SweepFunction, from the users stream) and to their TTL:
    not a finding. What would be one, a stored session that authenticates when it must not, now or
    after a later change of its user that the code treats as harmless:

    - a session of a generation beyond its user's: the user's next revoke-all (which moves the
      generation up by one) would bring it to life;
    - an unexpired session of a banned user at the user's current generation: refused only while
      the ban lasts, it would authenticate again after an unban, and a ban revokes every session
      (CONTRACT section 3: a banned user "has no sessions").
    """
    problems: list[str] = []
    for item in sessions:
        session = from_stored(Session, {**item, "id": item["sessionId"]})
        user = users.get(session.user_id)
        if user is None:
            continue  # never authenticates (see above)
        where = f"session {session.user_id}/{session.id}"
        if session.generation > user.session_generation:
            problems.append(
                f"{where} is of generation {session.generation}, beyond its user's "
                f"{user.session_generation}: a later revoke-all would bring it to life"
            )
        elif (
            user.banned_at is not None and session.generation == user.session_generation and session.exp > now
        ):
            problems.append(
                f"{where} of banned user {user.id} is not revoked: it would authenticate after an unban"
            )
    return problems


def _token_violations(tokens: dict[str, dict[str, Any]], users: dict[str, User]) -> list[str]:
    problems: list[str] = []
    for pk, item in tokens.items():
        kind = next((k for k in (_VERIFY, *_OUTLIVE_THEIR_USER) if pk.startswith(k)), None)
        owner = item.get("userId")
        if kind is None:
            problems.append(f"tokens table item {pk} is of no kind the code writes")
        elif (not isinstance(owner, str) or not owner) and item.get("endpoint") != SIGN_IN_ENDPOINT:
            # Only a passkey sign-in's challenge names no user: its answer names one.
            problems.append(f"{kind}{_short(pk)} names no user")
        elif kind == _VERIFY and owner not in users:
            # Deletion removes the user's pending verification token in its own transaction, and
            # every change that replaces or drops that pointer deletes the token it read there. (A
            # change built on a stale read can leave a token no pointer names: see the resend race
            # in tests/unit/test_invariants.py; a later deletion then leaves it behind, named here.)
            problems.append(f"{kind}{_short(pk)} names user {owner}, who does not exist")
        elif (
            kind == _DEVICE
            and owner in users
            and int(item.get("generation", 0)) > users[owner].session_generation
        ):
            # Issued at the generation its user is stored with, in the sign-in's own transaction.
            problems.append(
                f"{kind}{_short(pk)} is of a generation beyond its user's: a revoke-all would revive it"
            )
    return problems


def _outbox_violations(
    outbox: list[OutboxMessage], tokens: dict[str, dict[str, Any]], users: dict[str, User], now: float
) -> list[str]:
    """Every message was written in the transaction of its change (adapters/outbox.py), which read or
    wrote its user, so the user existed then; a message about a user deleted since is removed by the
    sweep (a message the stream already handed to the mail function may still go out: the ban notice
    of a user banned then deleted, say): not a finding. What is one: a message that names no user
    (the sweep could never find it), of a kind the code does not write, or carrying a link that is
    not the one its token record holds (other user, other address), or that is its user's pending
    link while the record is gone before its time (the link would fail although nothing used or
    superseded it)."""
    problems: list[str] = []
    for message in outbox:
        where = f"outbox message {message.id} ({message.kind})"
        if message.user_id is None:
            problems.append(f"{where} names no user")
            continue
        if message.kind in _LINK_KINDS:
            problems += _link_violations(message, where, tokens, users, now)
        elif message.kind not in _OTHER_KINDS and not message.kind.startswith(_NOTICE_PREFIX):
            problems.append(f"{where} is of a kind the code does not write")
    return problems


def _link_violations(
    message: OutboxMessage, where: str, tokens: dict[str, dict[str, Any]], users: dict[str, User], now: float
) -> list[str]:
    prefix, pointer = _LINK_KINDS[message.kind]
    found = [parse_user_token(m.group(0)) for m in _LINK_TOKEN.finditer(message.email.text)]
    links = [t for t in found if t is not None]
    if len(links) != 1:
        return [f"{where} carries {len(links)} link tokens, not one"]
    (link,) = links
    if link.user_id != message.user_id:
        return [f"{where} about user {message.user_id} carries a link for user {link.user_id}"]
    token_hash = hash_secret(link.secret)
    record = tokens.get(f"{prefix}{token_hash}")
    problems: list[str] = []
    if record is not None and (
        record.get("userId") != message.user_id or record.get("email") != message.email.to
    ):
        problems.append(
            f"{where} to {message.email.to} carries a link whose record is bound to user "
            f"{record.get('userId')} at {record.get('email')}"
        )
    user = users.get(message.user_id)
    if user is None:
        return problems  # the user is gone: see _token_violations for what must be gone with them
    pending = user.pending_verification if pointer == "pendingVerification" else user.pending_recovery
    lifetime = VERIFICATION_SECONDS if prefix == _VERIFY else RECOVERY_SECONDS
    if pending == token_hash and record is None and iso_to_epoch(message.created_at) + lifetime > now:
        # Used (the pointer is cleared with the record), superseded (the pointer moves on) or
        # expired (TTL) links are the only ones whose record may be gone.
        problems.append(
            f"{where}: the link is user {user.id}'s pending one ({pointer}), but its record is gone"
        )
    if pending == token_hash and record is not None and record.get("email") != user.email:
        problems.append(
            f"{where}: user {user.id}'s pending link is bound to {record.get('email')}, not {user.email}"
        )
    return problems


def _short(pk: str) -> str:
    """A token key's hash, shortened for a message (the hash is no secret, but is long)."""
    return pk.partition("#")[2][:12] + "..."
