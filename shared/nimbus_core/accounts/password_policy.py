"""New passwords the world already knows are refused (CONTRACT section 17, NIST SP 800-63B 5.1.1.2):
register, the own and the staff password change, and the recovery reset check the password against
the compromised-password list that ships with the deployment and, where the deployment turns it on
(``PwnedPasswordsRange``), Have I Been Pwned's range API. A login is never refused by a list: it is
told (``passwordCompromised``), from the shipped list alone, so no sign-in waits on the network."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from nimbus_core.compromised import is_compromised, is_listed
from nimbus_core.domain.errors import ErrorCode, NimbusError

if TYPE_CHECKING:
    from nimbus_core.compromised.pwned_range import PwnedRange
    from nimbus_core.platform.settings import Settings


def refuse_compromised(settings: Settings, password: str, *, field: str) -> None:
    """400 INSECURE_PASSWORD_ERROR naming ``field`` when ``password`` is a known compromised one."""
    client = range_client() if settings.pwned_passwords_range else None
    if is_compromised(password, range_client=client):
        raise NimbusError(ErrorCode.INSECURE_PASSWORD_ERROR, fields=[field])


def signs_in_compromised(password: str) -> bool:
    """Whether a login's (right) password is in the shipped list."""
    return is_listed(password)


@cache
def range_client() -> PwnedRange:
    """One client per container: its connection is kept between requests."""
    from nimbus_core.compromised.pwned_range import PwnedRange

    return PwnedRange()
