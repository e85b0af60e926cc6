"""The second-factor challenge in login and reverification, on moto.

Factors are enrolled through the store here (the enrolment endpoints come with the rest of the
issue); everything else goes through the API.
"""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.models import SecondFactor, User
from nimbus_core.factors import otp
from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from tests import totp_reference
from tests.integration.conftest import NOW, Api, Clock, Stack
from tests.migration.upstream import totp_secret as upstream_totp_secret

PASSWORD = "correct horse"
_ips = itertools.count(1)


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def fresh_ip() -> str:
    n = next(_ips)
    return f"10.77.{n // 250 % 250}.{n % 250 + 1}"


def _users(stack: Stack) -> DynamoUsers:
    return DynamoUsers(stack.dynamodb, stack.table("UsersTable"))


def _user(stack: Stack, token: str) -> User:
    user = _users(stack).get(token.split(".", maxsplit=1)[0])
    assert user is not None
    return user


def enrol_totp(
    stack: Stack, token: str, *, backup: list[str] | None = None, secret: str | None = None
) -> str:
    """Give the token's user a TOTP factor (a new seed unless ``secret``, stored as given) and
    backup codes; the TOTP seed."""
    user = _user(stack, token)
    secret = otp.new_totp_secret() if secret is None else secret
    factor = SecondFactor(
        id=new_id(), type="totp", name="Phone", created_at=iso(NOW), updated_at=iso(NOW), secret=secret
    )
    ops = [_users(stack).add_factor_op(user, factor, max_factors=10)]
    DynamoTransactor(stack.dynamodb).commit(ops)
    if backup:
        hashes = [h for h in (otp.backup_code_hash(c) for c in backup) if h]
        DynamoTransactor(stack.dynamodb).commit([_users(stack).set_backup_codes_op(user, hashes)])
    return secret


def new_user(api: Api, **extra: Any) -> tuple[str, str]:
    username = f"tf{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=fresh_ip(), **extra)
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def rename(api: Api, token: str, body: dict[str, Any]) -> Reply:
    return api.call("PUT", "/users/me/username", body, token=token, ip=fresh_ip())


def key(api: Api, token: str, body: dict[str, Any]) -> Reply:
    """POST /users/me/sessions: reverified, limited per IP only (each call from a fresh one)."""
    return api.call(
        "POST", "/users/me/sessions", {"name": "k", "permissionFlags": 4, **body}, token=token, ip=fresh_ip()
    )


def totp_now(secret: str, at: float) -> str:
    return pyotp.TOTP(secret).at(at)


# ------------------------------------------------------------------------------------ reverification


def test_a_correct_password_asks_for_the_second_factor_and_the_answer_completes_the_change(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    secret = enrol_totp(stack, token, backup=otp.new_backup_codes())
    wanted = f"renamed{new_id()[-6:].lower()}"

    challenged = rename(api, token, {"username": wanted, "password": PASSWORD})

    assert challenged.status == 401
    body = challenged.body
    assert code(challenged) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
    assert (body["exp"], body["types"]) == (int(NOW) + 300, ["totp", "backup"])
    assert body["token"].split(".")[0] == token.split(".")[0]
    answer = {"token": body["token"], "type": "totp", "code": totp_now(secret, NOW)}
    done = rename(api, token, {"username": wanted, "2fa": answer})
    assert (done.status, done.body.get("username")) == (200, wanted)


def test_a_challenge_is_single_use_and_a_totp_code_is_accepted_once(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    secret = enrol_totp(stack, token)
    first = key(api, token, {"password": PASSWORD}).body["token"]
    second = key(api, token, {"password": PASSWORD}).body["token"]
    totp_code = totp_now(secret, NOW)

    assert key(api, token, {"2fa": {"token": first, "type": "totp", "code": totp_code}}).status == 201
    replayed_challenge = key(api, token, {"2fa": {"token": first, "type": "totp", "code": totp_code}})
    replayed_code = key(api, token, {"2fa": {"token": second, "type": "totp", "code": totp_code}})

    assert (replayed_challenge.status, code(replayed_challenge)) == (
        401,
        "INVALID_SECOND_FACTOR_RESPONSE_ERROR",
    )
    assert (replayed_code.status, code(replayed_code)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    frozen.now = NOW + 30  # the next time step is a new code
    later = key(api, token, {"2fa": {"token": second, "type": "totp", "code": totp_now(secret, NOW + 30)}})
    assert later.status == 201


def test_a_challenge_is_bound_to_its_endpoint_and_session_and_lives_five_minutes(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    secret = enrol_totp(stack, token)
    other_session = api.login(username=username, ip=fresh_ip())
    challenge = rename(api, token, {"username": "x" + new_id()[-6:].lower(), "password": PASSWORD}).body[
        "token"
    ]
    answer = {"token": challenge, "type": "totp", "code": totp_now(secret, NOW)}

    elsewhere = api.call("PUT", "/users/me/domain", {"domain": "nimbus.test", "2fa": answer}, token=token)
    assert other_session.status == 401  # login itself is challenged now
    frozen.now = NOW + 301
    late = rename(
        api,
        token,
        {"username": "y" + new_id()[-6:].lower(), "2fa": {**answer, "code": totp_now(secret, NOW + 301)}},
    )

    assert elsewhere.status == 200  # domain changes do not reverify: the 2fa object is ignored there
    assert (late.status, code(late)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")


def test_five_wrong_answers_limit_the_session_and_never_the_accounts_logins(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    secret = enrol_totp(stack, token)
    challenge = key(api, token, {"password": PASSWORD}).body["token"]
    wrong = {
        "token": challenge,
        "type": "totp",
        "code": totp_reference.wrong_code(secret, NOW),
    }

    replies = [key(api, token, {"2fa": wrong}) for _ in range(5)]
    right = key(api, token, {"2fa": {**wrong, "code": totp_now(secret, NOW)}})

    assert [code(r) for r in replies] == ["INVALID_SECOND_FACTOR_RESPONSE_ERROR"] * 5
    assert (right.status, code(right)) == (429, "RATELIMITED_ERROR")  # this session's limit (CONTRACT 8)
    assert right.headers.get("Retry-After") is not None
    assert "RateLimit-Limit" not in right.headers
    assert _user(stack, token).auth_failures == 0  # the login lock is never fed from a session


def test_a_backup_code_works_once_and_is_recorded(api: Api, stack: Stack, frozen: Clock) -> None:
    _, token = new_user(api)
    codes = otp.new_backup_codes()
    enrol_totp(stack, token, backup=codes)

    def with_backup(backup_code: str) -> Reply:
        challenge = rename(api, token, {"username": "q" + new_id()[-6:].lower(), "password": PASSWORD}).body[
            "token"
        ]
        return rename(
            api,
            token,
            {
                "username": "p" + new_id()[-6:].lower(),
                "2fa": {"token": challenge, "type": "backup", "code": backup_code},
            },
        )

    assert with_backup(codes[0].lower()).status == 200
    again = with_backup(codes[0])
    assert (again.status, code(again)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    me = api.call("GET", "/users/me", token=token).body
    assert me["twoFactorBackupCodeUsedAt"] == iso(NOW)
    assert len(_user(stack, token).backup_codes) == 9


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ("nope", 400, "MISSING_FIELDS_ERROR"),
        ({}, 400, "MISSING_FIELDS_ERROR"),
        ({"token": "x", "type": "sms", "code": "1"}, 400, "INVALID_SECOND_FACTOR_METHOD_ERROR"),
        ({"token": "x", "type": "totp"}, 400, "MISSING_FIELDS_ERROR"),
        (
            {"token": "x" * 5000, "type": "totp", "code": "123456"},
            401,
            "INVALID_SECOND_FACTOR_RESPONSE_ERROR",
        ),
        ({"token": "x", "type": "webauthn", "response": {}}, 401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR"),
    ],
)
def test_malformed_answers_get_clear_errors(
    api: Api, stack: Stack, answer: Any, status: int, error: str
) -> None:
    _, token = new_user(api)
    enrol_totp(stack, token)

    reply = rename(api, token, {"username": "m" + new_id()[-6:].lower(), "2fa": answer})

    assert (reply.status, code(reply)) == (status, error)


def test_without_a_factor_a_2fa_object_never_replaces_the_password(api: Api) -> None:
    _, token = new_user(api)

    reply = rename(
        api,
        token,
        {"username": "n" + new_id()[-6:].lower(), "2fa": {"token": "x", "type": "totp", "code": "1"}},
    )

    assert (reply.status, code(reply), reply.body["fields"]) == (400, "MISSING_FIELDS_ERROR", ["password"])


# --------------------------------------------------------------------------------------------- login


def test_login_with_a_factor_is_challenged_and_the_answer_logs_in(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    secret = enrol_totp(stack, token)
    ip = fresh_ip()

    challenged = api.login(username=username, ip=ip)
    answer = {"token": challenged.body["token"], "type": "totp", "code": totp_now(secret, NOW)}
    # The client library repeats `username`; it is ignored.
    logged_in = api.call(
        "POST", "/login", {"username": "someone-else", "2fa": answer, "rememberMe": True}, ip=ip
    )

    assert (challenged.status, code(challenged)) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR")
    assert logged_in.status == 201, logged_in.body
    assert logged_in.body["exp"] == int(NOW) + 30 * 86400
    assert api.call("GET", "/users/me", token=logged_in.body["token"]).status == 200


def test_a_login_challenge_never_costs_a_hit_of_the_login_limit(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    secret = enrol_totp(stack, token)
    ip = fresh_ip()

    challenges = [api.login(username=username, ip=ip) for _ in range(6)]
    frozen.now = NOW + 30
    answer = {"token": challenges[-1].body["token"], "type": "totp", "code": totp_now(secret, NOW + 30)}
    done = api.call("POST", "/login", {"2fa": answer}, ip=ip)

    assert [r.status for r in challenges] == [401] * 6
    assert challenges[-1].headers["RateLimit-Remaining"] == "4"
    assert done.status == 201


def test_a_reverification_challenge_cannot_log_in(api: Api, stack: Stack, frozen: Clock) -> None:
    _, token = new_user(api)
    secret = enrol_totp(stack, token)
    challenge = rename(api, token, {"username": "l" + new_id()[-6:].lower(), "password": PASSWORD}).body[
        "token"
    ]

    reply = api.call(
        "POST",
        "/login",
        {"2fa": {"token": challenge, "type": "totp", "code": totp_now(secret, NOW)}},
        ip=fresh_ip(),
    )

    assert (reply.status, code(reply)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")


def test_scoped_sessions_are_never_asked_for_a_second_factor(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    key = api.call(
        "POST",
        "/users/me/sessions",
        {"name": "k", "permissionFlags": 8, "password": PASSWORD},
        token=token,
        ip=fresh_ip(),
    ).body["token"]
    enrol_totp(stack, token)  # after the key was made: it works all the same

    reply = rename(api, key, {"username": "s" + new_id()[-6:].lower()})

    assert reply.status == 200, reply.body


def test_a_login_answer_that_loses_a_race_for_its_code_hears_the_code_was_used_not_the_password(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    from tests.integration.test_user_races import before_next_transaction

    username, token = new_user(api)
    codes = otp.new_backup_codes()
    enrol_totp(stack, token, backup=codes)
    first = api.login(username, PASSWORD, ip="203.0.113.70").body["token"]
    second = api.login(username, PASSWORD, ip="203.0.113.71").body["token"]

    def rival() -> Any:
        body = {"2fa": {"token": second, "type": "backup", "code": codes[0]}}
        return api.call("POST", "/login", body, ip="203.0.113.72")

    with before_next_transaction(rival) as done:
        lost = api.call("POST", "/login", {"2fa": {"token": first, "type": "backup", "code": codes[0]}})

    assert done[1].status == 201, done[1].body
    assert (lost.status, lost.body["code"]) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")


# ------------------------------------------------------------------------- odd stored secrets and codes

# Secrets a stored factor may hold that verify as RFC 6238 says: upstream's own (otplib's default),
# shorter, lower case, padded, and a length RFC 4648 has no padding for (upstream's decoder reads it).
READABLE_SECRETS = {
    "upstream's 16 characters": upstream_totp_secret(),
    "short": "JBSWY3DP",
    "lower case": "jbswy3dpehpk3pxp",
    "padded": "GEZDGNBVGY======",
    "odd length": "JBSWY3DPEHPK3PX",
}
# Secrets that spell no key: each is a wrong answer and a logged error, never a 500.
UNREADABLE_SECRETS = ["A", "not base32!", "JBSW=Y3DP", "0189ABCD", "\u00df" * 8, "JBSWY3DP\n"]
# Codes that can match nothing, whatever the secret.
ODD_CODES = ["", "12345", "1234567", "abcdef", "\uff11" * 6, " 12345", "-12345", "1e+05", "9" * 100]


def _login_answer(api: Api, username: str, code: str) -> Reply:
    """A login challenged afresh and answered with the TOTP ``code``."""
    ip = fresh_ip()
    challenged = api.login(username=username, ip=ip)
    assert code_of(challenged) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", challenged.body
    answer = {"token": challenged.body["token"], "type": "totp", "code": code}
    return api.call("POST", "/login", {"2fa": answer}, ip=ip)


def code_of(reply: Reply) -> str:
    return str(reply.body.get("code"))


WRONG = (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")


@pytest.mark.parametrize("secret", READABLE_SECRETS.values(), ids=READABLE_SECRETS.keys())
def test_a_stored_secret_of_any_shape_upstream_makes_verifies_its_code_and_odd_codes_are_a_clean_401(
    api: Api, stack: Stack, frozen: Clock, secret: str
) -> None:
    username, token = new_user(api)
    enrol_totp(stack, token, secret=secret)

    wrong = [_login_answer(api, username, odd) for odd in ODD_CODES[:4]]
    right = _login_answer(api, username, totp_reference.totp(secret, NOW))

    assert [(r.status, code_of(r)) for r in wrong] == [WRONG] * 4
    assert right.status == 201, right.body


@pytest.mark.parametrize("secret", UNREADABLE_SECRETS)
def test_an_unreadable_stored_secret_is_a_wrong_answer_and_a_logged_error_never_a_500(
    api: Api, stack: Stack, frozen: Clock, service_logs: io.StringIO, secret: str
) -> None:
    username, token = new_user(api)
    enrol_totp(stack, token, secret=secret)
    [factor_id] = _user(stack, token).second_factors

    replies = [_login_answer(api, username, odd) for odd in ("000000", "123456", ODD_CODES[4], ODD_CODES[-1])]

    assert [(r.status, code_of(r)) for r in replies] == [WRONG] * 4
    errors = [json.loads(line) for line in service_logs.getvalue().splitlines() if '"ERROR"' in line]
    assert [(e["message"], e["factor"]) for e in errors] == [
        ("stored TOTP secret is not base32: the answer is refused", factor_id)
    ] * 2  # the two six-digit codes; the others never reach the secret
    if len(secret) > 2:  # (a one-letter secret is in any log)
        assert secret.strip() not in service_logs.getvalue()


def test_an_unreadable_factor_does_not_keep_the_users_other_app_from_answering(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    enrol_totp(stack, token, secret="not base32!")
    good = enrol_totp(stack, token, secret=upstream_totp_secret())

    reply = _login_answer(api, username, totp_reference.totp(good, NOW))

    assert reply.status == 201, reply.body


# --------------------------------------------------------------------- odd stored security keys

# A key that an import (or a bug) stored unreadable: base64url of a length no encoder makes.
UNREADABLE_KEY = "QUJDR"


def _store_key(stack: Stack, token: str, *, credential_id: str, public_key: str) -> None:
    user = _user(stack, token)
    factor = SecondFactor(
        id=new_id(),
        type="webauthn",
        name="Key",
        created_at=iso(NOW),
        updated_at=iso(NOW),
        credential_id=credential_id,
        public_key=public_key,
    )
    DynamoTransactor(stack.dynamodb).commit([_users(stack).add_factor_op(user, factor, max_factors=10)])


@pytest.mark.parametrize(
    ("credential_id", "public_key"),
    [(UNREADABLE_KEY, "pQECAyYgASFYIA"), ("QUJDRA", UNREADABLE_KEY)],
    ids=["unreadable credential id", "unreadable public key"],
)
def test_an_unreadable_stored_key_is_a_wrong_answer_never_a_500(
    api: Api, stack: Stack, frozen: Clock, credential_id: str, public_key: str
) -> None:
    username, token = new_user(api)
    secret = enrol_totp(stack, token)
    _store_key(stack, token, credential_id=credential_id, public_key=public_key)
    ip = fresh_ip()

    challenged = api.login(username=username, ip=ip)
    assertion = {"id": credential_id, "rawId": credential_id, "type": "public-key", "response": {}}
    answer = {"token": challenged.body.get("token"), "type": "webauthn", "response": assertion}
    refused = api.call("POST", "/login", {"2fa": answer}, ip=ip)
    again = api.login(username=username, ip=fresh_ip())
    by_app = {"token": again.body.get("token"), "type": "totp", "code": totp_reference.totp(secret, NOW)}
    signed_in = api.call("POST", "/login", {"2fa": by_app}, ip=fresh_ip())

    assert code_of(challenged) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", challenged.body
    assert (refused.status, code_of(refused)) == WRONG
    assert signed_in.status == 201, signed_in.body
