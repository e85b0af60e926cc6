"""IAM, proven: every AWS call a function makes is allowed by that function's statements in
template.yaml, and every statement is needed.

The scenarios below drive every registered endpoint through the in-process API (the local API's
router and events), down its success path and the failure paths that touch AWS differently (a
conflict, a wrong password, a rate-limit give-back and window restart, a staff caller past a kill
switch, a session whose ``usedAt`` is refreshed); a staff deletion is followed by the sweep it sets
off on the users stream. Each SDK call is attributed to the function being invoked and turned into
the IAM requests AWS would evaluate (tests/iam.py), then judged against the template. Each request
starts a cold container, so every function's own SSM read is seen.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.model import OperationModel

import nimbus_core.platform.clock
from nimbus_core.adapters import clients, container
from nimbus_core.adapters.items import from_item
from nimbus_core.domain.activity import FAILURES_PER_HOUR
from nimbus_core.domain.ratelimits import ACCOUNT_AUTH_FAILURES
from nimbus_core.platform import metrics
from nimbus_core.platform.settings import get_settings
from nimbus_core.sessions import passwords
from nimbus_tools.local.faults import FaultRegistry, botocore_hook
from nimbus_tools.local.inprocess import Reply
from nimbus_tools.local.streams import latest_stream_arn
from nimbus_tools.moto_internals import trim_stream
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import REPO_ROOT, function_specs, load_template
from tests import totp_reference
from tests.iam import IamRequest, allows, function_statements, glob_matches, requests_of, table_arn
from tests.integration.conftest import NOW, ORIGIN, PARAMS, Api, Clock, Stack
from tests.integration.stream_feed import Invocation, StreamFeed
from tests.passkey_authenticator import SoftwareAuthenticator
from tests.staff import promote

pytestmark = pytest.mark.long  # every scenario in one test

PASSWORD = "correct horse"
DOMAIN = PARAMS["DefaultDomain"]
# Above every stream sequence number (DynamoDB's have at most 40 digits): trims to the end.
EVERY_RECORD = 10**40
ARGON2_MEMORY_MB = 1024  # argon2id at 19 MiB, t=2 is CPU bound: Lambda CPU comes with memory

_INVOKED: ContextVar[str | None] = ContextVar("invoked_function", default=None)


# ---------------------------------------------------------------------------------------------- recording


@dataclass
class Recording:
    """What each function did: IAM requests (with the calls that made them) and argon2 work."""

    requests: dict[str, dict[IamRequest, set[str]]] = field(default_factory=lambda: defaultdict(dict))
    argon2: set[str] = field(default_factory=set)
    unattributed: list[str] = field(default_factory=list)
    endpoint: str = ""  # the scenario step being run, for messages
    faults: FaultRegistry = field(default_factory=FaultRegistry)  # AWS calls that fail, as in the emulator

    def on_call(self, params: dict[str, Any], model: OperationModel, event_name: str, **_: Any) -> None:
        """botocore ``before-parameter-build``: record the call's IAM requests for the invoked function."""
        service = event_name.split(".")[1]
        function = _INVOKED.get()
        if function is None:
            self.unattributed.append(f"{service}:{model.name}")
            return
        for request in requests_of(service, model.name, params):
            self.requests[function].setdefault(request, set()).add(f"{self.endpoint} ({model.name})")

    def session_factory(self) -> Callable[[], botocore.session.Session]:
        """A stand-in for ``clients.session``: every client the container builds reports here."""

        @functools.cache
        def session() -> botocore.session.Session:
            built = botocore.session.get_session()
            events = built.get_component("event_emitter")
            events.register("before-parameter-build", self.on_call)
            events.register("before-call", botocore_hook(self.faults))
            return built

        return session

    def attribute(self, client: Any, function: str) -> Any:
        """Record ``client``'s calls as ``function``'s: the event source mapping of a stream-fed
        function reads the stream and sends to its OnFailure destination with that function's role."""

        def on_call(params: dict[str, Any], model: OperationModel, event_name: str, **_: Any) -> None:
            token = _INVOKED.set(function)
            try:
                self.on_call(params=params, model=model, event_name=event_name)
            finally:
                _INVOKED.reset(token)

        client.meta.events.register("before-parameter-build", on_call)
        return client

    def argon2_work(self, real: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a password function so the invoked function is recorded as doing argon2 work."""

        @functools.wraps(real)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            function = _INVOKED.get()
            if function is not None:
                self.argon2.add(function)
            return real(*args, **kwargs)

        return wrapped


class RecordingApi(Api):
    """The in-process API, with each handler call attributed to its function, in a cold container."""

    def __init__(self, recording: Recording) -> None:
        super().__init__(load_template(), PARAMS)
        self.recording = recording

    def handler(self, logical_id: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        inner = super().handler(logical_id)

        def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
            # A cold container's own SSM read (its runtime configuration built anew). Its clients are
            # kept: building one makes no AWS call, and every client reports to the recording.
            container.production_deps.cache_clear()
            token = _INVOKED.set(logical_id)
            try:
                return inner(event, context)
            finally:
                _INVOKED.reset(token)

        return invoke

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        self.recording.endpoint = f"{method} {path}"
        return super().call(method, path, body, **kwargs)


# ---------------------------------------------------------------------------------------------- scenarios


@dataclass
class World:
    """What the scenarios share."""

    api: RecordingApi
    stack: Stack
    clock: Clock
    _ips: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    recovery: StreamFeed | None = None

    def handle_recovery_requests(self) -> list[Invocation]:
        """Run RecoveryFunction on the recovery requests queued so far, through its event source
        mapping (whose stream reads and dead letters use the function's role)."""
        if self.recovery is None:
            self.recovery = _event_source(self, "RecoveryFunction")
        self.api.recording.endpoint = "RecoveryFunction (outbox stream)"
        return self.recovery.drain(self.api.handler("RecoveryFunction"))

    def ip(self) -> str:
        """A source address no limit has seen yet."""
        return f"192.0.2.{next(self._ips)}"

    def user(self, name: str) -> str:
        """Register ``name`` and return its session token."""
        return expect(self.api.register(name, ip=self.ip()), 201)["token"]  # type: ignore[no-any-return]

    def age_sessions(self) -> None:
        """Move time past the usedAt refresh interval, so the next authentication writes usedAt."""
        self.clock.now += 301

    def make_staff(self, token: str) -> str:
        """Staff with a second factor (staff endpoints require one); the factor's TOTP seed."""
        secret = promote(
            self.stack.dynamodb,
            self.stack.table("UsersTable"),
            token.partition(".")[0],
            sealer=self.stack.sealer,
        )
        assert secret is not None
        return secret

    def totp(self, secret: str) -> str:
        """The TOTP code of ``secret`` now (pyotp imported here: only these scenarios need it)."""
        import pyotp

        return pyotp.TOTP(secret).at(self.clock.now)

    def enrolled(self, name: str) -> tuple[str, str]:
        """Register ``name`` and enrol a TOTP factor through the API; (token, seed)."""
        token = self.user(name)
        setup = expect(self.api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token), 200)
        confirm = {"token": setup["token"], "name": "Phone", "code": self.totp(setup["secret"])}
        expect(self.api.call("POST", "/users/me/2fa/totp/confirm", confirm, token=token), 201)
        return token, setup["secret"]

    def enrolled_key(self, name: str) -> tuple[str, SoftwareAuthenticator]:
        """Register ``name`` and enrol a security key through the API; (token, authenticator)."""
        token = self.user(name)
        key = SoftwareAuthenticator()
        setup = expect(
            self.api.call("POST", "/users/me/2fa/webauthn", {"password": PASSWORD}, token=token), 200
        )
        confirm = {"token": setup["token"], "name": "Key", "response": key.create(setup, origin=ORIGIN)}
        expect(self.api.call("POST", "/users/me/2fa/webauthn/confirm", confirm, token=token), 201)
        return token, key

    def key_challenged(
        self, method: str, path: str, body: dict[str, Any], token: str | None, key: SoftwareAuthenticator
    ) -> Any:
        """Send ``body`` with the password, answer the challenge with the security key."""
        ip = self.ip()
        first = expect(self.api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=ip), 401)
        answer = {
            "token": first["token"],
            "type": "webauthn",
            "response": key.get(first["challenge"], origin=ORIGIN),
        }
        return self.api.call(method, path, {**body, "2fa": answer}, token=token, ip=ip)

    def challenged(
        self, method: str, path: str, body: dict[str, Any], token: str | None, secret: str, *, status: int
    ) -> Any:
        """Send ``body`` with the password, answer the challenge with the next TOTP code."""
        ip = self.ip()
        first = expect(self.api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=ip), 401)
        self.clock.now += 30  # a new time step: each code is accepted once
        answer = {"token": first["token"], "type": "totp", "code": self.totp(secret)}
        return expect(self.api.call(method, path, {**body, "2fa": answer}, token=token, ip=ip), status)

    def verification_token(self, to: str, kind: str = "verify-email") -> str:
        """The link token of the newest email of ``kind`` queued for ``to`` (read from the outbox table)."""
        queued = [from_item(i) for i in self.stack.messages()]
        (latest, *_) = sorted(
            (m for m in queued if m["to"] == to and m["kind"] == kind),
            key=lambda m: m["createdAt"],
            reverse=True,
        )
        found = re.search(r"token=([^\s\"&<]+)", latest["text"])
        assert found, latest["text"]
        return found.group(1)


def expect(reply: Reply, status: int) -> Any:
    assert reply.status == status, (reply.function, reply.status, reply.body)
    return reply.body


def register(w: World) -> None:
    ip = w.ip()
    token = expect(w.api.register("reggie", ip=ip), 201)["token"]
    expect(w.api.register("reggie", email="other@example.com", ip=w.ip()), 409)  # claim taken, hit given back
    expect(w.api.register("reggie2", ip=ip), 429)
    w.clock.now += 6 * 3600 + 1  # the window is over: the counter restarts
    expect(w.api.register("reggie2", ip=ip), 201)
    again = {"username": "reggie3", "email": "reggie3@example.com", "password": PASSWORD}
    expect(w.api.call("POST", "/register", again, token=token, ip=w.ip()), 401)  # already logged in


def login(w: World) -> None:
    token = w.user("lois")
    expect(w.api.login("lois", ip=w.ip()), 201)  # UsernameLookup
    expect(w.api.login("lois@example.com", ip=w.ip()), 201)  # EmailLookup
    expect(w.api.login("nobody", ip=w.ip()), 404)  # index miss, claim fallback, hit given back
    expect(w.api.login("lois", password="wrong password", ip=w.ip()), 401)  # counted on the account
    w.age_sessions()
    expect(w.api.call("POST", "/login", {"username": "lois", "password": PASSWORD}, token=token), 401)


def root(w: World) -> None:
    expect(w.api.call("GET", "/"), 200)
    token = w.user("rooty")
    w.make_staff(token)
    w.stack.set_switches("GLOBAL")
    try:
        w.age_sessions()
        expect(w.api.call("GET", "/", token=token), 200)  # staff pass GLOBAL: authenticated, touched
    finally:
        w.stack.set_switches()


def openapi_document(w: World) -> None:
    served = expect(w.api.call("GET", "/openapi.json"), 200)
    assert served == json.loads(Path(REPO_ROOT, "docs", "openapi.json").read_text(encoding="utf-8"))


def get_me(w: World) -> None:
    token = w.user("meg")
    expect(w.api.call("GET", "/users/me", token=token), 200)
    w.age_sessions()
    expect(w.api.call("GET", "/users/me", token=token), 200)


def change_username(w: World) -> None:
    token = w.user("una")
    body = {"username": "una2", "password": PASSWORD}
    expect(w.api.call("PUT", "/users/me/username", body, token=token), 200)
    wrong = {"username": "una3", "password": "wrong password"}
    expect(w.api.call("PUT", "/users/me/username", wrong, token=token), 401)


def change_email(w: World) -> None:
    token = w.user("emma")
    body = {"email": "emma2@example.com", "password": PASSWORD}
    expect(w.api.call("PUT", "/users/me/email", body, token=token), 200)


def change_password(w: World) -> None:
    token = w.user("pat")
    expect(w.api.login("pat", ip=w.ip()), 201)  # another session, revoked by the change
    body = {"password": PASSWORD, "newPassword": "battery staple", "confirmNewPassword": "battery staple"}
    expect(w.api.call("PUT", "/users/me/password", body, token=token), 200)


def change_domain(w: World) -> None:
    token = w.user("dom")
    expect(w.api.call("PUT", "/users/me/domain", {"domain": DOMAIN}, token=token), 200)
    body = {"domain": DOMAIN, "subdomain": "dom"}
    expect(w.api.call("PUT", "/users/me/domain", body, token=token), 200)
    expect(w.api.call("PUT", "/users/me/domain", {"domain": "not-offered.test"}, token=token), 404)


def resend_verification(w: World) -> None:
    token = w.user("rex")
    expect(w.api.call("GET", "/users/me/verify", token=token), 201)


def verify_email(w: World) -> None:
    w.user("vera")
    body = {"token": w.verification_token("vera@example.com")}
    expect(w.api.call("PUT", "/users/verify", body), 200)
    expect(w.api.call("PUT", "/users/verify", body), 400)  # used


def request_recovery(w: World) -> None:
    token = w.user("rico")
    ip = w.ip()
    # Every name costs the same: the request queued (RecoveryFunction does the rest, below).
    expect(w.api.call("POST", "/users/recover", {"username": "rico"}, ip=ip), 201)
    expect(w.api.call("POST", "/users/recover", {"username": "rico@example.com"}, ip=ip), 201)
    expect(w.api.call("POST", "/users/recover", {"username": "nobody"}, ip=ip), 201)
    expect(w.api.call("POST", "/users/recover", {"username": "rico"}, ip=ip), 201)
    expect(w.api.call("POST", "/users/recover", {"username": "rico"}, ip=ip), 201)
    expect(w.api.call("POST", "/users/recover", {"username": "rico"}, ip=ip), 429)
    expect(w.api.call("POST", "/users/recover", {"username": "rico"}, token=token, ip=w.ip()), 401)


def reset_password(w: World) -> None:
    w.user("rita")
    expect(w.api.call("POST", "/users/recover", {"username": "rita"}, ip=w.ip()), 201)
    w.handle_recovery_requests()
    body = {
        "token": w.verification_token("rita@example.com", "recover-password"),
        "newPassword": "a new password",
        "confirmNewPassword": "a new password",
    }
    expect(w.api.call("PUT", "/users/recover", body, ip=w.ip()), 200)
    expect(w.api.call("PUT", "/users/recover", body, ip=w.ip()), 400)  # spent
    # A second factor: the reset is challenged, then answered with it.
    _, secret = w.enrolled("rhett")
    expect(w.api.call("POST", "/users/recover", {"username": "rhett"}, ip=w.ip()), 201)
    w.handle_recovery_requests()
    body = {**body, "token": w.verification_token("rhett@example.com", "recover-password")}
    ip = w.ip()
    first = expect(w.api.call("PUT", "/users/recover", body, ip=ip), 401)
    w.clock.now += 30  # a new time step: each code is accepted once
    answer = {"token": first["token"], "type": "totp", "code": w.totp(secret)}
    expect(w.api.call("PUT", "/users/recover", {**body, "2fa": answer}, ip=ip), 200)


def delete_me(w: World) -> None:
    token = w.user("dell")
    for _ in range(3):
        expect(w.api.login("dell", ip=w.ip()), 201)
    expect(w.api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token), 200)


def list_domains(w: World) -> None:
    token = w.user("lidia")
    assert expect(w.api.call("GET", "/domains", token=token), 200)["count"] >= 1


def get_domain(w: World) -> None:
    token = w.user("gina")
    expect(w.api.call("GET", f"/domains/{DOMAIN}", token=token), 200)
    expect(w.api.call("GET", "/domains/not-offered.test", token=token), 404)


def _sid(token: str) -> str:
    return token.split(".")[1]


def _uid(token: str) -> str:
    return token.split(".", maxsplit=1)[0]


def list_my_sessions(w: World) -> None:
    token = w.user("lisa")
    assert expect(w.api.call("GET", "/users/me/sessions", token=token), 200)["count"] == 1


def get_my_session(w: World) -> None:
    token = w.user("gus")
    other = expect(w.api.login("gus", ip=w.ip()), 201)["token"]
    expect(w.api.call("GET", "/users/me/sessions/me", token=token), 200)  # no read beyond authentication
    expect(w.api.call("GET", f"/users/me/sessions/{_sid(other)}", token=token), 200)


def rename_my_session(w: World) -> None:
    token = w.user("ren")
    expect(w.api.call("PATCH", "/users/me/sessions/me", {"name": "Laptop"}, token=token), 200)


def delete_my_session(w: World) -> None:
    token = w.user("dee")
    other = expect(w.api.login("dee", ip=w.ip()), 201)["token"]
    expect(w.api.call("DELETE", f"/users/me/sessions/{_sid(other)}", token=token), 200)


def delete_my_sessions(w: World) -> None:
    token = w.user("dems")
    other = expect(w.api.login("dems", ip=w.ip()), 201)["token"]
    expect(w.api.call("DELETE", "/users/me/sessions", {"ids": [_sid(other)]}, token=token), 200)


def delete_all_my_sessions(w: World) -> None:
    token = w.user("dall")
    expect(w.api.login("dall", ip=w.ip()), 201)
    expect(w.api.call("DELETE", "/users/me/sessions/all", token=token), 200)


def create_scoped_session(w: World) -> None:
    token = w.user("scot")
    body = {"name": "CI", "permissionFlags": 4, "password": PASSWORD}
    expect(w.api.call("POST", "/users/me/sessions", body, token=token, ip=w.ip()), 201)
    wrong = {**body, "password": "wrong password"}  # counted on the account
    expect(w.api.call("POST", "/users/me/sessions", wrong, token=token, ip=w.ip()), 401)


def _staff_and_target(w: World, name: str) -> tuple[str, str]:
    staff = w.user(f"{name}staff")
    w.make_staff(staff)
    return staff, w.user(name)


def list_user_sessions(w: World) -> None:
    staff, target = _staff_and_target(w, "lus")
    expect(w.api.call("GET", f"/users/{_uid(target)}/sessions", token=staff), 200)


def get_user_session(w: World) -> None:
    staff, target = _staff_and_target(w, "gus2")
    expect(w.api.call("GET", f"/users/{_uid(target)}/sessions/{_sid(target)}", token=staff), 200)


def rename_user_session(w: World) -> None:
    staff, target = _staff_and_target(w, "rus")
    body = {"name": "Flagged"}
    expect(w.api.call("PATCH", f"/users/{_uid(target)}/sessions/{_sid(target)}", body, token=staff), 200)


def delete_user_session(w: World) -> None:
    staff, target = _staff_and_target(w, "dus")
    expect(w.api.call("DELETE", f"/users/{_uid(target)}/sessions/{_sid(target)}", token=staff), 200)


def delete_user_sessions(w: World) -> None:
    staff, target = _staff_and_target(w, "duss")
    body = {"ids": [_sid(target)]}
    expect(w.api.call("DELETE", f"/users/{_uid(target)}/sessions", body, token=staff), 200)


def delete_all_user_sessions(w: World) -> None:
    staff, target = _staff_and_target(w, "daus")
    expect(w.api.call("DELETE", f"/users/{_uid(target)}/sessions/all", token=staff), 200)


def start_totp(w: World) -> None:
    token = w.user("tess")
    expect(w.api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token), 200)


def confirm_totp(w: World) -> None:
    token, _ = w.enrolled("cora")  # start and confirm
    wrong = {"token": "x" * 43, "name": "Phone", "code": "123456"}
    expect(w.api.call("POST", "/users/me/2fa/totp/confirm", wrong, token=token), 401)


def passkey_login(w: World, name: str = "pasq") -> None:
    """A passkey's sign-in (challenge, then answer: session, challenge used, counter moved) and a
    refused answer (counted on the challenge)."""
    token = w.user(name)
    key = SoftwareAuthenticator()
    body = {"password": PASSWORD, "passkey": True}
    setup = expect(w.api.call("POST", "/users/me/2fa/webauthn", body, token=token), 200)
    confirm = {"token": setup["token"], "name": "Passkey", "response": key.create(setup, origin=ORIGIN)}
    expect(w.api.call("POST", "/users/me/2fa/webauthn/confirm", confirm, token=token), 201)
    for tamper in (True, False):
        ip = w.ip()
        first = expect(w.api.call("POST", "/login/passkey", {}, ip=ip), 200)
        answer = {
            "token": first["token"],
            "response": key.get(first["challenge"], origin=ORIGIN, tamper_signature=tamper),
        }
        expect(w.api.call("POST", "/login/passkey", answer, ip=ip), 401 if tamper else 201)
    # The same passkey reverifies a change: the challenge is the factors function's, the answer
    # the change's.
    first = expect(w.api.call("POST", "/users/me/reverify", {}, token=token), 200)
    two_fa = {
        "token": first["token"],
        "type": "webauthn",
        "response": key.get(first["challenge"], origin=ORIGIN),
    }
    expect(w.api.call("PUT", "/users/me/username", {"username": f"{name}2", "2fa": two_fa}, token=token), 200)


def passkey_reverify_challenge(w: World) -> None:
    passkey_login(w, "parv")


def start_webauthn(w: World) -> None:
    token = w.user("wess")
    expect(w.api.call("POST", "/users/me/2fa/webauthn", {"password": PASSWORD}, token=token), 200)


def confirm_webauthn(w: World) -> None:
    token, key = w.enrolled_key("wena")  # start and confirm
    # A key answers a challenge here too: its signature counter moves in the user item.
    expect(w.key_challenged("POST", "/users/me/2fa/backup", {}, token, key), 201)
    wrong = {"token": "x" * 43, "name": "Key", "response": {}}
    expect(w.api.call("POST", "/users/me/2fa/webauthn/confirm", wrong, token=token), 401)
    # Removed, it releases its credential id's claim.
    [factor] = expect(w.api.call("GET", "/users/me/2fa", token=token), 200)["items"]
    expect(w.key_challenged("DELETE", f"/users/me/2fa/{factor['id']}", {}, token, key), 200)


def regenerate_backup_codes(w: World) -> None:
    token, secret = w.enrolled("bea")
    w.challenged("POST", "/users/me/2fa/backup", {}, token, secret, status=201)


def list_factors(w: World) -> None:
    token, _ = w.enrolled("lif")
    w.age_sessions()  # the authentication records usedAt
    assert expect(w.api.call("GET", "/users/me/2fa", token=token), 200)["count"] == 1


def get_factor(w: World) -> None:
    token, _ = w.enrolled("gef")
    [factor] = expect(w.api.call("GET", "/users/me/2fa", token=token), 200)["items"]
    expect(w.api.call("GET", f"/users/me/2fa/{factor['id']}", token=token), 200)


def delete_factor(w: World) -> None:
    token, secret = w.enrolled("def")
    [factor] = expect(w.api.call("GET", "/users/me/2fa", token=token), 200)["items"]
    w.challenged("DELETE", f"/users/me/2fa/{factor['id']}", {}, token, secret, status=200)


def delete_factors(w: World) -> None:
    token, secret = w.enrolled("defs")
    [factor] = expect(w.api.call("GET", "/users/me/2fa", token=token), 200)["items"]
    w.challenged("DELETE", "/users/me/2fa", {"ids": [factor["id"]]}, token, secret, status=200)


def delete_all_factors(w: World) -> None:
    token, secret = w.enrolled("dalf")
    w.challenged("DELETE", "/users/me/2fa/all", {}, token, secret, status=200)
    # A wrong answer is counted on the challenge and on the account (Accounts shows the same).
    token, secret = w.enrolled("dalf2")
    first = expect(w.api.call("DELETE", "/users/me/2fa/all", {"password": PASSWORD}, token=token), 401)
    wrong = {
        "token": first["token"],
        "type": "totp",
        "code": _wrong_code(w, secret),
    }
    expect(w.api.call("DELETE", "/users/me/2fa/all", {"2fa": wrong}, token=token), 401)


def _staff_and_enrolled(w: World, name: str) -> tuple[str, str, str]:
    """A staff caller (token, TOTP seed) and a target with a TOTP factor (its user id)."""
    staff = w.user(f"{name}staff")
    secret = w.make_staff(staff)
    target, _ = w.enrolled(name)
    return staff, secret, _uid(target)


def list_user_factors(w: World) -> None:
    staff, _, uid = _staff_and_enrolled(w, "luf")
    assert expect(w.api.call("GET", f"/users/{uid}/2fa", token=staff), 200)["count"] == 1


def get_user_factor(w: World) -> None:
    staff, _, uid = _staff_and_enrolled(w, "guf")
    [factor] = expect(w.api.call("GET", f"/users/{uid}/2fa", token=staff), 200)["items"]
    expect(w.api.call("GET", f"/users/{uid}/2fa/{factor['id']}", token=staff), 200)


def delete_user_factor(w: World) -> None:
    staff, secret, uid = _staff_and_enrolled(w, "duf")
    [factor] = expect(w.api.call("GET", f"/users/{uid}/2fa", token=staff), 200)["items"]
    w.challenged("DELETE", f"/users/{uid}/2fa/{factor['id']}", {}, staff, secret, status=200)


def delete_user_factors(w: World) -> None:
    staff, secret, uid = _staff_and_enrolled(w, "dufs")
    [factor] = expect(w.api.call("GET", f"/users/{uid}/2fa", token=staff), 200)["items"]
    w.challenged("DELETE", f"/users/{uid}/2fa", {"ids": [factor["id"]]}, staff, secret, status=200)


def delete_all_user_factors(w: World) -> None:
    staff, secret, uid = _staff_and_enrolled(w, "dauf")
    w.challenged("DELETE", f"/users/{uid}/2fa/all", {}, staff, secret, status=200)


def _staff(w: World, name: str) -> tuple[str, str]:
    """A staff caller with a TOTP factor: (token, seed)."""
    token = w.user(name)
    return token, w.make_staff(token)


def _wrong_code(w: World, secret: str) -> str:
    return totp_reference.wrong_code(secret, w.clock.now)


def _mail_about(w: World, user_id: str) -> list[dict[str, Any]]:
    """The outbox messages stored about ``user_id`` (read from the outbox table)."""
    return [m for m in map(from_item, w.stack.messages()) if m.get("userId") == user_id]


def _parameter(w: World, logical_id: str) -> str:
    """The stored value of an SSM parameter of the stack (read by the test, not recorded)."""
    name = w.stack.provisioned.parameters[logical_id]
    value: str = w.stack.ssm.get_parameter(Name=name)["Parameter"]["Value"]
    return value


def list_users(w: World) -> None:
    staff, _ = _staff(w, "lius")
    w.user("lius2")
    listed = expect(w.api.call("GET", "/users?limit=2&offset=1", token=staff), 200)
    stored = [i for i in w.stack.items("UsersTable") if i["pk"]["S"].startswith("USER#")]
    assert listed["count"] == len(stored)  # the count shards, read with the page's users
    assert len(listed["items"]) == 2  # CreatedIndex
    assert expect(w.api.call("GET", "/users?limit=0", token=staff), 200)["items"] == []  # count only


def get_my_activity(w: World) -> None:
    token = w.user("acta")
    expect(w.api.call("GET", "/users/me/activity?limit=5", token=token), 200)


def get_user_activity(w: World) -> None:
    staff, _ = _staff(w, "actstaff")
    target = w.user("actu")
    expect(w.api.call("GET", f"/users/{_uid(target)}/activity", token=staff), 200)


def store_activity(w: World) -> None:
    """ActivityFunction, fed the outbox stream by its event source mapping: events stored (a
    sign-in, and more failures than an hour records one by one: counted, then summed up), then a
    batch that keeps failing given up to the dead-letter queue."""
    feed = _event_source(w, "ActivityFunction")
    storer = w.api.handler("ActivityFunction")

    def store() -> list[Invocation]:
        w.api.recording.endpoint = "ActivityFunction (outbox stream)"
        return feed.drain(storer)

    feed.skip()  # earlier scenarios' records: not this scenario's
    w.user("busy")
    for n in range(FAILURES_PER_HOUR + 1):
        if n and n % ACCOUNT_AUTH_FAILURES.limit == 0:  # the login lock's window passes
            w.clock.now += ACCOUNT_AUTH_FAILURES.window + 1
        expect(w.api.login("busy", "wrong password", ip=w.ip()), 401)
    assert all(i.failures == [] for i in store())
    w.user("stuck")
    w.api.recording.faults.fail("dynamodb", "BatchWriteItem")
    try:
        while not feed.given_up:  # MaximumRetryAttempts retries, then the dead-letter queue
            assert all(i.failures for i in store())
    finally:
        w.api.recording.faults.clear()


def get_user(w: World) -> None:
    staff, _ = _staff(w, "geus")
    target = w.user("geu")
    w.age_sessions()  # the authentication records usedAt
    assert expect(w.api.call("GET", f"/users/{_uid(target)}", token=staff), 200)["username"] == "geu"
    expect(w.api.call("GET", "/users/" + "0" * len(_uid(target)), token=staff), 404)


def set_user_username(w: World) -> None:
    staff, secret = _staff(w, "suus")
    uid = _uid(w.user("suu"))
    w.challenged("PUT", f"/users/{uid}/username", {"username": "suu2"}, staff, secret, status=200)
    # A wrong password is counted on the staff member's account; a taken name is a cancelled write.
    wrong = {"username": "suu3", "password": "wrong password"}
    expect(w.api.call("PUT", f"/users/{uid}/username", wrong, token=staff, ip=w.ip()), 401)
    first = expect(
        w.api.call("PUT", f"/users/{uid}/username", {"username": "suu3", "password": PASSWORD}, token=staff),
        401,
    )
    bad = {"token": first["token"], "type": "totp", "code": _wrong_code(w, secret)}
    expect(w.api.call("PUT", f"/users/{uid}/username", {"username": "suu3", "2fa": bad}, token=staff), 401)
    w.challenged("PUT", f"/users/{uid}/username", {"username": "suus"}, staff, secret, status=409)


def set_user_email(w: World) -> None:
    staff, secret = _staff(w, "sues")
    uid = _uid(w.user("sue"))  # a pending verification, replaced
    body = {"email": "sue2@example.com"}
    w.challenged("PUT", f"/users/{uid}/email", body, staff, secret, status=200)
    assert [m["to"] for m in _mail_about(w, uid)].count("sue2@example.com") == 1


def set_user_password(w: World) -> None:
    staff, secret = _staff(w, "sups")
    target = w.user("sup")
    expect(w.api.login("sup", ip=w.ip()), 201)
    body = {"newPassword": "battery staple", "confirmNewPassword": "battery staple"}
    w.challenged("PUT", f"/users/{_uid(target)}/password", body, staff, secret, status=200)
    expect(w.api.call("GET", "/users/me", token=target), 401)  # revoked


def set_user_domain(w: World) -> None:
    staff, _ = _staff(w, "suds")
    uid = _uid(w.user("sud"))
    body = {"domain": DOMAIN, "subdomain": "sud"}
    expect(w.api.call("PUT", f"/users/{uid}/domain", body, token=staff), 200)  # not reverified
    expect(w.api.call("PUT", f"/users/{uid}/domain", {"domain": "not-offered.test"}, token=staff), 404)


def set_user_verified(w: World) -> None:
    staff, secret = _staff(w, "svus")
    uid = _uid(w.user("svu"))  # its pending verification token is removed
    after = w.challenged("PUT", f"/users/{uid}/verify", {}, staff, secret, status=200)
    assert after["verifiedAt"] is not None


def clear_user_verified(w: World) -> None:
    staff, secret = _staff(w, "cvus")
    uid = _uid(w.user("cvu"))
    expect(w.api.call("PUT", "/users/verify", {"token": w.verification_token("cvu@example.com")}), 200)
    after = w.challenged("DELETE", f"/users/{uid}/verify", {}, staff, secret, status=200)
    assert after["verifiedAt"] is None


def resend_user_verification(w: World) -> None:
    staff, _ = _staff(w, "ruvs")
    uid = _uid(w.user("ruv"))
    expect(w.api.call("GET", f"/users/{uid}/verify", token=staff), 201)  # not reverified
    assert len(_mail_about(w, uid)) == 2


def promote_user(w: World) -> None:
    staff, secret = _staff(w, "prus")
    target, _ = w.enrolled("pru")  # staff need a second factor
    after = w.challenged("PUT", f"/users/{_uid(target)}/staff", {}, staff, secret, status=200)
    assert after["staff"] is True


def demote_user(w: World) -> None:
    staff, secret = _staff(w, "deus")
    target, _ = _staff(w, "deu")
    after = w.challenged("DELETE", f"/users/{_uid(target)}/staff", {}, staff, secret, status=200)
    assert after["staff"] is False


def ban_user(w: World) -> None:
    staff, secret = _staff(w, "bans")
    target = w.user("ban")
    after = w.challenged("PUT", f"/users/{_uid(target)}/ban", {"reason": "Spam"}, staff, secret, status=200)
    assert after["banReason"] == "Spam"
    assert [m["kind"] for m in _mail_about(w, _uid(target))].count("ban") == 1  # the notice


def unban_user(w: World) -> None:
    staff, secret = _staff(w, "unbs")
    uid = _uid(w.user("unb"))
    w.challenged("PUT", f"/users/{uid}/ban", {"reason": "Spam"}, staff, secret, status=200)
    after = w.challenged("DELETE", f"/users/{uid}/ban", {}, staff, secret, status=200)
    assert after["bannedAt"] is None


def delete_user(w: World) -> None:
    """The deletion, then SweepFunction on the users stream: the user's sessions and its stored
    mail (the verification email queued at registration) go too."""
    feed = _event_source(w, "SweepFunction")
    staff, secret = _staff(w, "delus")
    target = w.user("delu")
    expect(w.api.login("delu", ip=w.ip()), 201)  # a second session to sweep
    uid = _uid(target)
    assert _mail_about(w, uid)
    feed.skip()  # earlier records: not this scenario's
    w.challenged("DELETE", f"/users/{uid}", {}, staff, secret, status=200)
    w.api.recording.endpoint = "SweepFunction (users stream, staff deletion)"
    swept = feed.drain(w.api.handler("SweepFunction"))
    assert swept
    assert all(i.failures == [] for i in swept)
    assert _mail_about(w, uid) == []
    assert not [s for s in w.stack.items("SessionsTable") if s["userId"]["S"] == uid]


def delete_users(w: World) -> None:
    staff, secret = _staff(w, "delss")
    uids = [_uid(w.user(name)) for name in ("dels1", "dels2")]
    unknown = "0" * len(uids[0])  # well formed, no such user: skipped
    done = w.challenged("DELETE", "/users", {"ids": [*uids, unknown]}, staff, secret, status=200)
    assert done["count"] == 2


def _switches(w: World) -> set[str]:
    return w.stack.enabled_switches()


def list_killswitches(w: World) -> None:
    staff, _ = _staff(w, "liks")
    assert expect(w.api.call("GET", "/killswitches", token=staff), 200)["count"] == 9


def enable_killswitch(w: World) -> None:
    staff, secret = _staff(w, "enks")
    try:
        w.challenged("PUT", "/killswitches/5", {}, staff, secret, status=200)  # FILE_CREATE
        assert _switches(w) == {"FILE_CREATE"}  # written to SSM
        w.challenged("PUT", "/killswitches/5", {}, staff, secret, status=200)  # already on: no write
    finally:
        w.stack.set_switches()


def disable_killswitch(w: World) -> None:
    staff, secret = _staff(w, "diks")
    w.stack.set_switches("FILE_CREATE", "FILE_DELETE")
    try:
        w.challenged("DELETE", "/killswitches/5", {}, staff, secret, status=200)
        assert _switches(w) == {"FILE_DELETE"}
    finally:
        w.stack.set_switches()


def disable_all_killswitches(w: World) -> None:
    staff, secret = _staff(w, "daks")
    w.stack.set_switches("FILE_CREATE", "FILE_DELETE")
    try:
        w.challenged("DELETE", "/killswitches", {}, staff, secret, status=200)
        assert _switches(w) == set()
        # A wrong answer (counted on the challenge and the account) or password writes nothing.
        w.stack.set_switches("FILE_CREATE")
        first = expect(w.api.call("DELETE", "/killswitches", {"password": PASSWORD}, token=staff), 401)
        bad = {"token": first["token"], "type": "totp", "code": _wrong_code(w, secret)}
        expect(w.api.call("DELETE", "/killswitches", {"2fa": bad}, token=staff), 401)
        expect(w.api.call("DELETE", "/killswitches", {"password": "wrong password"}, token=staff), 401)
        assert _switches(w) == {"FILE_CREATE"}
    finally:
        w.stack.set_switches()


def get_log_level(w: World) -> None:
    staff, _ = _staff(w, "gell")
    stored = _parameter(w, "LogLevelParameter")
    assert expect(w.api.call("GET", "/loglevel", token=staff), 200) == {"name": stored}


def set_log_level(w: World) -> None:
    staff, secret = _staff(w, "sell")
    before = _parameter(w, "LogLevelParameter")
    try:
        answer = w.challenged("PATCH", "/loglevel", {"name": "warn"}, staff, secret, status=200)
        assert answer == {"name": "WARN"}
        assert _parameter(w, "LogLevelParameter") == "WARN"  # written to SSM
    finally:  # the later scenarios log as before
        name = w.stack.provisioned.parameters["LogLevelParameter"]
        w.stack.ssm.put_parameter(Name=name, Value=before, Type="String", Overwrite=True)
        container.reset()


def second_factor_challenges(w: World) -> None:
    """Login and the reverification of the other functions, on an account with a factor."""
    token, secret = w.enrolled("chal")
    w.challenged("POST", "/login", {"username": "chal"}, None, secret, status=201)
    first = expect(w.api.call("POST", "/login", {"username": "chal", "password": PASSWORD}, ip=w.ip()), 401)
    wrong = {
        "token": first["token"],
        "type": "totp",
        "code": _wrong_code(w, secret),
    }
    expect(w.api.call("POST", "/login", {"2fa": wrong}, ip=w.ip()), 401)  # counted on challenge and account
    w.challenged("PUT", "/users/me/username", {"username": "chal2"}, token, secret, status=200)
    first = expect(w.api.call("PUT", "/users/me/domain", {"domain": DOMAIN}, token=token), 200)
    body = {"username": "chal3", "password": PASSWORD}
    first = expect(w.api.call("PUT", "/users/me/username", body, token=token), 401)
    wrong = {
        "token": first["token"],
        "type": "totp",
        "code": _wrong_code(w, secret),
    }
    expect(w.api.call("PUT", "/users/me/username", {"username": "chal3", "2fa": wrong}, token=token), 401)
    scoped = {"name": "CI", "permissionFlags": 4}
    w.challenged("POST", "/users/me/sessions", scoped, token, secret, status=201)
    first = expect(
        w.api.call("POST", "/users/me/sessions", {**scoped, "password": PASSWORD}, token=token, ip=w.ip()),
        401,
    )
    wrong = {
        "token": first["token"],
        "type": "totp",
        "code": _wrong_code(w, secret),
    }
    expect(w.api.call("POST", "/users/me/sessions", {**scoped, "2fa": wrong}, token=token, ip=w.ip()), 401)
    # Security keys: the login and the account functions verify assertions and move the counter.
    token, key = w.enrolled_key("keyc")
    expect(w.key_challenged("POST", "/login", {"username": "keyc"}, None, key), 201)
    expect(w.key_challenged("PUT", "/users/me/username", {"username": "keyc2"}, token, key), 200)
    expect(w.key_challenged("POST", "/users/me/sessions", scoped, token, key), 201)


def deliver_mail(w: World) -> None:
    """MailFunction, fed the outbox stream by its event source mapping (whose stream reads use the
    function's role): one email sent, then one dead-lettered while SES is down."""
    feed = _event_source(w, "MailFunction")
    mail = w.api.handler("MailFunction")

    def deliver() -> list[Invocation]:
        w.api.recording.endpoint = "MailFunction (outbox stream)"
        return feed.drain(mail)

    feed.skip()  # earlier scenarios' messages: not this scenario's
    expect(w.api.call("POST", "/register", _new_account("mailed"), ip=w.ip()), 201)
    assert [i.failures for i in deliver()] == [[]]
    expect(w.api.call("POST", "/register", _new_account("undelivered"), ip=w.ip()), 201)
    w.api.recording.faults.fail("ses", "SendEmail", "InternalFailure", 500)  # SES is down (not throttling)
    try:
        assert [i.failures for i in deliver()] == [[]]  # dead-lettered by the function, not retried
    finally:
        w.api.recording.faults.clear()


def handle_recovery_requests(w: World) -> None:
    """RecoveryFunction, fed the outbox stream by its event source mapping: a request mailed (the
    user counted, the token stored, the mail queued, the request removed), one superseding it, a
    username and an address no account has (the index missed, the claim read), one past the silent
    limit, then a batch that keeps failing given up to the dead-letter queue."""
    w.user("remy")
    for name in ("remy", "remy@example.com", "nobody", "nobody@example.com", "remy", "remy"):
        expect(w.api.call("POST", "/users/recover", {"username": name}, ip=w.ip()), 201)
    assert all(i.failures == [] for i in w.handle_recovery_requests())
    expect(w.api.call("POST", "/users/recover", {"username": "remy"}, ip=w.ip()), 201)
    assert w.recovery is not None
    w.api.recording.faults.fail("dynamodb", "TransactWriteItems")
    try:
        while not w.recovery.given_up:  # MaximumRetryAttempts retries, then the dead-letter queue
            assert all(i.failures for i in w.handle_recovery_requests())
    finally:
        w.api.recording.faults.clear()


def sweep_sessions(w: World) -> None:
    """SweepFunction, fed the users stream by its event source mapping (whose stream reads and
    dead letters use the function's role): stale sessions swept after a password change, every
    session of a deleted account, then a batch that keeps failing given up to the dead-letter queue."""
    feed = _event_source(w, "SweepFunction")
    sweeper = w.api.handler("SweepFunction")

    def sweep() -> list[Invocation]:
        w.api.recording.endpoint = "SweepFunction (users stream)"
        return feed.drain(sweeper)

    feed.skip()  # earlier scenarios' records: not this scenario's
    token = w.user("sweepy")
    expect(w.api.login("sweepy", ip=w.ip()), 201)
    body = {"password": PASSWORD, "newPassword": "battery staple", "confirmNewPassword": "battery staple"}
    expect(w.api.call("PUT", "/users/me/password", body, token=token), 200)  # a new generation
    assert [i.failures for i in sweep()] == [[]]
    activity = _event_source(w, "ActivityFunction")
    activity.drain(w.api.handler("ActivityFunction"))  # the account's events, stored
    expect(w.api.call("DELETE", "/users/me", {"password": "battery staple"}, token=token), 200)
    assert [i.failures for i in sweep()] == [[]]
    doomed = w.user("doomed")
    expect(w.api.login("doomed", ip=w.ip()), 201)  # a session the change makes stale
    expect(w.api.call("PUT", "/users/me/password", body, token=doomed), 200)
    w.api.recording.faults.fail("dynamodb", "BatchWriteItem")
    try:
        while not feed.given_up:  # MaximumRetryAttempts retries, then the dead-letter queue
            assert all(i.failures for i in sweep())
    finally:
        w.api.recording.faults.clear()


def _event_source(w: World, function: str) -> StreamFeed:
    """``function``'s event source mapping, its AWS calls recorded as ``function``'s."""
    [subscription] = [s for s in stream_subscriptions(load_template()) if s.function == function]
    streams = boto3.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))
    return StreamFeed(
        subscription,
        table=w.stack.table(subscription.table),
        dynamodb=w.stack.dynamodb,  # the harness's own look-ups, not the mapping's
        streams=w.api.recording.attribute(streams, function),
        sqs=w.api.recording.attribute(boto3.client("sqs"), function),
        on_failure_queue_url=w.stack.provisioned.queues[subscription.on_failure_queue or ""],
    )


def _new_account(name: str) -> dict[str, str]:
    return {"username": name, "email": f"{name}@example.com", "password": "correct horse"}


# Functions not behind the HTTP API, each with the scenario that drives it.
STREAM_SCENARIOS: dict[str, Callable[[World], None]] = {
    "MailFunction": deliver_mail,
    "SweepFunction": sweep_sessions,
    "RecoveryFunction": handle_recovery_requests,
    "ActivityFunction": store_activity,
}

# One scenario per registered endpoint (method, declared path).
SCENARIOS: dict[tuple[str, str], Callable[[World], None]] = {
    ("POST", "/register"): register,
    ("POST", "/login"): login,
    ("POST", "/login/passkey"): passkey_login,
    ("POST", "/users/recover"): request_recovery,
    ("PUT", "/users/recover"): reset_password,
    ("GET", "/"): root,
    ("GET", "/openapi.json"): openapi_document,
    ("GET", "/users/me"): get_me,
    ("GET", "/users/me/activity"): get_my_activity,
    ("GET", "/users/<id>/activity"): get_user_activity,
    ("PUT", "/users/me/username"): change_username,
    ("PUT", "/users/me/email"): change_email,
    ("PUT", "/users/me/password"): change_password,
    ("PUT", "/users/me/domain"): change_domain,
    ("GET", "/users/me/verify"): resend_verification,
    ("PUT", "/users/verify"): verify_email,
    ("DELETE", "/users/me"): delete_me,
    ("GET", "/domains"): list_domains,
    ("GET", "/domains/<id>"): get_domain,
    ("GET", "/users/me/sessions"): list_my_sessions,
    ("GET", "/users/me/sessions/<sid>"): get_my_session,
    ("PATCH", "/users/me/sessions/<sid>"): rename_my_session,
    ("DELETE", "/users/me/sessions/<sid>"): delete_my_session,
    ("DELETE", "/users/me/sessions"): delete_my_sessions,
    ("DELETE", "/users/me/sessions/all"): delete_all_my_sessions,
    ("POST", "/users/me/sessions"): create_scoped_session,
    ("GET", "/users/<uid>/sessions"): list_user_sessions,
    ("GET", "/users/<uid>/sessions/<sid>"): get_user_session,
    ("PATCH", "/users/<uid>/sessions/<sid>"): rename_user_session,
    ("DELETE", "/users/<uid>/sessions/<sid>"): delete_user_session,
    ("DELETE", "/users/<uid>/sessions"): delete_user_sessions,
    ("DELETE", "/users/<uid>/sessions/all"): delete_all_user_sessions,
    ("POST", "/users/me/2fa/totp"): start_totp,
    ("POST", "/users/me/2fa/totp/confirm"): confirm_totp,
    ("POST", "/users/me/2fa/webauthn"): start_webauthn,
    ("POST", "/users/me/2fa/webauthn/confirm"): confirm_webauthn,
    ("POST", "/users/me/reverify"): passkey_reverify_challenge,
    ("POST", "/users/me/2fa/backup"): regenerate_backup_codes,
    ("GET", "/users/me/2fa"): list_factors,
    ("GET", "/users/me/2fa/<id>"): get_factor,
    ("DELETE", "/users/me/2fa/<id>"): delete_factor,
    ("DELETE", "/users/me/2fa"): delete_factors,
    ("DELETE", "/users/me/2fa/all"): delete_all_factors,
    ("GET", "/users/<uid>/2fa"): list_user_factors,
    ("GET", "/users/<uid>/2fa/<id>"): get_user_factor,
    ("DELETE", "/users/<uid>/2fa/<id>"): delete_user_factor,
    ("DELETE", "/users/<uid>/2fa"): delete_user_factors,
    ("DELETE", "/users/<uid>/2fa/all"): delete_all_user_factors,
    ("GET", "/users"): list_users,
    ("GET", "/users/<id>"): get_user,
    ("PUT", "/users/<id>/username"): set_user_username,
    ("PUT", "/users/<id>/email"): set_user_email,
    ("PUT", "/users/<id>/password"): set_user_password,
    ("PUT", "/users/<id>/domain"): set_user_domain,
    ("PUT", "/users/<id>/verify"): set_user_verified,
    ("DELETE", "/users/<id>/verify"): clear_user_verified,
    ("GET", "/users/<id>/verify"): resend_user_verification,
    ("PUT", "/users/<id>/staff"): promote_user,
    ("DELETE", "/users/<id>/staff"): demote_user,
    ("PUT", "/users/<id>/ban"): ban_user,
    ("DELETE", "/users/<id>/ban"): unban_user,
    ("DELETE", "/users/<id>"): delete_user,
    ("DELETE", "/users"): delete_users,
    ("GET", "/killswitches"): list_killswitches,
    ("PUT", "/killswitches/<id>"): enable_killswitch,
    ("DELETE", "/killswitches/<id>"): disable_killswitch,
    ("DELETE", "/killswitches"): disable_all_killswitches,
    ("GET", "/loglevel"): get_log_level,
    ("PATCH", "/loglevel"): set_log_level,
}

# Flows that span several functions' endpoints, run after the per-endpoint scenarios.
CROSS_SCENARIOS: list[Callable[[World], None]] = [second_factor_challenges]

# The stream functions' hand-written roles also carry what the Lambda runtime itself does with the
# role (SAM's generated roles get it from AWS managed policies): no SDK call of ours makes it.
STREAM_FUNCTIONS = ("MailFunction", "SweepFunction", "RecoveryFunction", "ActivityFunction")
_RUNTIME_GRANTS = {
    "logs:CreateLogStream": "the runtime opens its log streams in the function's own log group",
    "logs:PutLogEvents": "the runtime writes the function's logs to its own log group",
    "xray:PutTraceSegments": "Tracing: Active; X-Ray names no resource for it",
    "xray:PutTelemetryRecords": "Tracing: Active; X-Ray names no resource for it",
    # The event source mapping lists the table's streams to find the latest; moto's poller does not.
    "dynamodb:ListStreams": "the event source mapping finds the table's current stream",
}


def _runtime_grants() -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    for function in STREAM_FUNCTIONS:
        for statement in function_statements(load_template(), PARAMS)[function]:
            for action, resource in statement.grants():
                if action in _RUNTIME_GRANTS:
                    found[(function, action, resource)] = _RUNTIME_GRANTS[action]
    return found


# Grants no scenario exercises, each with the reason it is still needed. Keep this small.
UNEXERCISED: dict[tuple[str, str, str], str] = _runtime_grants()


# ---------------------------------------------------------------------------------------------- fixtures


def _registered() -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for spec in function_specs(load_template()):
        if not spec.routes:
            continue  # a stream-fed function (STREAM_SCENARIOS)
        for endpoint in importlib.import_module(spec.handler_module).app.endpoints:
            found[(endpoint.method, endpoint.path)] = spec.logical_id
    return found


@pytest.fixture(scope="module")
def recording(_provisioned: Stack) -> Recording:
    """Every scenario run once with recording on (the one test below checks it)."""
    stack = _provisioned
    stack.ensure_provisioned()
    stack.truncate()
    get_settings.cache_clear()
    container.reset()
    metrics.reset()
    recorded = Recording()
    try:
        with pytest.MonkeyPatch.context() as patch:
            clock = Clock(NOW)
            patch.setattr(nimbus_core.platform.clock, "now", clock)
            patch.setattr(clients, "session", recorded.session_factory())
            passwords.use_profile(passwords.TEST_PROFILE)  # argon2 still runs, in milliseconds
            patch.setattr(passwords, "hash_password", recorded.argon2_work(passwords.hash_password))
            patch.setattr(passwords, "verify_password", recorded.argon2_work(passwords.verify_password))
            world = World(RecordingApi(recorded), stack, clock)
            patch.setattr(
                nimbus_core.platform.clock, "sleep", lambda _s: None
            )  # the mail function's SES backoff
            for scenario in [*SCENARIOS.values(), *CROSS_SCENARIOS, *STREAM_SCENARIOS.values()]:
                scenario(world)
                _trim_users_stream(stack)
    finally:  # the next test on this worker starts from provisioned state, scenarios passed or not
        passwords.use_profile(passwords.PRODUCTION_PROFILE)
        container.reset()
        stack.set_switches()
        stack.truncate()
        get_settings.cache_clear()
        container.reset()
        metrics.reset()
    return recorded


def _trim_users_stream(stack: Stack) -> None:
    """Drop the users stream's records so far, as DynamoDB trims a stream: moto copies every table a
    transaction touches, stream included, so kept they would slow every later scenario down. No
    scenario reads them: the sweep's event source mapping starts past the earlier scenarios' records.
    (The outbox stream is kept: the mail function is fed every message the scenarios queued.)"""
    arn = latest_stream_arn(stack.dynamodb, stack.table("UsersTable"))
    trim_stream(arn, before=EVERY_RECORD, kept_iterators=sys.maxsize)


STATEMENTS = function_statements(load_template(), PARAMS)


# ---------------------------------------------------------------------------------------------- checks


def test_every_registered_endpoint_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(_registered())
    stream_fed = {spec.logical_id for spec in function_specs(load_template()) if not spec.routes}
    assert set(STREAM_SCENARIOS) == stream_fed


def test_every_function_is_granted_exactly_what_its_calls_need(
    recording: Recording, subtests: pytest.Subtests
) -> None:
    """One test over the shared recording, one subtest per check and function: as a single test it
    runs on one xdist worker, so the scenarios run once per suite, not once per worker."""
    with subtests.test("every call was made by an invoked function"):
        assert recording.unattributed == []
        assert set(recording.requests) == set(STATEMENTS), "a function made no AWS call at all"
    for function in sorted(STATEMENTS):
        with subtests.test("every AWS call is allowed by the function's statements", function=function):
            _check_allowed(recording, function)
        with subtests.test("every statement grant is used", function=function):
            _check_used(recording, function)
    with subtests.test("functions that hash or verify passwords have the memory for argon2"):
        _check_argon2_memory(recording)


def _check_allowed(recording: Recording, function: str) -> None:
    refused = {
        f"{r.action} on {r.resource}  <- {', '.join(sorted(via))}"
        for r, via in recording.requests[function].items()
        if not allows(STATEMENTS[function], r)
    }
    assert not refused, f"{function} would get AccessDenied in AWS for:\n" + "\n".join(sorted(refused))


def _check_used(recording: Recording, function: str) -> None:
    """Least privilege: each (action, resource) a statement names was needed by some call."""
    used = recording.requests[function]
    unused = [
        (statement.sid, action, resource)
        for statement in STATEMENTS[function]
        if statement.effect == "Allow"
        for action, resource in statement.grants()
        if not any(r.action.lower() == action.lower() and glob_matches(resource, r.resource) for r in used)
        and (function, action, resource) not in UNEXERCISED
    ]
    assert not unused, f"{function} is granted more than it uses (Sid, action, resource):\n" + "\n".join(
        " ".join(grant) for grant in unused
    )


def _check_argon2_memory(recording: Recording) -> None:
    assert {
        "AuthFunction",
        "AccountsFunction",
        "SessionsFunction",
        "SecondFactorsFunction",
        "StaffFunction",  # reverification, and the passwords staff set
        "AdminFunction",  # reverification of kill-switch and log-level changes
    } <= recording.argon2
    memory = {spec.logical_id: spec.memory_size for spec in function_specs(load_template(), PARAMS)}
    starved = {f: memory[f] for f in recording.argon2 if memory[f] < ARGON2_MEMORY_MB}
    assert starved == {}


def test_stream_functions_have_hand_written_roles() -> None:
    """With ``Policies``, SAM gives a function with a DynamoDB event its own role and attaches
    AWSLambdaDynamoDBExecutionRole to it: read access to every stream in the account. Only a
    ``Role`` of ours keeps that managed policy off."""
    resources = load_template()["Resources"]
    stream_fed = {s.function for s in stream_subscriptions(load_template())}
    assert stream_fed == set(STREAM_FUNCTIONS)
    for function in stream_fed:
        properties = resources[function]["Properties"]
        assert "Role" in properties, function
        assert "Policies" not in properties, function


def test_each_stream_function_reads_its_own_stream_and_no_other() -> None:
    """The sweeper cannot read the outbox stream (its one-time links), nor the mail and recovery
    functions the users stream."""
    template = load_template()
    streams = {
        logical_id: f"{table_arn(logical_id)}/stream/2026-11-28T00:00:00.000"
        for logical_id, table in template["Resources"].items()
        if table["Type"] == "AWS::DynamoDB::Table" and "StreamSpecification" in table["Properties"]
    }
    own = {s.function: s.table for s in stream_subscriptions(template)}
    for function, statements in STATEMENTS.items():
        for table, stream in streams.items():
            for action in ("dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"):
                allowed = allows(statements, IamRequest(action, stream))
                assert allowed == (own.get(function) == table), (function, action, table)
