"""A simulated user's life, from registration to the deletion of its account."""

from __future__ import annotations

import re
import uuid
from typing import Any

from bench.soak.accounts import Account, Exposed
from bench.soak.actor import CHALLENGE, PASSWORD, Actor
from bench.soak.hostile import send_hostile
from bench.soak.recorder import LifeAbortedError, expect
from nimbus_core.domain.scopes import Scope

VERIFY_LINK = re.compile(r"verify\?token=([A-Za-z0-9_.-]+)")
RECOVER_LINK = re.compile(r"recover\?token=([A-Za-z0-9_.-]+)")


class UserLife(Actor):
    """One simulated user, from registration to the deletion of its account."""

    def run(self) -> None:
        """Live, then delete the account (always attempted once registered)."""
        account = self.new_account("soak")
        try:
            self.live(account)
        finally:
            try:
                self.delete(account)
            finally:
                self.soak.retire(account.subjects)

    def live(self, account: Account) -> None:
        """Everything but registering and deleting, each part with its probability."""
        soak = self.soak
        for _ in range(self.rng.randint(1, 4)):
            expect(self.me(account), 200, what="GET /users/me")
        domains = expect(
            soak.call("GET /domains", "GET", "/domains", ip=account.ip, token=account.token),
            200,
            what="domains",
        ).body
        if self.maybe(0.6):
            send_hostile(self, account)
        second = self.log_in_again(account)
        if self.maybe(0.5):
            self.scoped(account)
        if self.maybe(0.4) and domains.get("items"):
            self.choose_domain(account, domains["items"][0])
        if self.maybe(0.5):
            self.change_username(account)
        if self.maybe(0.4):
            self.change_email(account)
        if self.maybe(0.4):
            self.change_password(account, second)
        if self.maybe(0.5):
            self.enrol_totp(account)
            soak.call("GET /users/me/2fa", "GET", "/users/me/2fa", ip=account.ip, token=account.token)
            if self.maybe(0.7):  # another device logs in through the challenge
                device = self.address_for(account)
                login = self.login(account, device, wrong_answer=self.rng.random() < 0.3)
                expect(login, 201, what="challenged login")
        if self.maybe(0.3):
            self.recover(account)
        if self.maybe(0.5):
            query = "?include-self=false" if self.rng.random() < 0.5 else "?includeSelf=0"
            soak.call(
                "DELETE /users/me/sessions/all",
                "DELETE",
                f"/users/me/sessions/all{query}",
                ip=account.ip,
                token=account.token,
            )

    def log_in_again(self, account: Account) -> str:
        """Another login (sometimes after a wrong password or name), then its sessions looked after;
        the second session's token, or '' when there was no login."""
        soak = self.soak
        if self.maybe(0.3):
            body = {"username": account.name, "password": "not the password"}
            soak.call("POST /login [wrong password]", "POST", "/login", body, ip=account.ip, hostile=True)
        if self.maybe(0.1):
            body = {"username": f"nobody_{uuid.uuid4().hex[:10]}", "password": PASSWORD}
            soak.call("POST /login [unknown user]", "POST", "/login", body, ip=account.ip, hostile=True)
        if not self.maybe(0.8):
            return ""
        second = str(expect(self.login(account, account.ip), 201, what="login").body["token"])
        self.sessions(account, second)
        return second

    def choose_domain(self, account: Account, domain: dict[str, Any]) -> None:
        """PUT /users/me/domain (with a subdomain where the domain allows one)."""
        body = {"domain": domain["id"]}
        if domain.get("subdomains"):
            body["subdomain"] = f"My Site {self.rng.randint(1, 999)}"
        self.soak.call(
            "PUT /users/me/domain", "PUT", "/users/me/domain", body, ip=account.ip, token=account.token
        )

    def sessions(self, account: Account, second: str) -> None:
        """List, read, rename and revoke sessions (the second one is revoked half the time)."""
        soak = self.soak
        listed = soak.call(
            "GET /users/me/sessions",
            "GET",
            f"/users/me/sessions?limit={self.rng.choice((10, 50, 'abc'))}",
            ip=account.ip,
            token=account.token,
        )
        items = expect(listed, 200, what="list sessions").body["items"]
        other = next((s["id"] for s in items if s["id"] != account.session_id), None)
        if other is None:
            return
        soak.call(
            "GET /users/me/sessions/:sid",
            "GET",
            f"/users/me/sessions/{other}",
            ip=account.ip,
            token=account.token,
        )
        soak.call(
            "PATCH /users/me/sessions/:sid",
            "PATCH",
            f"/users/me/sessions/{other}",
            {"name": f"Renamed {self.rng.randint(1, 99)}"},
            ip=account.ip,
            token=account.token,
        )
        if self.rng.random() < 0.5:
            if self.rng.random() < 0.5:
                revoke = soak.call(
                    "DELETE /users/me/sessions/:sid",
                    "DELETE",
                    f"/users/me/sessions/{other}",
                    ip=account.ip,
                    token=account.token,
                )
            else:
                revoke = soak.call(
                    "DELETE /users/me/sessions",
                    "DELETE",
                    "/users/me/sessions",
                    {"ids": [other, "01JUNKJUNKJUNKJUNKJUNKJUNK"]},
                    ip=account.ip,
                    token=account.token,
                )
            expect(revoke, 200, what="revoke a session")
            self.me(account, second, "GET /users/me [revoked token]")
            soak.exposed.append(Exposed(account.user_id, other, second))
        else:
            soak.exposed.append(Exposed(account.user_id, other))

    def scoped(self, account: Account) -> None:
        """A scoped session: created, used within and beyond its scopes, revoked."""
        soak = self.soak
        body = {"name": "Soak API key", "permissionFlags": int(Scope.ACCOUNT_READ | Scope.SESSION_READ)}
        if self.rng.random() < 0.5:
            body["longLived"] = True
        created = self.reverified(account, "POST /users/me/sessions", "POST", "/users/me/sessions", body)
        scoped = expect(created, 201, what="scoped session").body
        key = str(scoped["token"])
        self.me(account, key, "GET /users/me [scoped]")
        soak.call("GET /users/me/sessions [scoped]", "GET", "/users/me/sessions", ip=account.ip, token=key)
        forbidden = (
            (
                "PUT /users/me/username [scoped]",
                "PUT",
                "/users/me/username",
                {"username": "x", "password": PASSWORD},
            ),
            ("DELETE /users/me [scoped]", "DELETE", "/users/me", {"password": PASSWORD}),
            (
                "POST /users/me/sessions [scoped]",
                "POST",
                "/users/me/sessions",
                {"name": "x", "permissionFlags": int(Scope.ACCOUNT_READ)},
            ),
            ("POST /users/me/2fa/totp [scoped]", "POST", "/users/me/2fa/totp", {"password": PASSWORD}),
        )
        kind, method, path, payload = self.rng.choice(forbidden)
        soak.call(kind, method, path, payload, ip=account.ip, token=key, hostile=True)
        if self.rng.random() < 0.3:
            staff_bits = {
                "name": "Sneaky",
                "permissionFlags": int(Scope.STAFF_READ_ACCOUNTS),
                "password": account.password,
            }
            soak.call(
                "POST /users/me/sessions [staff scope]",
                "POST",
                "/users/me/sessions",
                staff_bits,
                ip=account.ip,
                token=account.token,
                hostile=True,
            )
        revoked = soak.call(
            "DELETE /users/me/sessions/:sid",
            "DELETE",
            f"/users/me/sessions/{scoped['id']}",
            ip=account.ip,
            token=account.token,
        )
        expect(revoked, 200, what="revoke the scoped session")
        soak.call("GET /users/me [revoked token]", "GET", "/users/me", ip=account.ip, token=key, hostile=True)

    def change_username(self, account: Account) -> None:
        """PUT /users/me/username."""
        name = f"soak_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:14]}"
        body = {"username": name.upper() if self.rng.random() < 0.3 else name}
        reply = self.reverified(account, "PUT /users/me/username", "PUT", "/users/me/username", body)
        if reply.status == 200:
            account.name = str(reply.body["username"])

    def change_email(self, account: Account) -> None:
        """PUT /users/me/email, then the verification email resent and its link followed."""
        soak = self.soak
        address = f"{uuid.UUID(int=self.rng.getrandbits(128)).hex[:12]}@example.org"
        reply = self.reverified(account, "PUT /users/me/email", "PUT", "/users/me/email", {"email": address})
        if reply.status != 200:
            return
        account.email = address
        if self.rng.random() < 0.5:
            soak.call("GET /users/me/verify", "GET", "/users/me/verify", ip=account.ip, token=account.token)
        token = soak.outbox_token(account.user_id, "verify-email", address, VERIFY_LINK)
        if token is not None:
            soak.call("PUT /users/verify", "PUT", "/users/verify", {"token": token}, ip=account.ip)
            soak.call(
                "PUT /users/verify [used token]",
                "PUT",
                "/users/verify",
                {"token": token},
                ip=account.ip,
                hostile=True,
            )

    def change_password(self, account: Account, second: str) -> None:
        """PUT /users/me/password (sometimes mistyped first): other sessions die."""
        new = f"{PASSWORD} {self.rng.randint(1000, 9999)}"
        if self.rng.random() < 0.3:
            mismatch = {"newPassword": new, "confirmNewPassword": new + "!", "password": account.password}
            self.soak.call(
                "PUT /users/me/password [mismatch]",
                "PUT",
                "/users/me/password",
                mismatch,
                ip=account.ip,
                token=account.token,
                hostile=True,
            )
        body = {"newPassword": new, "confirmNewPassword": new}
        reply = self.reverified(account, "PUT /users/me/password", "PUT", "/users/me/password", body)
        if reply.status == 200:
            account.password = new
            if second:
                self.me(account, second, "GET /users/me [revoked token]")

    def recover(self, account: Account) -> None:
        """Forgot the password: the mailed link, a new password (through the challenge with a second
        factor), every session revoked, and a login with the new password."""
        soak = self.soak
        device = self.address_for(account)
        before = soak.outbox_token(account.user_id, "recover-password", account.email, RECOVER_LINK)
        asked = soak.call(
            "POST /users/recover", "POST", "/users/recover", {"username": account.name}, ip=device
        )
        expect(asked, 201, what="recovery request")
        # The mail is queued after the answer, by the recovery function.
        token = soak.await_outbox_token(
            account.user_id, "recover-password", account.email, RECOVER_LINK, other_than=before
        )
        if token is None:
            raise LifeAbortedError("no recovery email in the outbox")
        new = f"{PASSWORD} recovered {self.rng.randint(1000, 9999)}"
        body: dict[str, Any] = {"token": token, "newPassword": new, "confirmNewPassword": new}
        reset = soak.call("PUT /users/recover", "PUT", "/users/recover", body, ip=device)
        if reset.code == CHALLENGE:
            body["2fa"] = account.answer(reset, self.rng)
            reset = soak.call("PUT /users/recover 2fa", "PUT", "/users/recover", body, ip=device)
        expect(reset, 200, what="password reset")
        account.password = new
        self.me(account, kind="GET /users/me [revoked token]")
        login = expect(self.login(account, device), 201, what="login after recovery")
        account.token, account.ip = str(login.body["token"]), device
        current = soak.call(
            "GET /users/me/sessions/:sid", "GET", "/users/me/sessions/me", ip=account.ip, token=account.token
        )
        account.session_id = str(expect(current, 200, what="current session").body["id"])

    def delete(self, account: Account) -> None:
        """DELETE /users/me; the token dies with the account."""
        reply = self.reverified(account, "DELETE /users/me", "DELETE", "/users/me", {})
        expect(reply, 200, what="delete the account")
        self.me(account, kind="GET /users/me [deleted user]")
        self.soak.exposed.append(Exposed(account.user_id, account.session_id, account.token))
