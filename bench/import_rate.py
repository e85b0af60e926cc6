"""``nimbus import``'s pace, and a bcrypt user's first login (docs/performance.md)."""

from __future__ import annotations

import base64
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.aws_hook import CannedAws
from bench.runs import REGION, Report, aws_environment
from nimbus_core.adapters.kms import KmsKeys
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.sessions import passwords
from nimbus_tools.local.launcher import start_local_api
from nimbus_tools.migrate.importer import Report as ImportReport
from nimbus_tools.migrate.importer import Stores, run_import
from nimbus_tools.migrate.source import UpstreamSource
from nimbus_tools.template import Template, local_key_arn
from tests.migration.postgres import PostgresServer
from tests.migration.upstream import Upstream, bcrypt_hash

USERS = 10_000
GOAL_SECONDS = 300.0  # the import into `make serve`'s stack
# What DynamoDB answers each write of the import, for the in-process measure (nothing exists yet).
_CANNED: dict[str, Any] = {
    "dynamodb.BatchGetItem": {"Responses": {}, "UnprocessedKeys": {}},
    "dynamodb.TransactWriteItems": {},
    "dynamodb.PutItem": {},
    "dynamodb.BatchWriteItem": {"UnprocessedItems": {}},
    "dynamodb.UpdateItem": {},
    # The run's one data key for the TOTP secrets it seals (any 32 bytes do: nothing opens them).
    "kms.GenerateDataKey": {
        "KeyId": local_key_arn("TotpKey"),
        "Plaintext": base64.b64encode(bytes(32)).decode(),
        "CiphertextBlob": base64.b64encode(bytes(184)).decode(),
    },
}
# One live session per user, a TOTP factor for every other user (ids: upstream's decimal ones).
# AWS is answered in process there: any names do; these are the emulator's (the logical ids).
_CANNED_TABLES = {name: name for name in ("UsersTable", "SessionsTable", "TokensTable", "DomainsTable")}
_CONFIG = Config(max_pool_connections=32)
_SESSIONS = """
INSERT INTO "Sessions" (id, "user", exp, name, "createdAt", "updatedAt")
SELECT '1700000000', id, now() + interval '7 days', 'Firefox on Linux', now(), now() FROM "Users"
"""
_FACTORS = """
INSERT INTO "SecondFactors" (id, "user", type, name, secret, "createdAt", "updatedAt")
SELECT id || '7', id, 'totp', 'Phone', 'JBSWY3DPEHPK3PXP', now(), now()
FROM "Users" WHERE right(id, 1)::int % 2 = 0
"""


def measure_import(users: int = USERS) -> dict[str, Any]:
    """Fill the upstream database, import it both ways, and time a first bcrypt login."""
    with PostgresServer() as postgres:
        _fill(postgres, "bench_import", users)
        with aws_environment():
            session = boto3.Session(region_name=REGION)
            CannedAws(_CANNED).install(session)
            kms = session.client("kms")
            sealer = Sealer(lambda: KmsKeys(kms), key_id=local_key_arn("TotpKey"), stage="bench")
            canned = Stores.on(session.client("dynamodb", config=_CONFIG), _CANNED_TABLES, sealer)
            with UpstreamSource(postgres.url("bench_import")) as reader:
                sdk = run_import(reader, canned)
        local, again = _into_local_stack(postgres.url("bench_import"))
    return {"sdk": sdk, "local": local, "again": again, **_first_login()}


def _into_local_stack(url: str) -> tuple[ImportReport, ImportReport]:
    """Import ``url`` into `make serve`'s stack (started here) as `nimbus import` does (8 writers),
    then again (everything already there)."""
    with tempfile.TemporaryDirectory(prefix="nimbus-bench-import-", ignore_cleanup_errors=True) as state:
        api = start_local_api(state_dir=Path(state), timeout=120)
        try:
            key = "testing"  # the emulator's credentials
            emulator = boto3.Session(aws_access_key_id=key, aws_secret_access_key=key, region_name=REGION)
            client = emulator.client("dynamodb", endpoint_url=api.aws_endpoint_url, config=_CONFIG)
            kms = emulator.client("kms", endpoint_url=api.aws_endpoint_url)
            sealer = Sealer(lambda: KmsKeys(kms), key_id=api.state["totp_key"], stage=api.state["stage"])
            stores = Stores.on(client, {name: api.state["tables"][name] for name in _CANNED_TABLES}, sealer)
            with UpstreamSource(url) as reader:
                first = run_import(reader, stores)
            with UpstreamSource(url) as reader:
                return first, run_import(reader, stores)
        finally:
            api.stop()


def _fill(postgres: PostgresServer, name: str, users: int) -> None:
    source = Upstream.connect(postgres.create_database(name))
    source.create_schema()
    source.add_domain("example.com")
    source.bulk_users(users)
    source.connection.execute(_SESSIONS)
    source.connection.execute(_FACTORS)
    source.close()


def _first_login() -> dict[str, float]:
    legacy = bcrypt_hash("correct horse", 15)
    started = time.process_time()
    assert passwords.verify_password(legacy, "correct horse")
    bcrypt_ms = (time.process_time() - started) * 1000
    started = time.process_time()
    passwords.hash_password("correct horse")
    argon2_ms = (time.process_time() - started) * 1000
    return {"bcrypt15_ms": bcrypt_ms, "argon2_ms": argon2_ms}


def run(template: Template, runs: int) -> Report:
    """The import's figures."""
    result = measure_import()
    lines = []
    for key, label in (
        ("sdk", "SDK, AWS answered in process, 8 writers"),
        ("local", "`make serve`'s stack (moto behind the emulator), 8 writers"),
    ):
        report: ImportReport = result[key]
        users, sessions, factors = (report.imported.get(k, 0) for k in ("users", "sessions", "factors"))
        seconds = report.seconds
        lines += [
            f"{label}: {users:,} users, {sessions:,} sessions, {factors:,} factors in {seconds:.1f} s",
            f"  {users / seconds:,.0f} users/s, {sessions / seconds:,.0f} sessions/s,"
            f" {factors / seconds:,.0f} factors/s",
        ]
    seconds = result["local"].seconds
    verdict = "OK" if seconds <= GOAL_SECONDS else "OVER"
    again: ImportReport = result["again"]
    lines += [
        f"Into `make serve`'s stack: {seconds:.0f} s against the {GOAL_SECONDS:.0f} s goal: {verdict}",
        f"`make serve`'s stack, a second run: {again.unchanged.get('users', 0):,} users already there, "
        f"{again.imported.get('users', 0)} imported, in {again.seconds:.1f} s",
        f"First login of an imported user: bcrypt cost 15 {result['bcrypt15_ms']:,.0f} ms CPU, "
        f"then the argon2id rehash {result['argon2_ms']:,.0f} ms CPU (once per user)",
    ]
    return Report("\n".join(lines), result, ["import into the local stack"] if verdict == "OVER" else [])
