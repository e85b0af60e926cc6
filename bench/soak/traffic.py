"""What the simulated users do, hostile input on the way (each hostile request must get a 4xx), and
the staff member: promoted with ``nimbus staff promote`` (after enrolling TOTP, as staff must have a
second factor), it reads, renames, bans, unbans and deletes victims it registers."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from bench.soak.client import CHALLENGE, PASSWORD, Person, Soak, traffic_random
from nimbus_core.domain.scopes import Scope
from tests.api_client import Reply, UnexpectedReplyError, expect, run_nimbus

BODY_LIMIT = 64 * 1024


def user_life(soak: Soak, rng: random.Random) -> None:
    """One simulated user: registers, lives, then deletes its account (always, once registered)."""
    user = Person(soak, rng).register("soak")
    try:
        live(user)
    finally:
        try:
            user.reverified("DELETE", "/users/me", {}, want=200)
            user.me(note="[deleted user]")  # the token dies with the account
            soak.exposed.append((user.user_id, user.session_id, user.token))
        finally:
            soak.retire(user.subjects)


def live(user: Person) -> None:
    """Everything but registering and deleting, each part with its probability."""
    for _ in range(user.rng.randint(1, 4)):
        user.me(want=200)
    domains = user.call("GET", "/domains", want=200).body.get("items")
    if user.maybe(0.6):
        send_hostile(user)
    second = log_in_again(user)
    if user.maybe(0.5):
        scoped(user)
    if user.maybe(0.4) and domains:
        body = {"domain": domains[0]["id"]}
        if domains[0].get("subdomains"):
            body["subdomain"] = f"My Site {user.rng.randint(1, 999)}"
        user.call("PUT", "/users/me/domain", body)
    if user.maybe(0.5):
        name = f"soak_{uuid.UUID(int=user.rng.getrandbits(128)).hex[:14]}"
        body = {"username": name.upper() if user.rng.random() < 0.3 else name}
        if (renamed := user.reverified("PUT", "/users/me/username", body)).status == 200:
            user.name = str(renamed.body["username"])
    if user.maybe(0.4):
        change_email(user)
    if user.maybe(0.4):
        change_password(user, second)
    if user.maybe(0.5):
        second_factor(user)
    if user.maybe(0.3):
        recover(user)
    if user.maybe(0.5):
        query = user.rng.choice(("include-self=false", "includeSelf=0"))
        user.call("DELETE", f"/users/me/sessions/all?{query}")


def second_factor(user: Person) -> None:
    """TOTP enrolled, the factors listed, and (mostly) another device logging in through the challenge."""
    user.enrol_totp()
    user.call("GET", "/users/me/2fa")
    if user.maybe(0.7):
        user.login(user.new_device(), wrong_answer=user.rng.random() < 0.3, want=201)


def log_in_again(user: Person) -> str:
    """Mostly another login (at times after a wrong password or name): its token, or ''."""
    if user.maybe(0.3):
        body = {"username": user.name, "password": "not the password"}
        user.call("POST", "/login", body, token=None, note="[wrong password]", hostile=True)
    if user.maybe(0.1):
        body = {"username": f"nobody_{uuid.uuid4().hex[:10]}", "password": PASSWORD}
        user.call("POST", "/login", body, token=None, note="[unknown user]", hostile=True)
    if not user.maybe(0.8):
        return ""
    second = str(user.login(user.ip, want=201).body["token"])
    sessions(user, second)
    return second


def sessions(user: Person, second: str) -> None:
    """List, read, rename and revoke sessions (the second one is revoked half the time)."""
    listed = user.call("GET", f"/users/me/sessions?limit={user.rng.choice((10, 50, 'abc'))}", want=200)
    other = next((s["id"] for s in listed.body["items"] if s["id"] != user.session_id), None)
    if other is None:
        return
    user.call("GET", f"/users/me/sessions/{other}")
    user.call("PATCH", f"/users/me/sessions/{other}", {"name": f"Renamed {user.rng.randint(1, 99)}"})
    if user.rng.random() < 0.5:
        user.soak.exposed.append((user.user_id, other, ""))
        return
    if user.rng.random() < 0.5:
        user.call("DELETE", f"/users/me/sessions/{other}", want=200)
    else:
        user.call("DELETE", "/users/me/sessions", {"ids": [other, "01JUNKJUNKJUNKJUNKJUNKJUNK"]}, want=200)
    user.me(second, "[revoked token]")
    user.soak.exposed.append((user.user_id, other, second))


def scoped(user: Person) -> None:
    """A scoped session: created, used within and beyond its scopes, revoked."""
    flags, long_lived = Scope.ACCOUNT_READ | Scope.SESSION_READ, user.rng.random() < 0.5
    body = {"name": "Soak API key", "permissionFlags": flags, **({"longLived": True} if long_lived else {})}
    made = user.reverified("POST", "/users/me/sessions", body, want=201).body
    key = str(made["token"])
    user.me(key, "[scoped]")
    user.call("GET", "/users/me/sessions", token=key, note="[scoped]")
    forbidden = (
        ("PUT", "/users/me/username", {"username": "x", "password": PASSWORD}),
        ("DELETE", "/users/me", {"password": PASSWORD}),
        ("POST", "/users/me/sessions", {"name": "x", "permissionFlags": int(Scope.ACCOUNT_READ)}),
        ("POST", "/users/me/2fa/totp", {"password": PASSWORD}),
    )
    method, path, payload = user.rng.choice(forbidden)
    user.call(method, path, payload, token=key, note="[scoped]", hostile=True)
    if user.rng.random() < 0.3:
        sneaky = {"name": "Sneaky", "password": user.password, "permissionFlags": Scope.STAFF_READ_ACCOUNTS}
        user.call("POST", "/users/me/sessions", sneaky, note="[staff scope]", hostile=True)
    user.call("DELETE", f"/users/me/sessions/{made['id']}", want=200)
    user.me(key, "[revoked token]")


def change_email(user: Person) -> None:
    """PUT /users/me/email, then the verification email resent and its link followed (twice)."""
    address = f"{uuid.UUID(int=user.rng.getrandbits(128)).hex[:12]}@example.org"
    if user.reverified("PUT", "/users/me/email", {"email": address}).status != 200:
        return
    user.email = address
    if user.rng.random() < 0.5:
        user.call("GET", "/users/me/verify")
    if (token := user.soak.mailed_token(user.user_id, "verify-email", address)) is not None:
        user.call("PUT", "/users/verify", {"token": token}, token=None)
        user.call("PUT", "/users/verify", {"token": token}, token=None, note="[used token]", hostile=True)


def change_password(user: Person, second: str) -> None:
    """PUT /users/me/password (sometimes mistyped first): other sessions die."""
    new = f"{PASSWORD} {user.rng.randint(1000, 9999)}"
    if user.rng.random() < 0.3:
        mismatch = {"newPassword": new, "confirmNewPassword": new + "!", "password": user.password}
        user.call("PUT", "/users/me/password", mismatch, note="[mismatch]", hostile=True)
    body = {"newPassword": new, "confirmNewPassword": new}
    if user.reverified("PUT", "/users/me/password", body).status == 200:
        user.password = new
        if second:
            user.me(second, "[revoked token]")


def recover(user: Person) -> None:
    """Forgot the password: mailed link, new password (challenged), a login from another device."""
    device = user.new_device()
    user.call("POST", "/users/recover", {"username": user.name}, ip=device, token=None, want=201)
    # The mail is queued after the answer, by the recovery function (a life asks once).
    if (token := user.soak.mailed_token(user.user_id, "recover-password", user.email, wait=10.0)) is None:
        raise UnexpectedReplyError("no recovery email in the outbox")
    new = f"{PASSWORD} recovered {user.rng.randint(1000, 9999)}"
    body: dict[str, Any] = {"token": token, "newPassword": new, "confirmNewPassword": new}
    reset = user.call("PUT", "/users/recover", body, ip=device, token=None)
    if reset.code == CHALLENGE:
        body["2fa"] = user.answer(reset)
        reset = user.call("PUT", "/users/recover", body, ip=device, token=None, note="2fa")
    expect(reset, 200, what="password reset")
    user.password = new
    user.me(note="[revoked token]")
    user.token, user.ip = str(user.login(device, want=201).body["token"]), device
    user.current_session()


def send_hostile(user: Person) -> None:
    """A few requests an attacker (or a broken client) sends, each of which must get a 4xx."""
    token = user.token

    def probe(tag: str, method: str, path: str, body: Any = None, **extra: Any) -> Callable[[], Reply]:
        return lambda: user.call(
            method, path, body, note=f"[{tag}]", hostile=True, **{"token": None, **extra}
        )

    nested = b'{"username": ' + b"[" * 5000 + b"]" * 5000 + b', "password": "x"}'
    huge = json.dumps({"username": "x", "email": "x@example.com", "password": "x" * BODY_LIMIT}).encode()
    probes = [
        probe("bad JSON", "POST", "/login", raw=b'{"username": "a", '),
        probe("nested 5000 deep", "POST", "/login", raw=nested),
        probe("not UTF-8", "POST", "/login", raw=b'{"username": "\xff\xfe"}'),
        probe("NaN", "POST", "/login", raw=b'{"username": NaN, "password": 1}'),
        probe("duplicate keys", "POST", "/login", raw=b'{"username": "a", "username": "b"}'),
        probe("over 64 KiB", "POST", "/register", raw=huge),
        probe("wrong types", "PUT", "/users/me/username", {"username": 5, "password": ["x"]}, token=token),
        probe("not an object", "PATCH", "/users/me/sessions/me", raw=b"[1, 2, 3]", token=token),
        probe("51 ids", "DELETE", "/users/me/sessions", {"ids": ["x"] * 51}, token=token),
        probe("forged token", "GET", "/users/me", token=f"{user.user_id}.{user.session_id}.{'A' * 43}"),
        probe("garbage token", "GET", "/users/me", token="Bearer ../../etc/passwd"),
        probe("unknown route", "GET", f"/nowhere/{uuid.uuid4().hex}"),
        probe("wrong method", "PATCH", "/register", {}),
        probe("not staff", "GET", "/users?limit=5", token=token),
    ]
    if exposed := list(user.soak.exposed):
        their_user, their_session, _ = user.rng.choice(exposed)
        theirs = f"/users/me/sessions/{their_session}"
        mixed = f"{their_user}.{their_session}.{token.rsplit('.')[-1]}"
        probes += [
            probe("another's", "GET", theirs, token=token),
            probe("another's", "PATCH", theirs, {"name": "mine"}, token=token),
            probe("another's", "DELETE", theirs, token=token),
            probe("not staff", "GET", f"/users/{their_user}", token=token),
            probe("another's ids, own secret", "GET", "/users/me", token=mixed),
        ]
        if dead := [token for _, _, token in exposed if token]:
            probes.append(probe("dead token", "GET", "/users/me", token=user.rng.choice(dead)))
    for send in user.rng.sample(probes, k=min(len(probes), user.rng.randint(2, 5))):
        send()


def staff_member(soak: Soak, seed: int) -> tuple[Person, list[dict[str, str]] | None]:
    """The staff member, registered, enrolled and promoted; and the domains it may give."""
    staff = Person(soak, traffic_random(seed)).register("staff")
    staff.enrol_totp()
    promoted = run_nimbus(soak.state_file, "staff", "promote", staff.name, timeout=120)
    if promoted.returncode != 0:
        raise RuntimeError(f"nimbus staff promote failed: {promoted.stdout}{promoted.stderr}")
    if (me := staff.me(want=200).body).get("staff") is not True:
        raise RuntimeError(f"the promoted user is not staff: {me}")
    return staff, staff.call("GET", "/domains").body.get("items")


def look_after(staff: Person, domains: list[dict[str, str]] | None) -> None:
    """One victim, from registration to deletion (always attempted: memory is judged)."""
    victim = Person(staff.soak, staff.rng).register("victim")
    users, deleted = f"/users/{victim.user_id}", False
    try:
        listing = f"/users?limit={staff.rng.choice((5, 20, 50))}"
        for path in (listing, users, f"{users}/sessions", f"{users}/2fa"):
            staff.call("GET", path, want=200)
        staff.call("PATCH", f"{users}/sessions/{victim.session_id}", {"name": "Renamed by staff"})
        if domains and staff.rng.random() < 0.5:
            staff.call("PUT", f"{users}/domain", {"domain": domains[0]["id"]})
        if staff.rng.random() < 0.3:
            staff.call("GET", f"/users/{uuid.uuid4().hex}", note="[unknown]")
        if staff.rng.random() < 0.6:
            staff.reverified("PUT", f"{users}/ban", {"reason": "Soak test"}, want=200)
            victim.me(note="[banned]")
            body = {"username": victim.name, "password": victim.password}
            victim.call("POST", "/login", body, token=None, note="[banned]", hostile=True)
            if staff.rng.random() < 0.5:
                staff.reverified("DELETE", f"{users}/ban", {}, want=200)
        staff.reverified("DELETE", users, {}, want=200)
        deleted = True
        staff.call("GET", users, note="[deleted]", hostile=True)
        if len(staff.backup_codes) <= 1:
            fresh = staff.reverified("POST", "/users/me/2fa/backup", {}, want=201)
            staff.backup_codes = list(fresh.body["codes"])
    finally:
        if not deleted:
            staff.reverified("DELETE", users, {})
        staff.soak.retire(victim.subjects)
