"""The staff member: promoted with ``nimbus staff promote``, looking after victims it registers."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid

from bench.soak.accounts import Account
from bench.soak.actor import PASSWORD, Actor
from bench.soak.client import Soak
from bench.soak.recorder import expect


class StaffMember(Actor):
    """A staff member with TOTP, looking after victims it registers: read, renamed, banned, deleted."""

    def __init__(self, soak: Soak, rng: random.Random) -> None:
        super().__init__(soak, rng)
        self.account = Account(name="", password=PASSWORD, ip="")
        self.domain = ""

    def setup(self) -> None:
        """Register, enrol TOTP, be promoted with the operator tool (``nimbus staff promote``)."""
        account = self.new_account("staff")
        self.enrol_totp(account)
        command = [sys.executable, "-m", "nimbus_tools.cli.main", "--state", str(self.soak.state_file)]
        promoted = subprocess.run(
            [*command, "staff", "promote", account.name],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if promoted.returncode != 0:
            raise RuntimeError(f"nimbus staff promote failed: {promoted.stdout}{promoted.stderr}")
        me = expect(self.me(account), 200, what="GET /users/me").body
        if me.get("staff") is not True:
            raise RuntimeError(f"the promoted user is not staff: {me}")
        domains = self.soak.call("GET /domains", "GET", "/domains", ip=account.ip, token=account.token).body
        self.domain = str(domains["items"][0]["id"]) if domains.get("items") else ""
        self.account = account

    def run(self) -> None:
        """One victim, from registration to deletion."""
        soak, staff = self.soak, self.account
        victim = self.new_account("victim")
        deleted = False
        try:
            users = f"/users/{victim.user_id}"
            calls = (
                ("GET /users", "GET", f"/users?limit={self.rng.choice((5, 20, 50))}", None),
                ("GET /users/:id", "GET", users, None),
                ("GET /users/:uid/sessions", "GET", f"{users}/sessions", None),
                ("GET /users/:uid/2fa", "GET", f"{users}/2fa", None),
            )
            for kind, method, path, body in calls:
                expect(soak.call(kind, method, path, body, ip=staff.ip, token=staff.token), 200, what=kind)
            soak.call(
                "PATCH /users/:uid/sessions/:sid",
                "PATCH",
                f"{users}/sessions/{victim.session_id}",
                {"name": "Renamed by staff"},
                ip=staff.ip,
                token=staff.token,
            )
            if self.domain and self.rng.random() < 0.5:
                body = {"domain": self.domain}
                soak.call(
                    "PUT /users/:id/domain", "PUT", f"{users}/domain", body, ip=staff.ip, token=staff.token
                )
            if self.rng.random() < 0.3:
                soak.call(
                    "GET /users/:id [unknown]",
                    "GET",
                    f"/users/{uuid.uuid4().hex}",
                    ip=staff.ip,
                    token=staff.token,
                )
            if self.rng.random() < 0.6:
                ban = self.reverified(
                    staff, "PUT /users/:id/ban", "PUT", f"{users}/ban", {"reason": "Soak test"}
                )
                expect(ban, 200, what="ban")
                self.me(victim, kind="GET /users/me [banned]")
                body = {"username": victim.name, "password": victim.password}
                self.soak.call("POST /login [banned]", "POST", "/login", body, ip=victim.ip, hostile=True)
                if self.rng.random() < 0.5:
                    unban = self.reverified(staff, "DELETE /users/:id/ban", "DELETE", f"{users}/ban", {})
                    expect(unban, 200, what="unban")
            gone = self.reverified(staff, "DELETE /users/:id", "DELETE", users, {})
            expect(gone, 200, what="delete a user")
            deleted = True
            soak.call("GET /users/:id [deleted]", "GET", users, ip=staff.ip, token=staff.token, hostile=True)
            if len(staff.backup_codes) <= 1:
                fresh = self.reverified(
                    staff, "POST /users/me/2fa/backup", "POST", "/users/me/2fa/backup", {}
                )
                staff.backup_codes = list(expect(fresh, 201, what="new backup codes").body["codes"])
        finally:
            if not deleted:  # the victim's data must not stay behind (memory is judged)
                self.reverified(staff, "DELETE /users/:id", "DELETE", f"/users/{victim.user_id}", {})
            soak.retire(victim.subjects)
