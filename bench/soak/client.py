"""``Soak``: tests/api_client.py's client with every request paused, timed and recorded (a 5xx, no
answer, or a hostile request accepted fails), per-user addresses, the emulator behind; ``Person``:
what each simulated user and the staff member knows and does (register, log in, reverify, TOTP)."""

from __future__ import annotations

import http.client
import itertools
import random
import re
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nimbus_tools.local.state import ServeState
from tests import api_client as api

PASSWORD = "correct horse battery"
CHALLENGE = "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
USER_AGENTS = (
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Safari/605.1.15",
    "curl/8.5.0",
    "cumulonimbus-wrapper/5.0.0",
    "",
)
ID_SEGMENT = re.compile(r"/[0-9A-Za-z]{20,}(?=/|$)")  # a user's or session's id in a path


def traffic_random(seed: int) -> random.Random:
    """The random choices of one actor's traffic (reproducible with --seed; nothing secret)."""
    return random.Random(seed)  # noqa: S311


class Soak(api.ApiClient):
    """The API under soak, its emulator, and what is recorded; the run's clock and shared state."""

    def __init__(self, state: ServeState, state_file: Path, seed: int, think: float) -> None:
        super().__init__(state["api_url"], timeout=60.0)
        self.state, self.state_file, self.think = state, state_file, think
        self.deadline = float("inf")
        self.stop = threading.Event()  # set when the traffic has ended (the sampler stops)
        # Per kind of request, each answer's status and milliseconds; the failures as shown; counts
        # (server_errors, transport_errors, accepted_hostile, soak_errors, lives); lives cut short.
        self.kinds: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
        self.failures: list[str] = []
        self.counts: Counter[str] = Counter()
        self.aborted: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._addresses = itertools.count(traffic_random(seed).randrange(5_000_000))
        self._pauses = traffic_random(seed)
        self._retired: set[str] = set()
        # What a hostile user could have learnt of others: (user id, session id, a token dead by now or '').
        self.exposed: deque[tuple[str, str, str]] = deque(maxlen=64)
        # Every actor reads the outbox through it, and the sampler and the invariant checks too.
        pool = {"max_pool_connections": 64, "retries": {"max_attempts": 2, "mode": "standard"}}
        self.dynamodb = api.emulator_client("dynamodb", state["aws_endpoint_url"], state["region"], **pool)
        self.ses = api.emulator_client("ses", state["aws_endpoint_url"], state["region"], **pool)

    @property
    def requests(self) -> int:
        """Requests answered so far."""
        with self._lock:
            return sum(map(len, self.kinds.values()))

    def fail(self, counter: str, kind: str, what: str, request: str, response: str) -> None:
        """A failure, added to ``counter`` (the first thousand kept to be shown)."""
        with self._lock:
            self.counts[counter] += 1
            if len(self.failures) < 1000:
                self.failures.append(f"  {what}: {kind}\n    request:  {request}\n    response: {response}")

    def live(self, life: Callable[..., None], *args: Any) -> None:
        """Lives of one actor (``life(*args)``) until the time is over, each ending with its cleanup."""
        while self.running():
            aborted = ""
            try:
                life(*args)
            except api.UnexpectedReplyError as error:  # an answer the user cannot go on from: no failure
                aborted = str(error)
            except Exception:
                self.fail("soak_errors", "soak", "soak error", "", traceback.format_exc())
            with self._lock:
                self.counts["lives"] += 1
                self.aborted.update([aborted] if aborted else [])

    def running(self) -> bool:
        """Whether the traffic's time is not over yet."""
        return time.monotonic() < self.deadline

    def new_address(self) -> str:
        """An address of this run's alone, 127.64.0.1 on from a random offset (no earlier run's counter)."""
        return api.loopback(next(self._addresses), first=64)

    def call(
        self, method: str, path: str, body: Any = None, *, note: str = "", want: int = 0, **extra: Any
    ) -> api.Reply:
        """A request after the think time, recorded as ``METHOD /route note`` (ids read ``:id``);
        ``want``: the status the user cannot go on without; ``hostile=True``: 4xx only."""
        hostile = extra.pop("hostile", False)
        kind = f"{method} {ID_SEGMENT.sub('/:id', path.split('?', 1)[0])}{' ' + note if note else ''}"
        if self.think > 0:
            time.sleep(self._pauses.uniform(0, 2 * self.think))
        sent, token = api.shorten(extra.get("raw") or body or ""), " with a token" * bool(extra.get("token"))
        shown = f"{method} {path} from {extra.get('ip')}{token} body={sent}"
        started = time.perf_counter()
        try:
            reply = super().call(method, path, body, **extra)
        except (OSError, http.client.HTTPException) as error:
            self.fail("transport_errors", kind, "no answer", shown, repr(error))
            raise api.UnexpectedReplyError(f"{kind}: no answer") from error
        with self._lock:
            self.kinds[kind].append((reply.status, (time.perf_counter() - started) * 1000))
        answer = f"{reply.status} {api.shorten(reply.body)}"
        if reply.status >= 500:
            self.fail("server_errors", kind, "5xx", shown, answer)
        elif hostile and reply.status < 300:
            self.fail("accepted_hostile", kind, "hostile request accepted", shown, answer)
        return api.expect(reply, want, what=kind) if want else reply

    def mailed_token(self, user_id: str, kind: str, address: str, wait: float = 0.0) -> str | None:
        """The token of the newest ``kind`` mail to ``address`` (waited for up to ``wait`` seconds)."""
        table = self.state["tables"]["OutboxTable"]
        mails = api.outbox_messages(self.dynamodb, table, user_id, kind, to=address, wait=wait)
        return api.link_token(str(mails[-1]["text"])) if mails else None

    def retire(self, subjects: set[str]) -> None:
        """Nothing will ever come again from these addresses, users and names."""
        with self._lock:
            self._retired |= subjects

    def expire_counters(self) -> int:
        """Delete the rate-limit counters of retired subjects, as DynamoDB's TTL would (moto has none;
        no request comes from them again to tell); how many."""
        table = self.state["tables"]["CountersTable"]
        with self._lock:
            retired = set(self._retired)
        scan = self.dynamodb.get_paginator("scan").paginate(TableName=table, ProjectionExpression="pk")
        pks = [item["pk"] for page in scan for item in page["Items"]]
        keys = [{"pk": pk} for pk in pks if pk["S"].split("#", 2)[-1] in retired]
        for batch in itertools.batched(keys, 25, strict=False):
            pending: dict[str, Any] = {table: [{"DeleteRequest": {"Key": key}} for key in batch]}
            while pending:
                pending = self.dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        return len(keys)


@dataclass
class Person:
    """One simulated account holder of one thread: what it knows of its account, the requests it makes."""

    soak: Soak
    rng: random.Random
    name: str = ""
    password: str = PASSWORD
    email: str = ""
    ip: str = ""
    token: str = ""
    user_id: str = ""
    session_id: str = ""
    authenticator: api.Authenticator | None = None
    backup_codes: list[str] = field(default_factory=list)
    # What the service keys rate-limit counters by for this user: its addresses and its id. Retired
    # with the account (Soak.retire).
    subjects: set[str] = field(default_factory=set)

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> api.Reply:
        """A request from this person's address with its token (unless ``extra`` says otherwise)."""
        extra.setdefault("ip", self.ip)
        extra.setdefault("token", self.token)
        return self.soak.call(method, path, body, **extra)

    def maybe(self, probability: float) -> bool:
        """True with ``probability``, and only while the run lasts (the end skips to the cleanup)."""
        return self.soak.running() and self.rng.random() < probability

    def new_device(self) -> str:
        """A new source address of this person's (another device)."""
        address = self.soak.new_address()
        self.subjects.add(address)
        return address

    def register(self, prefix: str) -> Person:
        """Registered under a new name: its session, id and session id."""
        self.name = f"{prefix}_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:14]}"
        self.email, self.ip = f"{self.name}@example.com", self.new_device()
        extra = {"confirmPassword": self.password} if self.rng.random() < 0.3 else {}
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        reply = self.soak.register(self.name, ip=self.ip, password=self.password, headers=headers, **extra)
        self.token = str(api.expect(reply, 201, what="POST /register").body["token"])
        self.user_id = str(self.me(want=200).body["id"])
        self.subjects.add(self.user_id)
        self.current_session()
        return self

    def current_session(self) -> None:
        """The id of the session its token is."""
        self.session_id = str(self.call("GET", "/users/me/sessions/me", want=200).body["id"])

    def me(self, token: str = "", note: str = "", want: int = 0) -> api.Reply:
        """GET /users/me (with another token of its own: a dead one when ``note`` says it is)."""
        dead = note.endswith(("revoked token]", "deleted user]", "banned]"))
        return self.call("GET", "/users/me", token=token or self.token, note=note, hostile=dead, want=want)

    def answer(self, challenge: api.Reply) -> dict[str, str]:
        """A right answer: a backup code, or half the time TOTP when a code is ready without waiting."""
        token, types = str(challenge.body["token"]), set(challenge.body.get("types") or [])
        app = self.authenticator if "totp" in types else None
        if self.backup_codes and "backup" in types and not (app and app.ready() and self.rng.random() < 0.5):
            return {"token": token, "type": "backup", "code": self.backup_codes.pop()}
        if app is None:
            raise api.UnexpectedReplyError("challenged without a factor to answer with")
        return {"token": token, "type": "totp", "code": app.code()}

    def reverified(self, method: str, path: str, body: dict[str, Any], want: int = 0) -> api.Reply:
        """A Reverify request: with the password, then the challenge's answer when one is asked."""
        reply = self.call(method, path, {**body, "password": self.password})
        if reply.code == CHALLENGE:
            reply = self.call(method, path, {**body, "2fa": self.answer(reply)}, note="2fa")
        return api.expect(reply, want, what=f"{method} {path}") if want else reply

    def enrol_totp(self) -> None:
        """TOTP enrolled (and its first backup codes kept)."""
        self.authenticator, self.backup_codes = self.soak.enrol_totp(self.token, self.password, ip=self.ip)

    def login(self, ip: str, *, wrong_answer: bool = False, want: int = 0) -> api.Reply:
        """POST /login by name or address, through the challenge when the account has a second factor."""
        extra: dict[str, Any] = {"rememberMe": True} if self.rng.random() < 0.3 else {}
        headers = {"User-Agent": self.rng.choice(USER_AGENTS)}
        if self.rng.random() < 0.3:
            headers["X-Session-Name"] = "Soak device"
        username = self.rng.choice((self.name, self.email))
        reply = self.soak.login(username, self.password, ip=ip, headers=headers, **extra)
        if reply.code == CHALLENGE:
            if wrong_answer and (app := self.authenticator) is not None:
                wrong = {"token": reply.body["token"], "type": "totp", "code": app.wrong_code()}
                self.soak.call("POST", "/login", {"2fa": wrong}, ip=ip, note="2fa [wrong code]", hostile=True)
            answer = {"2fa": self.answer(reply), "rememberMe": False}
            reply = self.soak.call("POST", "/login", answer, ip=ip, headers=headers, note="2fa")
        return api.expect(reply, want, what="POST /login") if want else reply
