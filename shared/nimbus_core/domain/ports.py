"""What the rules need from the outside world: the ports, as ``typing.Protocol``s, and the values
and ops they exchange.

Services receive these ports as arguments (bundled in :class:`nimbus_core.domain.deps.Deps`) and never
import boto3: the DynamoDB/SSM/SES adapters in ``nimbus_core.adapters`` implement them for Lambda,
the in-memory fakes in ``tests/fakes`` implement them for tests, and one contract suite
(``tests/contract``) runs against both so they cannot drift.

Multi-item changes are composed from :class:`WriteOp`s that the stores build and one
:class:`Transactor` commits atomically (a DynamoDB transaction, or one locked step in the fakes).
An op carries the domain error its condition means (e.g. a taken username claim is
``USER_EXISTS_ERROR``), so a cancelled transaction raises that error, never a storage exception.

Here: the ops, the values the ports return, the :class:`Transactor` and the :class:`Clock`. The
stores, by concern (each only ever named in annotations, so never imported at run time):

- ``user_ports``: :class:`UserStore` and :class:`SessionStore` (accounts and their sessions);
- ``token_ports``: :class:`TokenStore` (single-use secrets stored under their hash, of the kinds
  ``secret_kinds`` names: second-factor challenges, pending enrolments, mailed links; and known
  devices);
- ``deployment_ports``: :class:`CounterStore`, :class:`DomainStore`, :class:`Outbox` and
  :class:`RuntimeConfigSource` (what the deployment shares: rate-limit counters, the offered
  domains, outgoing mail and recovery requests, kill switches and log level).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from nimbus_core.domain.errors import DependencyError
from nimbus_core.domain.killswitches import KillSwitch


class WriteOp:
    """One element of an atomic multi-item write, built by a store and committed by a Transactor."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class CounterState:
    """The outcome of one counted hit in a fixed window."""

    allowed: bool
    count: int
    limit: int
    reset_at: int  # Unix seconds when the window ends

    def remaining(self) -> int:
        """Hits left in the window."""
        return max(self.limit - self.count, 0)

    def reset_in(self, now: float) -> int:
        """Whole seconds until the window ends (at least 1 while it is open)."""
        return max(math.ceil(self.reset_at - now), 1)


class CounterWindowMovedError(Exception):
    """A hit could not be given back in a transaction: its window ended meanwhile."""


class CounterThrottledError(DependencyError):
    """The store throttled the counter's own item (a hot key), after the SDK's retries."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """A snapshot of the operator-controlled settings."""

    enabled_switches: frozenset[KillSwitch]
    log_level: str


@dataclass(frozen=True, slots=True)
class RecoveryRequest:
    """A ``POST /users/recover`` waiting for the recovery function: the name as asked, nothing
    looked up yet (the lookup and the mail happen after the answer, so its timing tells nothing)."""

    id: str
    login_name: str
    created_at: str
    expires_at: int

    def expired(self, now: float) -> bool:
        """Whether the request is too old to act on (a stalled stream caught up late)."""
        return self.expires_at <= now


class RecoveryRequestGoneError(Exception):
    """The recovery request was handled already (a record the stream delivered again)."""


class Clock(Protocol):
    """The single source of time."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class Transactor(Protocol):
    """Commits write ops atomically: all of them or none."""

    def commit(self, ops: Sequence[WriteOp]) -> None:
        """Write ``ops``; a failed condition raises the domain error its op carries."""
        ...

    def commit_joined(self, first: Sequence[WriteOp], then: Sequence[WriteOp]) -> None:
        """Write ``first`` and ``then`` in one transaction when their items allow it (two writes of
        one item are merged into one); otherwise, or when a merged write's condition fails, commit
        ``first`` and then ``then``, each atomically, so each failure is its own domain error."""
        ...


class SealError(Exception):
    """A sealed secret that does not open: malformed, tampered with, bound to another user or
    factor, or under a key KMS refuses. Its message never holds the secret."""


class SecretSealer(Protocol):
    """Seals second-factor secrets for storage (envelope encryption under a KMS key) and opens
    them again, each bound to its user and factor (docs/security.md, "Sealed secrets")."""

    def seal(self, secret: str, *, user_id: str, factor_id: str) -> str:
        """``secret`` sealed for ``user_id``'s factor ``factor_id``: the stored form."""
        ...

    def unseal(self, value: str, *, user_id: str, factor_id: str) -> str:
        """The secret ``value`` seals for that user and factor, or :class:`SealError`."""
        ...

    def is_sealed(self, value: str) -> bool:
        """Whether a stored ``value`` is sealed (else a plaintext secret stored before sealing)."""
        ...
