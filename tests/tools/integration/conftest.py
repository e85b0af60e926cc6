"""Fixtures of the operator tool's integration tests."""

from __future__ import annotations

# A real PostgreSQL holding an upstream deployment, for `nimbus import` (started only when used).
from tests.migration.conftest import postgres, upstream  # noqa: F401
