"""Timestamps in the one format Nimbus stores: ISO-8601 UTC with milliseconds and a Z."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_timestamp(moment: datetime | None = None) -> str:
    """``2026-05-09T22:01:11.123Z`` for ``moment`` (default: now)."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
