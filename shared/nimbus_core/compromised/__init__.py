"""Compromised passwords: the list of common and breached passwords that ships with the deployment
(``shipped``: sorted 64-bit fingerprints in one file, read on first use), and the optional Have I Been
Pwned range client (``pwned_range``: five hex characters of a SHA-1 leave, bounded by a timeout, any
failure answers "unknown"). ``is_compromised`` asks the first and then, when given, the second.

Importing this package reads no data and opens no connection: the list is read by the first check in
a container, and the range client's HTTP modules load with its first request.

May import: nothing else of nimbus_core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.compromised.shipped import is_listed

if TYPE_CHECKING:
    from nimbus_core.compromised.pwned_range import PwnedRange

__all__ = ["is_compromised", "is_listed"]


def is_compromised(password: str, *, range_client: PwnedRange | None = None) -> bool:
    """Whether ``password`` is a known compromised password: found in the shipped list, or (only when
    ``range_client`` is given and the list does not have it) reported by Have I Been Pwned.

    The password is compared exactly as given (no trimming, case folding or Unicode normalisation;
    the same string the password hash is made of). Never raises for any ``str``, and never waits
    longer than the range client's timeout: a failed or slow range request counts as "not found",
    leaving the shipped list's answer.
    """
    if is_listed(password):
        return True
    return range_client is not None and bool(range_client.count(password))
