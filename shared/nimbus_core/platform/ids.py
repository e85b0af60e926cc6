"""Identifiers and secrets.

IDs are ULID-shaped: 48 bits of milliseconds then 80 random bits, in Crockford base32 (26
characters, URL-safe, sortable by creation time). The random part makes collisions between ids made
in the same millisecond negligible, unlike upstream's second-resolution ids. A ULID library would add a
dependency and import time for eight lines.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ID = re.compile(f"[{_CROCKFORD}]{{26}}")
# Accounts moved from an upstream deployment keep their ids (CONTRACT section 15): decimal strings.
_UPSTREAM_ID = re.compile(r"[0-9]{1,20}")
# So do their sessions: the token's ``iat`` (Unix seconds) in decimal, as JavaScript writes a
# number: no sign, no leading zero. Twelve digits last until the year 33658.
_UPSTREAM_SESSION_ID = re.compile(r"[1-9][0-9]{0,11}")


class _Monotonic:
    """The last id's value, so the next one in the same millisecond can follow it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last = 0


_state = _Monotonic()


def new_id() -> str:
    """A new opaque, time-ordered, URL-safe id (26 characters).

    Monotonic within a process (ULID's monotonic mode): an id made in the same millisecond as the
    previous one is that one plus a small random step, so "newest first" holds for a user's sessions
    created in quick succession. Across containers, order is by millisecond.
    """
    with _state.lock:
        value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
        if value <= _state.last:
            value = _state.last + 1 + secrets.randbits(16)
        _state.last = value
    return _encode(value)


_at_state = _Monotonic()


def new_id_at(millisecond: int) -> str:
    """A new id of ``millisecond`` (epoch ms) rather than of now: a record's id that sorts by the
    time the record says it happened (an activity event's, whatever clock made it). Monotonic
    within a millisecond in a process, as :func:`new_id` is."""
    with _at_state.lock:
        value = millisecond << 80 | secrets.randbits(80)
        if value <= _at_state.last and _at_state.last >> 80 == millisecond:
            value = _at_state.last + 1 + secrets.randbits(16)
        _at_state.last = value
    return _encode(value)


def last_id_of(millisecond: int) -> str:
    """The greatest id of ``millisecond`` (epoch ms): it sorts after every id made in it, before
    every later one."""
    return _encode(millisecond << 80 | (1 << 80) - 1)


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def reseed() -> None:
    """Start the monotonic state afresh (a process restored from a snapshot shares it otherwise)."""
    for state in (_state, _at_state):
        with state.lock:
            state.last = 0


def is_id(value: str) -> bool:
    """Whether ``value`` has the shape of an id made by :func:`new_id`, or of an upstream account's
    id kept by an import (decimal digits)."""
    # One precompiled match: every request checks two or three ids (its token, a path parameter),
    # and a per-character generator cost several times more.
    return _ID.fullmatch(value) is not None or _UPSTREAM_ID.fullmatch(value) is not None


def is_new_id(value: str) -> bool:
    """Whether ``value`` has the shape of an id made by :func:`new_id` (and by nothing else)."""
    return _ID.fullmatch(value) is not None


def is_upstream_session_id(value: str) -> bool:
    """Whether ``value`` is the id an imported upstream session keeps: its token's ``iat`` in
    decimal, as upstream wrote it (CONTRACT section 15)."""
    return _UPSTREAM_SESSION_ID.fullmatch(value) is not None


def is_session_id(value: str) -> bool:
    """Whether ``value`` can name a session: an id made by :func:`new_id`, or an imported upstream
    session's (:func:`is_upstream_session_id`). The two never collide: 26 characters against at
    most 12 digits."""
    return _ID.fullmatch(value) is not None or _UPSTREAM_SESSION_ID.fullmatch(value) is not None


def session_order(session_id: str) -> str:
    """What sessions list by, oldest to newest: an id of :func:`new_id` itself, an upstream
    session's id as the smallest such id of its creation second, so that an imported session lists
    where its creation time puts it among the others, not where its digits would sort."""
    if _UPSTREAM_SESSION_ID.fullmatch(session_id) is None:
        return session_id
    return _encode(int(session_id) * 1000 << 80)


def new_secret() -> str:
    """256 bits from the OS CSPRNG, base64url without padding (43 characters)."""
    return secrets.token_urlsafe(32)
