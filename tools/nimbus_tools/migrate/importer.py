"""``nimbus import``: an upstream Cumulonimbus database into a Nimbus stack, idempotent and resumable
(CONTRACT section 15; docs/migrate.md)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import batched
from typing import Any

from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.sessions import DynamoSessions
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers, ImportState
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.domain.identity import email_key, username_key
from nimbus_core.domain.models import Session, User
from nimbus_core.domain.ports import SecretSealer
from nimbus_tools.migrate import records
from nimbus_tools.migrate.source import UpstreamAccount, UpstreamSource

BATCH_READ = 50  # accounts per BatchGetItem (two keys each: the user and its import mark)
SESSIONS_READ = 100  # a user's sessions per BatchGetItem


@dataclass
class Report:
    """What a run did (or, with ``dry_run``, would do)."""

    dry_run: bool
    source: dict[str, int] = field(default_factory=dict)
    imported: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unchanged: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    skipped: list[dict[str, str]] = field(default_factory=list)
    # Accounts imported earlier whose upstream row changed since: never overwritten, only listed.
    changed: list[dict[str, str]] = field(default_factory=list)
    # Live upstream sessions that cannot be kept (an id that is no iat, unknown scopes), with why.
    dropped_sessions: list[dict[str, str]] = field(default_factory=list)
    # Sessions an earlier run imported that were revoked in Nimbus since: left revoked.
    revoked_sessions: int = 0
    seconds: float = 0.0

    def render(self) -> str:
        """The final report, as printed."""
        verb = "would import" if self.dry_run else "imported"
        lines = [f"Source: {', '.join(f'{n} {k}' for k, n in self.source.items())} (unexpired sessions only)"]
        for kind in ("domains", "users", "factors", "sessions"):
            new, old = self.imported.get(kind, 0), self.unchanged.get(kind, 0)
            lines.append(f"{kind:<9} {verb} {new:>7}   already there {old:>7}")
        lines.append(f"skipped   {len(self.skipped):>7} account(s)" + (":" if self.skipped else ""))
        lines += [f"  {s['id']} {s['username']}: {s['reason']}" for s in self.skipped]
        if self.dropped_sessions:
            lines.append(f"sessions not imported: {len(self.dropped_sessions)}")
            lines += [f"  {d['user']} session {d['id']}: {d['reason']}" for d in self.dropped_sessions]
        if self.revoked_sessions:
            lines.append(
                f"sessions revoked in Nimbus since their import, not brought back: {self.revoked_sessions}"
            )
        if self.changed:
            lines.append(f"changed upstream since their import, left as imported: {len(self.changed)}")
            lines += [f"  {c['id']} {c['username']}" for c in self.changed]
        lines.append(
            f"in {self.seconds:.1f} s" + ("  (dry run: nothing was written)" if self.dry_run else "")
        )
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """The report as data."""
        return {
            "dryRun": self.dry_run,
            "source": self.source,
            "imported": dict(self.imported),
            "unchanged": dict(self.unchanged),
            "skipped": self.skipped,
            "changedUpstream": self.changed,
            "droppedSessions": self.dropped_sessions,
            "revokedSessions": self.revoked_sessions,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Stores:
    """The Nimbus stack's tables, through the functions' own adapters."""

    users: DynamoUsers
    sessions: DynamoSessions
    domains: DynamoDomains
    transactor: DynamoTransactor
    sealer: SecretSealer  # the imported TOTP secrets are sealed as the functions seal them

    @classmethod
    def on(cls, client: Any, tables: Mapping[str, str], sealer: SecretSealer) -> Stores:
        """The stores of a stack whose tables are named ``tables`` (logical id -> name)."""
        users = tables["UsersTable"]
        return cls(
            users=DynamoUsers(client, users),
            sessions=DynamoSessions(client, tables["SessionsTable"], users, tables["TokensTable"]),
            domains=DynamoDomains(client, tables["DomainsTable"]),
            transactor=DynamoTransactor(client),
            sealer=sealer,
        )


@dataclass(frozen=True)
class _Outcome:
    users: str  # "imported", "unchanged" or "skipped"
    factors: int = 0
    factors_old: int = 0  # already there: written by an earlier run
    sessions_new: int = 0
    sessions_old: int = 0
    sessions_revoked: int = 0  # written by an earlier run, revoked in Nimbus since
    reason: str = ""
    changed_upstream: bool = False
    dropped: dict[str, str] = field(default_factory=dict)


def run_import(
    source: UpstreamSource,
    stores: Stores,
    *,
    dry_run: bool = False,
    page_size: int = 500,
    workers: int = 8,
    on_progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Import every domain and account of ``source``; ``on_progress(done, total)`` after each page."""
    started = time.monotonic()
    report = Report(dry_run=dry_run, source=source.counts())
    _import_domains(source, stores, report)
    collisions = source_collisions(source.names())
    now = time.time()
    done = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for page in source.pages(page_size):
            states: dict[str, ImportState] = {}
            for rows in batched(page, BATCH_READ, strict=False):
                states |= stores.users.import_states([row.id for row in rows])
            outcomes = pool.map(
                partial(_account, collisions=collisions, stores=stores, dry_run=dry_run, now=now),
                page,
                [states.get(row.id) for row in page],
            )
            for row, outcome in zip(page, outcomes, strict=True):
                _tally(report, row, outcome)
            done += len(page)
            if on_progress is not None:
                on_progress(done, report.source["users"])
    report.seconds = time.monotonic() - started
    return report


def source_collisions(names: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """The accounts of the source that collide with another of the source under Nimbus's rules
    (usernames case-insensitively, addresses IDNA-normalised and casefolded): id -> why. Every
    party is skipped: which one is the real owner is the operator's call, not ours."""
    by_name: dict[str, list[str]] = defaultdict(list)
    by_address: dict[str, list[str]] = defaultdict(list)
    for user_id, username, email in names:
        by_name[username_key(username)].append(user_id)
        try:
            by_address[email_key(email)].append(user_id)
        except ValueError:
            continue  # an address that is not one is refused on its own
    found: dict[str, str] = {}
    for kind, groups in (("username", by_name), ("address", by_address)):
        for ids in groups.values():
            if len(ids) > 1:
                for user_id in ids:
                    others = ", ".join(i for i in ids if i != user_id)
                    found.setdefault(user_id, f"its {kind} collides with account(s) {others} of the source")
    return found


def _import_domains(source: UpstreamSource, stores: Stores, report: Report) -> None:
    for row in source.domains():
        domain = records.domain(row)
        new = stores.domains.get(domain.id) is None if report.dry_run else stores.domains.create(domain)
        (report.imported if new else report.unchanged)["domains"] += 1


def _account(
    row: UpstreamAccount,
    held: ImportState | None,
    *,
    collisions: dict[str, str],
    stores: Stores,
    dry_run: bool,
    now: float,
) -> _Outcome:
    """Import one account (``held``: how Nimbus holds it already, if at all)."""
    planned = _plan(row, held, collisions, now=now)
    if isinstance(planned, _Outcome):
        return planned
    if held is not None and held.kind == "done":
        return _done_before(row, held, planned, stores, now=now)
    user = planned.user
    if held is None:
        taken = _taken(stores, user) if dry_run else _create(stores, row, user)
        if taken:
            return _Outcome("skipped", reason=taken)
        # Created just now (or to be): its sessions cannot exist yet, so they go in batches.
        if not dry_run:
            stores.sessions.import_new_sessions(planned.sessions)
            stores.users.finish_import(user.id)
        return _Outcome(
            "imported",
            factors=len(user.second_factors),
            sessions_new=len(planned.sessions),
            dropped=planned.dropped,
        )
    # Pending: a run stopped while writing its sessions (the account and its factors are there).
    if dry_run:
        new = len(planned.sessions) - len(_stored(stores, user.id, planned.sessions))
    else:
        new = sum(stores.sessions.import_session(session) for session in planned.sessions)
        stores.users.finish_import(user.id)
    return _Outcome(
        "unchanged",
        factors_old=len(user.second_factors),
        sessions_new=new,
        sessions_old=len(planned.sessions) - new,
        dropped=planned.dropped,
    )


def _create(stores: Stores, row: UpstreamAccount, user: User) -> str:
    """Create the account marked pending, its TOTP secrets sealed, in one transaction; why not
    ("" when created)."""
    try:
        stores.transactor.commit(
            stores.users.import_ops(
                sealed(stores.sealer, user), upstream_updated_at=records.stamp(row.updated_at)
            )
        )
    except NimbusError as refused:
        taken = _taken(stores, user) if refused.code is ErrorCode.USER_EXISTS_ERROR else ""
        if not taken:
            raise  # not a claim: the user item exists (another run imports it right now) or AWS failed
        return taken
    return ""


def sealed(sealer: SecretSealer, user: User) -> User:
    """``user`` with each plaintext TOTP secret of its factors sealed beside them (as an enrolment
    stores it): one data key per run, so the whole import costs one GenerateDataKey."""
    plain = {fid: f.secret for fid, f in user.second_factors.items() if f.type == "totp" and f.secret}
    if not plain:
        return user
    factors = {fid: f.changed(secret=None) if fid in plain else f for fid, f in user.second_factors.items()}
    seals = {fid: sealer.seal(secret, user_id=user.id, factor_id=fid) for fid, secret in plain.items()}
    return user.changed(second_factors=factors, totp_secrets={**user.totp_secrets, **seals})


def _done_before(
    row: UpstreamAccount, held: ImportState, planned: records.Account, stores: Stores, *, now: float
) -> _Outcome:
    """An account an earlier run finished: left as it is (never overwritten, a session revoked
    since never revived); what of it is still there is counted (reads only)."""
    changed = held.upstream_updated_at not in (None, records.stamp(row.updated_at))
    live = [
        s
        for s in _stored(stores, row.id, planned.sessions)
        if s.generation == held.session_generation and s.exp > now
    ]
    return _Outcome(
        "unchanged",
        factors_old=sum(factor_id in held.factor_ids for factor_id in planned.user.second_factors),
        sessions_old=len(live),
        sessions_revoked=len(planned.sessions) - len(live),
        changed_upstream=changed,
    )


def _stored(stores: Stores, user_id: str, sessions: list[Session]) -> list[Session]:
    """Which of ``sessions`` Nimbus stores (whatever their generation), 100 per BatchGetItem."""
    chunks = batched((s.id for s in sessions), SESSIONS_READ, strict=False)
    return [found for ids in chunks for found in stores.sessions.get_many(user_id, ids)]


def _plan(
    row: UpstreamAccount, held: ImportState | None, collisions: dict[str, str], *, now: float
) -> records.Account | _Outcome:
    """The account to write, or the outcome decided without writing (skipped, or done before)."""
    state = held.kind if held is not None else None
    if row.id in collisions:
        return _Outcome("skipped", reason=collisions[row.id])
    try:
        account = records.account(row, now=now)
    except records.RefusedError as refused:
        return _Outcome("skipped", reason=str(refused))
    if state == "native":
        return _Outcome("skipped", reason="an account Nimbus did not import has this id")
    if state == "deleted":
        return _Outcome("skipped", reason="deleted in Nimbus since it was imported: not brought back")
    return account


def _taken(stores: Stores, user: User) -> str:
    """Why ``user``'s claims cannot be had ("" when both are free or already its own)."""
    holders = stores.users.claim_holders(user)
    taken = [
        f"its {kind} is taken by account {holder}"
        for kind, holder in holders.items()
        if holder not in (None, user.id)
    ]
    return "; ".join(taken)


def _tally(report: Report, row: UpstreamAccount, outcome: _Outcome) -> None:
    if outcome.users == "skipped":
        report.skipped.append({"id": row.id, "username": row.username, "reason": outcome.reason})
        return
    (report.imported if outcome.users == "imported" else report.unchanged)["users"] += 1
    report.imported["factors"] += outcome.factors
    report.unchanged["factors"] += outcome.factors_old
    if outcome.changed_upstream:
        report.changed.append({"id": row.id, "username": row.username})
    report.dropped_sessions += [
        {"user": row.id, "id": session_id, "reason": why} for session_id, why in outcome.dropped.items()
    ]
    report.imported["sessions"] += outcome.sessions_new
    report.unchanged["sessions"] += outcome.sessions_old
    report.revoked_sessions += outcome.sessions_revoked
