"""What every simulated user and the staff member do alike: register, log in (through the
second-factor challenge), reverify, enrol TOTP."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pyotp

from bench.soak.accounts import Account
from bench.soak.client import Soak
from bench.soak.recorder import Reply, expect

PASSWORD = "correct horse battery"
CHALLENGE = "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"

USER_AGENTS = (
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Safari/605.1.15",
    "curl/8.5.0",
    "cumulonimbus-wrapper/5.0.0",
    "",
)


class Actor:
    """One thread's simulated user (or staff member): the requests it makes."""

    def __init__(self, soak: Soak, rng: random.Random) -> None:
        self.soak = soak
        self.rng = rng

    def run(self) -> None:
        """One life of this actor."""
        raise NotImplementedError

    def address_for(self, account: Account) -> str:
        """A new source address of ``account``'s (another device)."""
        address = self.soak.new_address()
        account.subjects.add(address)
        return address

    def maybe(self, probability: float) -> bool:
        """True with ``probability``, and only while the run lasts (the end skips to the cleanup)."""
        return self.soak.running() and self.rng.random() < probability

    def new_account(self, prefix: str) -> Account:
        """A registered account: its session, id and session id."""
        name = f"{prefix}_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:14]}"
        account = Account(name=name, password=PASSWORD, ip="", email=f"{name}@example.com")
        account.ip = self.address_for(account)
        body = {"username": name, "email": account.email, "password": account.password}
        if self.rng.random() < 0.3:
            body["confirmPassword"] = account.password
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        reply = self.soak.call("POST /register", "POST", "/register", body, ip=account.ip, headers=headers)
        account.token = str(expect(reply, 201, what="register").body["token"])
        me = expect(self.me(account), 200, what="GET /users/me").body
        account.user_id = str(me["id"])
        account.subjects.add(account.user_id)
        current = self.soak.call(
            "GET /users/me/sessions/:sid", "GET", "/users/me/sessions/me", ip=account.ip, token=account.token
        )
        account.session_id = str(expect(current, 200, what="GET /users/me/sessions/me").body["id"])
        return account

    def me(self, account: Account, token: str = "", kind: str = "GET /users/me") -> Reply:
        """GET /users/me (with another token of the account's: a dead one when ``kind`` says so)."""
        hostile = kind.endswith(("revoked token]", "deleted user]", "banned]"))
        return self.soak.call(
            kind, "GET", "/users/me", ip=account.ip, token=token or account.token, hostile=hostile
        )

    def reverified(
        self, account: Account, kind: str, method: str, path: str, body: dict[str, Any], *, ip: str = ""
    ) -> Reply:
        """A Reverify request: with the password, then the challenge's answer when one is asked."""
        ip = ip or account.ip
        first = self.soak.call(
            kind, method, path, {**body, "password": account.password}, ip=ip, token=account.token
        )
        if first.code != CHALLENGE:
            return first
        answer = account.answer(first, self.rng)
        return self.soak.call(
            f"{kind} 2fa", method, path, {**body, "2fa": answer}, ip=ip, token=account.token
        )

    def enrol_totp(self, account: Account) -> None:
        """TOTP enrolled (and its first backup codes kept)."""
        setup = self.reverified(account, "POST /users/me/2fa/totp", "POST", "/users/me/2fa/totp", {})
        body = expect(setup, 200, what="POST /users/me/2fa/totp").body
        totp = pyotp.TOTP(body["secret"])
        step = int(time.time() // 30)
        confirm = {"token": body["token"], "name": "Phone", "code": totp.at(step * 30)}
        confirmed = self.soak.call(
            "POST /users/me/2fa/totp/confirm",
            "POST",
            "/users/me/2fa/totp/confirm",
            confirm,
            ip=account.ip,
            token=account.token,
        )
        codes = expect(confirmed, 201, what="POST /users/me/2fa/totp/confirm").body.get("codes") or []
        account.totp, account.last_step, account.backup_codes = totp, step, list(codes)

    def login(self, account: Account, ip: str, *, wrong_answer: bool = False) -> Reply:
        """POST /login, through the challenge when the account has a second factor."""
        body: dict[str, Any] = {
            "username": self.rng.choice((account.name, account.email)),
            "password": account.password,
        }
        if self.rng.random() < 0.3:
            body["rememberMe"] = True
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        if self.rng.random() < 0.3:
            headers["X-Session-Name"] = "Soak device"
        first = self.soak.call("POST /login", "POST", "/login", body, ip=ip, headers=headers)
        if first.code != CHALLENGE:
            return first
        if wrong_answer:
            wrong = {"token": first.body["token"], "type": "totp", "code": account.wrong_code()}
            self.soak.call(
                "POST /login 2fa [wrong code]", "POST", "/login", {"2fa": wrong}, ip=ip, hostile=True
            )
        answer = {"2fa": account.answer(first, self.rng), "rememberMe": False}
        return self.soak.call("POST /login 2fa", "POST", "/login", answer, ip=ip, headers=headers)
