"""A real PostgreSQL server per test process, and a fresh upstream Cumulonimbus database per test.

``postgres`` starts Debian's PostgreSQL once per process (each xdist worker has its own) and stops it
at the end. ``upstream`` creates a new database with the upstream schema for every test and drops it
afterwards; its rows are written through :class:`tests.migration.upstream.Upstream`, and ``upstream.url``
is what an importer connects to. ``signer`` is the upstream deployment's token key.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.migration.postgres import PostgresServer
from tests.migration.upstream import Upstream, UpstreamSigner

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """This process's PostgreSQL server."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def upstream(postgres: PostgresServer) -> Iterator[Upstream]:
    """An empty upstream database (schema only), dropped after the test."""
    name = f"upstream_{next(_databases)}"
    database = Upstream.connect(postgres.create_database(name))
    try:
        database.create_schema()
        yield database
    finally:
        database.close()
        # WITH (FORCE): a connection the test (or the code under test) left open must not keep it.
        postgres.drop_database(name)


@pytest.fixture
def signer() -> UpstreamSigner:
    """The upstream deployment's session key and certificate."""
    return UpstreamSigner()
