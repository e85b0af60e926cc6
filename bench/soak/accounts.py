"""What a simulated user knows: of its own account, and of others' (for the hostile requests)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import pyotp

from bench.soak.recorder import LifeAbortedError, Reply


@dataclass(frozen=True)
class Exposed:
    """What a hostile user could have learnt of another: ids, and a token that must be dead by now."""

    user_id: str
    session_id: str
    dead_token: str = ""


@dataclass
class Account:
    """A simulated user: what it knows about its own account."""

    name: str
    password: str
    ip: str
    email: str = ""
    token: str = ""
    user_id: str = ""
    session_id: str = ""
    totp: pyotp.TOTP | None = None
    backup_codes: list[str] = field(default_factory=list)
    last_step: int = -1  # the TOTP time step last answered (each is accepted once)
    # What the service keys rate-limit counters by for this user: its addresses and its id. Retired
    # with the account (see Soak.retire).
    subjects: set[str] = field(default_factory=set)

    def answer(self, challenge: Reply, rng: random.Random) -> dict[str, str]:
        """A right answer to ``challenge``: TOTP when its step is unused, else a backup code, else
        TOTP after waiting for the next step."""
        token = str(challenge.body["token"])
        types = set(challenge.body.get("types") or [])
        step = int(time.time() // 30)
        use_totp = self.totp is not None and "totp" in types and step != self.last_step
        if use_totp and (not self.backup_codes or rng.random() < 0.5):
            return self._totp(token, step)
        if self.backup_codes and "backup" in types:
            return {"token": token, "type": "backup", "code": self.backup_codes.pop()}
        if self.totp is None:
            raise LifeAbortedError("challenged without a factor to answer with")
        time.sleep(max(0.0, (step + 1) * 30 - time.time()) + 0.05)
        return self._totp(token, int(time.time() // 30))

    def wrong_code(self) -> str:
        """A six-digit code no time step near now has (so a wrong answer is surely wrong)."""
        assert self.totp is not None
        now = time.time()
        valid = {self.totp.at(now + drift) for drift in (-60, -30, 0, 30, 60)}
        return next(code for code in (f"{n:06d}" for n in range(10)) if code not in valid)

    def _totp(self, token: str, step: int) -> dict[str, str]:
        assert self.totp is not None
        self.last_step = step
        return {"token": token, "type": "totp", "code": self.totp.at(step * 30)}
