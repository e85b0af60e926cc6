"""``nimbus import POSTGRES_URL``: an upstream Cumulonimbus deployment's accounts into this stack."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from botocore.config import Config

from nimbus_tools.cli.target import EXIT_USAGE, CliError
from nimbus_tools.migrate.importer import Stores, run_import
from nimbus_tools.migrate.source import UpstreamSource

if TYPE_CHECKING:
    from nimbus_tools.cli.commands import TargetFactory

_TABLES = ("UsersTable", "SessionsTable", "TokensTable", "DomainsTable")
# Throttling is expected at import rates: botocore's adaptive mode backs off and paces the client.
_RETRIES = Config(retries={"mode": "adaptive", "max_attempts": 10}, max_pool_connections=32)


def import_command(args: argparse.Namespace, target: TargetFactory) -> str:
    """``import POSTGRES_URL [--dry-run] [--page-size N] [--workers N] [--json]``: run the import and
    answer its report (a progress bar on stderr meanwhile)."""
    if not args.url.startswith(("postgresql://", "postgres://")):
        raise CliError("give the upstream database as postgresql://user@host:port/dbname", EXIT_USAGE)
    if not 1 <= args.page_size <= 5000 or not 1 <= args.workers <= 64:
        raise CliError("--page-size is 1..5000 and --workers 1..64", EXIT_USAGE)
    stack = target()
    client = stack.dynamodb(_RETRIES)
    # Upstream's TOTP secrets are sealed on the way in, as the functions seal an enrolment's.
    stores = Stores.on(client, {name: stack.table(name) for name in _TABLES}, stack.sealer())
    import psycopg
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        source = UpstreamSource(args.url)
    except psycopg.OperationalError as error:
        # The server's or libpq's answer (refused, unknown host, authentication failed): no secret.
        raise CliError(f"cannot read the upstream database: {error}".strip()) from None
    except psycopg.Error:
        # Anything else is about the URL itself, whose text may hold the password: not repeated.
        raise CliError(
            "cannot read the upstream database: the URL could not be used (check its form; give the"
            " password in PGPASSWORD or ~/.pgpass rather than in the URL)"
        ) from None
    columns = (TextColumn("accounts"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with source, Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        task = progress.add_task("import", total=None)
        report = run_import(
            source,
            stores,
            dry_run=args.dry_run,
            page_size=args.page_size,
            workers=args.workers,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    return json.dumps(report.as_json(), indent=2) if args.json else report.render()
