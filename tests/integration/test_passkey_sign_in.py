"""Passkeys (CONTRACT section 16) through the API: enrolment with ``passkey: true``, usernameless
sign-in with ``POST /login/passkey``, and reverification with a passkey instead of the password.
A software authenticator makes real attestations and assertions (P-256 keys, real signatures,
the user handle enrolment set), verified by py_webauthn."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import ORIGIN, Api, Stack
from tests.integration.test_login import set_user_attribute
from tests.integration.test_mail import record_calls
from tests.passkey_authenticator import SoftwareAuthenticator

PASSWORD = "correct horse"
WRONG = (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
_ips = itertools.count(1)


def _ip() -> str:
    n = next(_ips)
    return f"10.88.{n // 250 % 250}.{n % 250 + 1}"


def _outcome(reply: Reply) -> tuple[int, str]:
    return reply.status, str(reply.body.get("code"))


def _user(api: Api) -> tuple[str, str]:
    username = f"pk{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=_ip())
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def _enrol(api: Api, token: str, key: SoftwareAuthenticator, *, passkey: bool = True, **create: Any) -> Reply:
    setup = api.call(
        "POST", "/users/me/2fa/webauthn", {"password": PASSWORD, "passkey": passkey}, token=token
    )
    assert setup.status == 200, setup.body
    body = {
        "token": setup.body["token"],
        "name": "Laptop",
        "response": key.create(setup.body, origin=ORIGIN, **create),
    }
    return api.call("POST", "/users/me/2fa/webauthn/confirm", body, token=token)


def _challenge(api: Api, ip: str | None = None) -> dict[str, Any]:
    reply = api.call("POST", "/login/passkey", {}, ip=ip or _ip())
    assert reply.status == 200, reply.body
    return dict(reply.body)


def _sign_in(api: Api, key: SoftwareAuthenticator, ip: str | None = None, **get: Any) -> Reply:
    challenge = _challenge(api, ip)
    response = key.get(challenge["challenge"], origin=ORIGIN, **get)
    return api.call(
        "POST", "/login/passkey", {"token": challenge["token"], "response": response}, ip=ip or _ip()
    )


def _reverified(api: Api, token: str, key: SoftwareAuthenticator) -> dict[str, Any]:
    """The ``2fa`` answer of a passkey reverification, for one reverified request."""
    challenge = api.call("POST", "/users/me/reverify", {}, token=token)
    assert challenge.status == 200, challenge.body
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    return {"type": "webauthn", "token": challenge.body["token"], "response": response}


@pytest.fixture
def enrolled(api: Api) -> tuple[str, str, SoftwareAuthenticator]:
    username, token = _user(api)
    key = SoftwareAuthenticator(transports=("internal",))
    done = _enrol(api, token, key)
    assert done.status == 201, done.body
    assert done.body["passkey"] is True
    return username, token, key


def test_passkey_enrolment_asks_for_a_discoverable_credential_that_verifies_its_user(api: Api) -> None:
    _, token = _user(api)

    setup = api.call("POST", "/users/me/2fa/webauthn", {"password": PASSWORD, "passkey": True}, token=token)
    plain = api.call("POST", "/users/me/2fa/webauthn", {"password": PASSWORD}, token=token)

    selection = setup.body["authenticatorSelection"]
    assert (selection["residentKey"], selection["requireResidentKey"]) == ("required", True)
    assert selection["userVerification"] == "required"
    assert setup.body["extensions"] == {"credProps": True}
    assert plain.body["authenticatorSelection"]["residentKey"] == "discouraged"


def test_an_enrolled_passkey_is_listed_as_one_and_a_security_key_is_not(api: Api) -> None:
    tokens = [_user(api)[1] for _ in range(2)]
    _enrol(api, tokens[0], SoftwareAuthenticator())
    _enrol(api, tokens[1], SoftwareAuthenticator(), passkey=False)

    listed = [api.call("GET", "/users/me/2fa", token=t).body["items"] for t in tokens]

    assert [[f["passkey"] for f in items] for items in listed] == [[True], [False]]


@pytest.mark.parametrize(
    "create",
    [{"user_verified": False}, {"discoverable": False}],
    ids=["user not verified", "browser says not discoverable"],
)
def test_a_passkey_enrolment_without_user_verification_or_discoverability_is_refused(
    api: Api, create: dict[str, Any]
) -> None:
    _, token = _user(api)

    refused = _enrol(api, token, SoftwareAuthenticator(), **create)

    assert _outcome(refused) == WRONG
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 0


def test_the_challenge_names_no_credential_requires_user_verification_and_costs_one_write(
    api: Api, stack: Stack
) -> None:
    calls = record_calls("dynamodb", clients.dynamodb())

    challenge = _challenge(api)

    assert challenge["challenge"]["allowCredentials"] == []
    assert challenge["challenge"]["userVerification"] == "required"
    assert [op for op, _ in calls] == ["TransactWriteItems"]


def test_a_passkey_alone_signs_in_with_a_normal_session(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    username, _, key = enrolled

    signed_in = _sign_in(api, key)
    me = api.call("GET", "/users/me", token=str(signed_in.body["token"]))

    assert signed_in.status == 201, signed_in.body
    assert (me.status, me.body["username"]) == (200, username)


def test_unknown_deleted_and_wrong_credentials_get_one_and_the_same_answer(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    stranger = SoftwareAuthenticator()
    stranger.user_handle = key.user_handle  # claims to be the user, with a key never enrolled

    answers = [
        _sign_in(api, key, tamper_signature=True),
        _sign_in(api, key, user_verified=False),
        _sign_in(api, stranger),
        _sign_in(api, SoftwareAuthenticator()),  # no user handle at all
    ]
    deleted = api.call("DELETE", "/users/me", {"2fa": _reverified(api, token, key)}, token=token)
    assert deleted.status == 200, deleted.body
    answers.append(_sign_in(api, key))

    assert {(a.status, str(a.body)) for a in answers} == {(401, str(answers[0].body))}
    assert _outcome(answers[0]) == WRONG


def test_a_passkey_answer_made_in_a_frame_of_another_page_neither_signs_in_nor_reverifies(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    framed: list[dict[str, Any]] = [{"cross_origin": True}, {"top_origin": "https://evil.test"}]

    sign_ins = [_sign_in(api, key, **frame) for frame in framed]
    changes = []
    for frame in framed:
        challenge = api.call("POST", "/users/me/reverify", {}, token=token)
        response = key.get(challenge.body["challenge"], origin=ORIGIN, **frame)
        two_fa = {"type": "webauthn", "token": challenge.body["token"], "response": response}
        changes.append(
            api.call("PUT", "/users/me/username", {"username": "framed", "2fa": two_fa}, token=token)
        )

    assert {(a.status, str(a.body)) for a in sign_ins} == {(401, str(sign_ins[0].body))}
    assert _outcome(sign_ins[0]) == WRONG
    assert [_outcome(c) for c in changes] == [WRONG, WRONG]
    assert _sign_in(api, key).status == 201  # the same key on our own page


def test_a_security_key_that_is_not_a_passkey_does_not_sign_in_alone(api: Api) -> None:
    _, token = _user(api)
    key = SoftwareAuthenticator()
    _enrol(api, token, key, passkey=False)

    assert _outcome(_sign_in(api, key)) == WRONG


def test_an_answer_is_used_once_and_a_replayed_counter_is_refused(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, _, key = enrolled
    challenge = _challenge(api)
    body = {"token": challenge["token"], "response": key.get(challenge["challenge"], origin=ORIGIN)}

    first = api.call("POST", "/login/passkey", body, ip=_ip())
    replayed = api.call("POST", "/login/passkey", body, ip=_ip())
    old_counter = _sign_in(api, key, sign_count=1)

    assert first.status == 201
    assert _outcome(replayed) == WRONG
    assert _outcome(old_counter) == WRONG


def test_a_banned_user_proven_by_the_passkey_is_told_so(
    api: Api, stack: Stack, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    user_id = api.call("GET", "/users/me", token=token).body["id"]
    set_user_attribute(stack, user_id, "bannedAt", {"S": "2027-01-01T00:00:00.000Z"})

    assert _outcome(_sign_in(api, key)) == (403, "BANNED_ERROR")


def test_the_login_lock_does_not_keep_a_passkey_out(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    username, _, key = enrolled
    for _ in range(12):  # a password guesser locks the account (CONTRACT section 10)
        api.call("POST", "/login", {"username": username, "password": "wrong password"}, ip=_ip())
    locked = api.call("POST", "/login", {"username": username, "password": PASSWORD}, ip=_ip())

    assert locked.status == 429, locked.body
    assert _sign_in(api, key).status == 201


def test_ten_answers_per_address_are_counted_and_challenges_are_not(api: Api) -> None:
    ip = _ip()
    challenges = [_challenge(api, ip) for _ in range(12)]  # never refused: not counted

    answers = [
        api.call("POST", "/login/passkey", {"token": c["token"], "response": {"id": "x"}}, ip=ip)
        for c in challenges[:11]
    ]

    assert [a.status for a in answers] == [401] * 10 + [429]
    assert answers[0].headers["RateLimit-Limit"] == "10"


def test_half_an_answer_is_a_400_naming_what_is_missing(api: Api) -> None:
    no_response = api.call("POST", "/login/passkey", {"token": "t"}, ip=_ip())
    no_token = api.call("POST", "/login/passkey", {"response": {}}, ip=_ip())

    assert (no_response.status, no_response.body["fields"]) == (400, ["response"])
    assert (no_token.status, no_token.body["fields"]) == (400, ["token"])


def test_a_passkey_reverifies_a_change_without_the_password(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    challenge = api.call("POST", "/users/me/reverify", {}, token=token)
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    two_fa = {"type": "webauthn", "token": challenge.body["token"], "response": response}

    renamed = api.call(
        "PUT", "/users/me/username", {"username": f"r{new_id()[-9:].lower()}", "2fa": two_fa}, token=token
    )
    again = api.call(
        "PUT", "/users/me/username", {"username": f"s{new_id()[-9:].lower()}", "2fa": two_fa}, token=token
    )

    assert challenge.body["challenge"]["userVerification"] == "required"
    assert [d["id"] for d in challenge.body["challenge"]["allowCredentials"]] == [response["id"]]
    assert renamed.status == 200, renamed.body
    assert _outcome(again) == WRONG


def test_reverifying_by_passkey_needs_a_passkey_and_its_own_session(
    api: Api, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    _, plain_token = _user(api)
    _enrol(api, plain_token, SoftwareAuthenticator(), passkey=False)
    challenge = api.call("POST", "/users/me/reverify", {}, token=token)
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    two_fa = {"type": "webauthn", "token": challenge.body["token"], "response": response}
    signed_in = _sign_in(api, key)

    no_passkey = api.call("POST", "/users/me/reverify", {}, token=plain_token)
    from_another_session = api.call(
        "PUT",
        "/users/me/username",
        {"username": f"x{new_id()[-9:].lower()}", "2fa": two_fa},
        token=str(signed_in.body["token"]),
    )

    assert _outcome(no_passkey) == (400, "INVALID_SECOND_FACTOR_METHOD_ERROR")
    assert _outcome(from_another_session) == WRONG


def test_adding_and_removing_a_passkey_are_each_told_by_mail_naming_it_a_passkey(
    api: Api, stack: Stack, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, token, key = enrolled
    (factor,) = api.call("GET", "/users/me/2fa", token=token).body["items"]

    removed = api.call(
        "DELETE", f"/users/me/2fa/{factor['id']}", {"2fa": _reverified(api, token, key)}, token=token
    )

    assert removed.status == 200, removed.body
    subjects = {"A second factor was added", "A second factor was removed"}
    told = {m["subject"]: m["text"] for m in stack.emails if m["subject"] in subjects}
    assert set(told) == subjects
    assert all('Passkey "Laptop"' in text for text in told.values()), told


def test_two_answers_racing_for_one_challenge_open_one_session(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A synced passkey's counter stays 0, so only the challenge's single use stops the second.
    key = SoftwareAuthenticator(counter=False)
    assert _enrol(api, _user(api)[1], key).status == 201
    challenge = _challenge(api)
    body = {"token": challenge["token"], "response": key.get(challenge["challenge"], origin=ORIGIN)}
    commit = DynamoTransactor.commit
    racing: list[Reply] = []
    pending = [True]

    def after_the_other_lands(self: DynamoTransactor, ops: Any) -> None:
        if pending:  # the other answer reads, checks and commits between this one's read and write
            pending.clear()
            racing.append(api.call("POST", "/login/passkey", body, ip=_ip()))
        commit(self, ops)

    monkeypatch.setattr(DynamoTransactor, "commit", after_the_other_lands)
    this = api.call("POST", "/login/passkey", body, ip=_ip())

    assert racing[0].status == 201, racing[0].body
    assert _outcome(this) == WRONG


def test_account_login_closes_both_steps_of_a_passkey_sign_in_and_stores_nothing(
    api: Api, stack: Stack, enrolled: tuple[str, str, SoftwareAuthenticator]
) -> None:
    _, _, key = enrolled
    challenge = _challenge(api)
    answer = {"token": challenge["token"], "response": key.get(challenge["challenge"], origin=ORIGIN)}
    tokens_before = stack.items("TokensTable")
    stack.set_switches("ACCOUNT_LOGIN")

    asked = api.call("POST", "/login/passkey", {}, ip=_ip())
    answered = api.call("POST", "/login/passkey", answer, ip=_ip())

    assert [(r.status, r.body.get("feature")) for r in (asked, answered)] == [(503, 4), (503, 4)]
    assert stack.items("TokensTable") == tokens_before
