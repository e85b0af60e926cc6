"""The uncounted setup the moto benchmarks' requests start from: users with their sessions and
factors, written through the in-process API or straight to the tables, and the stream functions'
invocations as their event source mappings would deliver them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
import pyotp

from bench.runs import REGION
from bench.stack import ScenarioError, batch_write, expect
from nimbus_core.adapters import container
from nimbus_core.adapters.items import stored_values, to_item
from nimbus_core.adapters.outbox import RECOVERY_REQUEST
from nimbus_core.adapters.user_factors import totp_secret_attribute
from nimbus_core.adapters.users import user_item
from nimbus_core.domain.killswitches import KillSwitch, parameter_names, stored_value
from nimbus_core.domain.models import SecondFactor
from nimbus_core.factors.otp import new_totp_secret
from nimbus_core.platform import clock
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import InProcessApi, LambdaContextStub, Reply
from nimbus_tools.local.lambda_records import lambda_event, lambda_record
from nimbus_tools.local.provision import put_default_domain
from nimbus_tools.moto_internals import empty_tables
from tests.passkey_authenticator import SoftwareAuthenticator
from tests.samples import PASSWORD, sample_user


@dataclass(frozen=True)
class Account:
    """A user made for a request: its name, id and token, and the second factor it answers with."""

    name: str
    id: str
    token: str
    other_session: str  # the id of its newest session but the token's (the token's when alone)
    seed: str | None = None  # the TOTP factor's seed
    factor: str | None = None  # the TOTP factor's id
    key: SoftwareAuthenticator | None = None


class Harness:
    """Requests, users and sessions for the scenarios, on the in-process API (uncounted setup)."""

    def __init__(self, api: InProcessApi, session: boto3.Session) -> None:
        self.api = api
        self._dynamodb = session.client("dynamodb")  # the bench's own clients: never watched
        self._ssm = session.client("ssm")
        self._sequence = itertools.count(1)
        self._seeded: set[str] = set()

    def unique(self, prefix: str) -> str:
        """A name never used before in this run."""
        return f"{prefix}{next(self._sequence)}"

    def fresh_ip(self) -> str:
        """A source IP never used before: the per-IP rate limits (register: 1 per 6 h) never bite."""
        n = next(self._sequence)
        return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"

    def register(self, username: str) -> str:
        """Register ``username``; its session token."""
        body = {"username": username, "email": f"{username}@example.com", "password": PASSWORD}
        return self._session("/register", body)

    def login(self, username: str) -> str:
        """Log ``username`` in once more; the new session's token."""
        return self._session("/login", {"username": username, "password": PASSWORD})

    def _session(self, path: str, body: dict[str, str]) -> str:
        reply = self.api.call("POST", path, body, ip=self.fresh_ip())
        expect(f"setup: POST {path} {body['username']}", 201, reply)
        return str(reply.body["token"])

    def account(
        self, *, logins: int = 0, factor: str | None = None, staff: bool = False, **state: bool
    ) -> Account:
        """A fresh user with ``logins`` more sessions, a ``factor`` ("totp" or "key"; staff always
        have a TOTP factor: staff endpoints require one), and ``state`` (``verified``, ``banned``)."""
        name = self.unique("u")
        token = self.register(name)
        tokens = [token, *(self.login(name) for _ in range(logins))]
        factor_id, seed = self.add_totp(token, staff=staff) if staff or factor == "totp" else (None, None)
        key = self.add_key(token, passkey=factor == "passkey") if factor in ("key", "passkey") else None
        stamp = clock.iso(clock.now())
        if state.get("verified"):
            self.set_user(token, verifiedAt=stamp)
        if state.get("banned"):  # as a ban leaves the user: their sessions revoked
            self.set_user(token, revoke=True, bannedAt=stamp, banReason="Spam")
        return Account(name, token.split(".")[0], token, tokens[-1].split(".")[1], seed, factor_id, key)

    def add_totp(self, token: str, *, staff: bool = False) -> tuple[str, str]:
        """Give the token's user a TOTP factor no code was used with yet (written directly, so the
        current code answers the next challenge; its seed sealed as an enrolment seals it, by the
        functions' own sealer), and the staff flag if ``staff``; (its id, seed)."""
        stamp, seed = clock.iso(clock.now()), new_totp_secret()
        user_id = token.split(".", 1)[0]
        factor = SecondFactor(id=new_id(), type="totp", name="Phone", created_at=stamp, updated_at=stamp)
        sealed = container.production_deps().sealer.seal(seed, user_id=user_id, factor_id=factor.id)
        values: dict[str, Any] = {
            ":t": {"BOOL": staff},
            ":factor": {"M": to_item(stored_values(factor))},
            ":seed": {"S": sealed},
        }
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{user_id}"}},
            UpdateExpression="SET staff = :t, secondFactors.#f = :factor, #seed = :seed",
            ExpressionAttributeNames={"#f": factor.id, "#seed": totp_secret_attribute(factor.id)},
            ExpressionAttributeValues=values,
        )
        return factor.id, seed

    def enrolment(self, token: str, kind: str, *, passkey: bool = False) -> dict[str, Any]:
        """Start enrolling a ``kind`` ("totp" or "webauthn", a ``passkey`` if asked) factor; the
        body to confirm it with (uncounted), the code or key response included."""
        body = {"password": PASSWORD} | ({"passkey": True} if passkey else {})
        started = self.api.call("POST", f"/users/me/2fa/{kind}", body, token=token)
        expect(f"setup: start {kind}", 200, started)
        if kind == "totp":
            proof: dict[str, Any] = {"code": pyotp.TOTP(started.body["secret"]).now()}
        else:
            key = SoftwareAuthenticator()
            proof = {"response": key.create(started.body, origin=self.origin), "key": key}
        return {"token": started.body["token"], "name": "New", **proof}

    def add_key(self, token: str, *, passkey: bool = False) -> SoftwareAuthenticator:
        """Enrol a software security key (or passkey) through the API; the authenticator."""
        body = self.enrolment(token, "webauthn", passkey=passkey)
        key: SoftwareAuthenticator = body.pop("key")
        confirmed = self.api.call("POST", "/users/me/2fa/webauthn/confirm", body, token=token)
        expect("setup: confirm a security key", 201, confirmed)
        return key

    @property
    def origin(self) -> str:
        """The page a security key answers from: the deployment's first WebAuthn origin."""
        return get_settings().relying_party().origins[0]

    def answer(
        self, caller: Account, method: str, path: str, body: dict[str, Any], *, token: str | None, ip: str
    ) -> dict[str, Any]:
        """``body`` answering, with ``caller``'s security key or TOTP code, the challenge its first
        request (with the password, uncounted) is answered."""
        asked = self.api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=ip)
        expect(f"setup: challenge of {method} {path}", 401, asked)
        if caller.key is not None:
            proof = {
                "type": "webauthn",
                "response": caller.key.get(asked.body["challenge"], origin=self.origin),
            }
        else:
            proof = {"type": "totp", "code": pyotp.TOTP(str(caller.seed)).now()}
        kept = {k: v for k, v in body.items() if k != "password"}
        return kept | {"2fa": {"token": asked.body["token"], **proof}}

    def verification_link(self, address: str, kind: str = "verify-email") -> str:
        """The token of the newest email of ``kind`` queued for ``address`` (read from the outbox,
        once the recovery requests waiting became mail, as the recovery function does)."""
        if kind == "recover-password":
            expect("setup: handle recovery requests", 200, self.recovery_invocation()())
        items = self._dynamodb.scan(TableName=get_settings().outbox_table)["Items"]
        mine = sorted(
            (i for i in items if i["kind"]["S"] == kind and i["to"]["S"] == address),
            key=lambda i: i["createdAt"]["S"],
        )
        if not mine:
            raise ScenarioError(f"setup: no {kind} email for {address}")
        return str(mine[-1]["text"]["S"]).split("token=", 1)[1].split(maxsplit=1)[0]

    def recovery_invocation(self) -> Callable[[], Reply]:
        """The invocation of the recovery function on the recovery requests stored now, to run
        later (see :meth:`stream_invocation`)."""
        table = get_settings().outbox_table
        stored = self._dynamodb.scan(TableName=table)["Items"]
        items = [i for i in stored if i["kind"]["S"] == RECOVERY_REQUEST]
        inserted = [
            {
                "eventName": "INSERT",
                "dynamodb": {"Keys": {"id": i["id"]}, "NewImage": i, "SequenceNumber": str(n)},
            }
            for n, i in enumerate(items, 1)
        ]
        return self.stream_invocation("RecoveryFunction", inserted, table)

    def stream_invocation(
        self, function: str, records: list[dict[str, Any]], table: str
    ) -> Callable[[], Reply]:
        """``function`` invoked on ``records`` of ``table``'s stream as its event source mapping
        would deliver them (the bench keeps no stream records), to run later; it answers 200 when
        no record failed."""
        arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}/stream/bench"
        event = lambda_event([lambda_record(r, arn) for r in records])
        handler = self.api.handler(function)

        def invoke() -> Reply:
            answer = handler(event, LambdaContextStub(function))
            return Reply(500 if answer.get("batchItemFailures") else 200, answer, {}, function)

        return invoke

    def set_user(self, token: str, *, revoke: bool = False, **values: str) -> None:
        """Write attributes of the token's user directly (``verifiedAt="..."``), and with ``revoke``
        move it to a new session generation: a state an endpoint starts from, without the requests
        that would lead there."""
        names = {f"#a{n}": name for n, name in enumerate(values)}
        attributes = {f":v{n}": {"S": value} for n, value in enumerate(values.values())}
        setting = [f"#a{n} = :v{n}" for n in range(len(values))]
        if revoke:
            setting.append("sessionGeneration = if_not_exists(sessionGeneration, :zero) + :one")
            attributes |= {":zero": {"N": "0"}, ":one": {"N": "1"}}
        self._dynamodb.update_item(
            TableName=get_settings().users_table,
            Key={"pk": {"S": f"USER#{token.split('.', 1)[0]}"}},
            UpdateExpression="SET " + ", ".join(setting),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=attributes,
        )

    def set_used_at(self, token: str, age_seconds: float) -> None:
        """Write the session's usedAt as ``age_seconds`` ago (what a request that long ago left)."""
        user_id, session_id = token.split(".")[:2]
        self._dynamodb.update_item(
            TableName=get_settings().sessions_table,
            Key={"userId": {"S": user_id}, "sessionId": {"S": session_id}},
            UpdateExpression="SET usedAt = :u",
            ExpressionAttributeValues={":u": {"S": clock.iso(clock.now() - age_seconds)}},
        )

    def seed_users(self, count: int, once: str) -> None:
        """Store ``count`` user items straight to the table, the first time only for ``once`` (a
        scenario: its repetitions find them): what GET /users lists. Only the user items (no claims,
        not in the user count): they never log in."""
        if once in self._seeded:
            return
        self._seeded.add(once)
        stamp, settings = clock.iso(clock.now()), get_settings()
        stored = {"created_at": stamp, "updated_at": stamp, "domain": settings.default_domain}
        users = [sample_user(new_id(), self.unique("listed")).changed(**stored) for _ in range(count)]
        puts = [{"PutRequest": {"Item": user_item(u)}} for u in users]
        batch_write(self._dynamodb, settings.users_table, puts)

    def set_killswitches(self, enabled: Sequence[KillSwitch]) -> None:
        """Store the enabled kill switches directly in SSM (the bench refetches the runtime
        configuration right before each measured request)."""
        for switch, name in parameter_names(get_settings().killswitch_path).items():
            value = stored_value(switch in enabled)
            self._ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def reset(self) -> None:
        """Empty every table inside moto and offer the default domain again, as provisioned: a
        scenario's setup, kept, would slow every later one down (moto's TransactWriteItems copies
        each table it touches). Round trips do not depend on the tables' size (a Query page holds 1 MB)."""
        empty_tables(REGION, self._dynamodb.list_tables()["TableNames"])
        settings = get_settings()
        put_default_domain(self._dynamodb, settings.domains_table, settings.default_domain)
