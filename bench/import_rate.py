"""``nimbus import``'s pace, and a bcrypt user's first login (docs/performance.md)."""

from __future__ import annotations

import time
from typing import Any

import boto3
from botocore.config import Config
from moto import mock_aws

from bench.aws_hook import CannedAws
from bench.runs import REGION, Report, aws_environment
from nimbus_core.sessions import passwords
from nimbus_tools.local.provision import provision
from nimbus_tools.migrate.importer import Report as ImportReport
from nimbus_tools.migrate.importer import Stores, run_import
from nimbus_tools.migrate.source import UpstreamSource
from nimbus_tools.template import Template
from tests.migration.postgres import PostgresServer
from tests.migration.upstream import Upstream, bcrypt_hash

USERS, MOTO_USERS = 10_000, 200
# What DynamoDB answers each write of the import, for the in-process measure (nothing exists yet).
_CANNED: dict[str, Any] = {
    "dynamodb.BatchGetItem": {"Responses": {}, "UnprocessedKeys": {}},
    "dynamodb.TransactWriteItems": {},
    "dynamodb.PutItem": {},
    "dynamodb.BatchWriteItem": {"UnprocessedItems": {}},
    "dynamodb.UpdateItem": {},
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


def measure_import(template: Template) -> dict[str, Any]:
    """Fill the upstream databases, import them both ways, and time a first bcrypt login."""
    with PostgresServer() as postgres:
        _fill(postgres, "bench_import", USERS)
        _fill(postgres, "bench_moto", MOTO_USERS)
        with aws_environment():
            session = boto3.Session(region_name=REGION)
            CannedAws(_CANNED).install(session)
            canned = Stores.on(session.client("dynamodb", config=_CONFIG), _CANNED_TABLES)
            with UpstreamSource(postgres.url("bench_import")) as reader:
                sdk = run_import(reader, canned)
        with aws_environment(), mock_aws():
            session = boto3.Session(region_name=REGION)
            stores = Stores.on(session.client("dynamodb"), provision(session, template).tables)
            with UpstreamSource(postgres.url("bench_moto")) as reader:
                moto = run_import(reader, stores, workers=1)
            with UpstreamSource(postgres.url("bench_moto")) as reader:
                again = run_import(reader, stores, workers=1)
    return {"sdk": sdk, "moto": moto, "again": again, **_first_login()}


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
    result = measure_import(template)
    lines = []
    for key, label in (
        ("sdk", "SDK, AWS answered in process, 8 writers"),
        ("moto", "moto in process, 1 writer"),
    ):
        report: ImportReport = result[key]
        users, sessions, factors = (report.imported.get(k, 0) for k in ("users", "sessions", "factors"))
        seconds = report.seconds
        lines += [
            f"{label}: {users:,} users, {sessions:,} sessions, {factors:,} factors in {seconds:.1f} s",
            f"  {users / seconds:,.0f} users/s, {sessions / seconds:,.0f} sessions/s,"
            f" {factors / seconds:,.0f} factors/s",
        ]
    again: ImportReport = result["again"]
    lines += [
        f"moto, a second run: {again.unchanged.get('users', 0):,} users already there, "
        f"{again.imported.get('users', 0)} imported, in {again.seconds:.1f} s",
        f"First login of an imported user: bcrypt cost 15 {result['bcrypt15_ms']:,.0f} ms CPU, "
        f"then the argon2id rehash {result['argon2_ms']:,.0f} ms CPU (once per user)",
    ]
    return Report("\n".join(lines), result, [])
