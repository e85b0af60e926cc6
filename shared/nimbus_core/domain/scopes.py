"""Session scopes (permission flags) of the seed specification."""

from __future__ import annotations

from enum import IntFlag


class Scope(IntFlag):
    """Bits of a scoped session's ``permissionFlags``."""

    ALL = 1
    UPLOAD_FILE = 2
    ACCOUNT_READ = 4
    ACCOUNT_MODIFY = 8
    SECOND_FACTOR_READ = 16
    SESSION_READ = 32
    SESSION_MODIFY = 64
    FILE_READ = 128
    FILE_MODIFY = 256
    STAFF_READ_ACCOUNTS = 512
    STAFF_MODIFY_ACCOUNTS = 1024
    STAFF_READ_SECOND_FACTORS = 2048
    STAFF_MODIFY_SECOND_FACTORS = 4096
    STAFF_READ_SESSIONS = 8192
    STAFF_MODIFY_SESSIONS = 16384
    STAFF_READ_FILES = 32768
    STAFF_MODIFY_FILES = 65536
    STAFF_MODIFY_DOMAINS = 131072
    STAFF_MODIFY_INSTRUCTIONS = 262144
    STAFF_MODIFY_KILLSWITCHES = 524288
    STAFF_MODIFY_LOGLEVEL = 1048576


ALL_BITS = 2097151  # every bit above set; the largest valid permissionFlags value
STAFF_BITS = Scope(sum(s.value for s in Scope if s.name and s.name.startswith("STAFF_")))


def grants(flags: int | None, needed: Scope) -> bool:
    """Whether a session with ``flags`` may use an endpoint needing ``needed``.

    ``None`` is a normal session, which holds every scope; ALL stands for every scope too.
    """
    if flags is None:
        return True
    return bool(flags & Scope.ALL) or (flags & needed) == needed
