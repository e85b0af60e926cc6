"""Lambda SnapStart: what a function restored from a snapshot must not share with its siblings.

With SnapStart (the template's ``SnapStart`` parameter), Lambda runs a function's init once,
snapshots its memory, and starts every later instance from a copy of that snapshot. Whatever init
left in memory is then shared by all of them, so the hooks below re-seed, after each restore, the
state that must differ per instance or that belongs to the moment it was made:

- the AWS clients, their botocore session and its credentials and connection pools (credentials
  expire, and sockets opened before the snapshot are dead after it); botocore's parsed service
  data is kept, as it is the same everywhere;
- the production dependencies built on them, with the runtime configuration's cache (its age is
  kept on a monotonic clock that means nothing in another instance);
- the id generator's monotonic state, and Python's ``random`` (the mail function's backoff jitter:
  instances restored from one snapshot would otherwise retry in lockstep).

Secrets never come from ``random``: tokens and ids draw from the OS CSPRNG (``secrets``), which
Lambda keeps unique across restores.

Before the snapshot, the clients are built so that the snapshot holds botocore's parsed data and
the first request after a restore only makes new clients from it. No hook does any I/O.
"""

from __future__ import annotations

import random

from nimbus_core.adapters import container
from nimbus_core.platform import ids

_registered = False


def before_snapshot() -> None:
    """Load what every instance shares (botocore's service data) into the snapshot."""
    container.production_deps()


def after_restore() -> None:
    """Forget what this instance must not share with the others restored from the same snapshot."""
    container.reset()
    ids.reseed()
    random.seed()


def register_hooks() -> None:
    """Register the hooks with the Lambda runtime, once per process (every handler's wiring calls
    this; the runtime runs the hooks only when SnapStart is on)."""
    global _registered  # noqa: PLW0603 (one registration per process, whichever handler comes first)
    if _registered:
        return
    from snapshot_restore_py import register_after_restore, register_before_snapshot

    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    _registered = True
