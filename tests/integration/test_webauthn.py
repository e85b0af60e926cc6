"""Security keys (WebAuthn) end to end: enrolment and challenge answers through the API, with a
software authenticator that makes real attestations and assertions (a P-256 key, real signatures)
verified by py_webauthn. Nothing about the verification is mocked."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from typing import Any

import pyotp
import pytest

from nimbus_core.adapters import container
from nimbus_core.platform.ids import new_id
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import NOW, ORIGIN, PARAMS, Api, Clock, Faults, Stack
from tests.passkey_authenticator import AuthenticatorRefusedError, SoftwareAuthenticator, b64url

PASSWORD = "correct horse"
RP_ID = PARAMS["WebAuthnRpId"]
WRONG = ("INVALID_SECOND_FACTOR_RESPONSE_ERROR", 401)
_ips = itertools.count(1)


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def outcome(reply: Reply) -> tuple[str, int]:
    return code(reply), reply.status


def fresh_ip() -> str:
    n = next(_ips)
    return f"10.77.{n // 250 % 250}.{n % 250 + 1}"


def new_user(api: Api) -> tuple[str, str]:
    username = f"wa{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=fresh_ip())
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def start(api: Api, token: str, body: dict[str, Any] | None = None) -> Reply:
    return api.call("POST", "/users/me/2fa/webauthn", body or {"password": PASSWORD}, token=token)


def confirm(api: Api, token: str, setup_token: str, response: dict[str, Any], name: str = "Key") -> Reply:
    body = {"token": setup_token, "name": name, "response": response}
    return api.call("POST", "/users/me/2fa/webauthn/confirm", body, token=token)


def enrol(api: Api, token: str, key: SoftwareAuthenticator, name: str = "Key") -> Reply:
    setup = start(api, token).body
    done = confirm(api, token, setup["token"], key.create(setup, origin=ORIGIN), name)
    assert done.status == 201, done.body
    return done


def ask(api: Api, method: str, path: str, token: str | None, **body: Any) -> Reply:
    first = api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=fresh_ip())
    assert (first.status, code(first)) == (401, "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"), first.body
    return first


def answer(
    api: Api,
    method: str,
    path: str,
    token: str | None,
    challenge: Reply,
    response: dict[str, Any],
    **body: Any,
) -> Reply:
    two_fa = {"token": challenge.body["token"], "type": "webauthn", "response": response}
    return api.call(method, path, {**body, "2fa": two_fa}, token=token, ip=fresh_ip())


def reverified(api: Api, token: str, key: SoftwareAuthenticator, **get: Any) -> Reply:
    """Regenerate the backup codes (a reverified change without a rate limit) through a challenge
    answered by ``key`` (``get`` makes it misbehave)."""
    challenge = ask(api, "POST", "/users/me/2fa/backup", token)
    response = key.get(challenge.body["challenge"], origin=get.pop("origin", ORIGIN), **get)
    return answer(api, "POST", "/users/me/2fa/backup", token, challenge, response)


def stored_factor(stack: Stack, token: str) -> dict[str, Any]:
    user_id = token.split(".", maxsplit=1)[0]
    [item] = [i for i in stack.items("UsersTable") if i["pk"]["S"] == f"USER#{user_id}"]
    [factor] = [f["M"] for f in item["secondFactors"]["M"].values() if f["M"]["type"]["S"] == "webauthn"]
    return dict(factor)


# ------------------------------------------------------------------------------------------- enrolment


def test_a_security_key_is_enrolled_with_the_creation_options_and_its_attestation(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    key = SoftwareAuthenticator()

    setup = start(api, token)
    done = confirm(api, token, setup.body["token"], key.create(setup.body, origin=ORIGIN), "YubiKey")

    assert setup.status == 200, setup.body
    options = setup.body
    assert (options["type"], options["exp"]) == ("webauthn", int(NOW) + 600)
    assert options["rp"] == {"id": RP_ID, "name": "Nimbus"}
    assert options["user"] == {
        "id": b64url(token.split(".")[0].encode()),
        "name": username,
        "displayName": username,
    }
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7, -8, -257]
    assert (options["attestation"], options["excludeCredentials"]) == ("none", [])
    assert options["authenticatorSelection"]["userVerification"] == "preferred"
    assert done.status == 201, done.body
    assert (done.body["type"], done.body["name"], len(done.body["codes"])) == ("webauthn", "YubiKey", 10)
    listed = api.call("GET", "/users/me/2fa", token=token).body
    assert [(f["id"], f["type"]) for f in listed["items"]] == [(done.body["id"], "webauthn")]
    stored = stored_factor(stack, token)
    assert stored["credentialId"]["S"] == b64url(key.credential_id)
    assert stored["publicKey"]["S"] not in str(listed)  # the key never leaves the server


@pytest.mark.parametrize(
    "misbehaviour",
    [
        {"origin": "https://evil.test"},
        {"rp_id": "evil.test"},
        {"challenge": b64url(b"\x01" * 64)},
        {"client_data_type": "webauthn.get"},
        {"user_present": False},
    ],
    ids=["other origin", "other rp id", "other challenge", "assertion type", "user not present"],
)
def test_an_attestation_that_is_not_for_this_enrolment_is_refused(
    api: Api, frozen: Clock, misbehaviour: dict[str, Any]
) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    key = SoftwareAuthenticator()
    misbehaving = key.create(setup, **{"origin": ORIGIN, **misbehaviour})

    refused = confirm(api, token, setup["token"], misbehaving)
    then = confirm(api, token, setup["token"], key.create(setup, origin=ORIGIN))

    assert outcome(refused) == WRONG
    assert then.status == 201, then.body  # a refusal does not use the enrolment up


@pytest.mark.parametrize(
    "response",
    [{}, {"id": "x"}, {"id": "", "rawId": "", "response": {}}, {"id": "AA", "rawId": "AA", "response": []}],
)
def test_malformed_attestations_are_refused_not_errors(api: Api, response: dict[str, Any]) -> None:
    _, token = new_user(api)
    setup = start(api, token).body

    assert outcome(confirm(api, token, setup["token"], response)) == WRONG


def test_the_confirmation_body_is_validated(api: Api) -> None:
    _, token = new_user(api)

    reply = api.call("POST", "/users/me/2fa/webauthn/confirm", {"token": "t", "response": "x"}, token=token)

    assert (reply.status, code(reply)) == (400, "MISSING_FIELDS_ERROR")
    assert sorted(reply.body["fields"]) == ["name", "response"]


def test_an_enrolment_is_single_use_bound_to_its_session_and_kind(api: Api, frozen: Clock) -> None:
    username, token = new_user(api)
    other = api.login(username=username, ip=fresh_ip()).body["token"]
    setup = start(api, token).body
    totp = api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token).body
    key = SoftwareAuthenticator()
    response = key.create(setup, origin=ORIGIN)

    from_elsewhere = confirm(api, other, setup["token"], response)
    with_totp_token = confirm(api, token, totp["token"], response)
    first = confirm(api, token, setup["token"], response)
    replayed = confirm(api, token, setup["token"], response)

    assert outcome(from_elsewhere) == WRONG
    assert outcome(with_totp_token) == WRONG
    assert first.status == 201
    assert outcome(replayed) == WRONG
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 1


def test_an_enrolment_expires_after_ten_minutes(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    response = SoftwareAuthenticator().create(setup, origin=ORIGIN)

    frozen.now = NOW + 601

    assert outcome(confirm(api, token, setup["token"], response)) == WRONG


def test_an_enrolled_key_is_excluded_and_cannot_be_enrolled_twice(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)

    challenge = ask(api, "POST", "/users/me/2fa/webauthn", token)
    setup = answer(
        api,
        "POST",
        "/users/me/2fa/webauthn",
        token,
        challenge,
        key.get(challenge.body["challenge"], origin=ORIGIN),
    ).body

    assert setup["excludeCredentials"] == [{"id": b64url(key.credential_id), "type": "public-key"}]
    with pytest.raises(AuthenticatorRefusedError):
        key.create(setup, origin=ORIGIN)  # a browser refuses, as the options ask
    forced = key.create({**setup, "excludeCredentials": []}, origin=ORIGIN)
    assert outcome(confirm(api, token, setup["token"], forced)) == WRONG
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 1


def test_a_credential_id_enrolled_on_one_account_is_refused_on_every_other_until_removed(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    """A credential id is stored once (CONTRACT section 16): a cloned authenticator, or one whose
    id another account enrolled first, is refused at enrolment, and nothing of it is stored."""
    _, alice = new_user(api)
    _, bob = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, alice, key)
    clone = SoftwareAuthenticator(credential_id=key.credential_id)

    setup = start(api, bob).body
    refused = confirm(api, bob, setup["token"], clone.create(setup, origin=ORIGIN))

    assert outcome(refused) == WRONG
    assert api.call("GET", "/users/me/2fa", token=bob).body["count"] == 0
    claims = [i for i in stack.items("UsersTable") if i["pk"]["S"].startswith("CREDENTIAL#")]
    assert [c["userId"]["S"] for c in claims] == [alice.split(".", maxsplit=1)[0]]
    # Removed from alice's account, the id is free again.
    [factor] = api.call("GET", "/users/me/2fa", token=alice).body["items"]
    challenge = ask(api, "DELETE", f"/users/me/2fa/{factor['id']}", alice)
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    assert answer(api, "DELETE", f"/users/me/2fa/{factor['id']}", alice, challenge, response).status == 200
    enrol(api, bob, clone)
    claims = [i for i in stack.items("UsersTable") if i["pk"]["S"].startswith("CREDENTIAL#")]
    assert [c["userId"]["S"] for c in claims] == [bob.split(".", maxsplit=1)[0]]


def test_deleting_an_account_frees_its_keys_credential_ids(api: Api, frozen: Clock) -> None:
    _, alice = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, alice, key)
    challenge = ask(api, "DELETE", "/users/me", alice)
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    assert answer(api, "DELETE", "/users/me", alice, challenge, response, password=PASSWORD).status == 200

    _, bob = new_user(api)
    enrol(api, bob, SoftwareAuthenticator(credential_id=key.credential_id))


def test_user_verification_is_enforced_when_the_deployment_requires_it(
    api: Api, frozen: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBAUTHN_USER_VERIFICATION", "required")
    get_settings.cache_clear()
    container.reset()
    _, token = new_user(api)
    setup = start(api, token).body
    key = SoftwareAuthenticator()

    unverified = confirm(api, token, setup["token"], key.create(setup, origin=ORIGIN, user_verified=False))
    verified = confirm(api, token, setup["token"], key.create(setup, origin=ORIGIN))
    challenge = ask(api, "PUT", "/users/me/username", token, username="uvcheck")
    no_uv = key.get(challenge.body["challenge"], origin=ORIGIN, user_verified=False)
    refused = answer(api, "PUT", "/users/me/username", token, challenge, no_uv, username="uvcheck")

    assert setup["authenticatorSelection"]["userVerification"] == "required"
    assert challenge.body["challenge"]["userVerification"] == "required"
    assert outcome(unverified) == WRONG
    assert verified.status == 201, verified.body
    assert outcome(refused) == WRONG


def test_a_fault_while_enrolling_leaves_no_half_enrolled_key(api: Api, faults: Faults, frozen: Clock) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    key = SoftwareAuthenticator()
    response = key.create(setup, origin=ORIGIN)

    faults.fail("dynamodb", "TransactWriteItems")
    failed = confirm(api, token, setup["token"], response)
    faults.clear()
    listed = api.call("GET", "/users/me/2fa", token=token).body
    retried = confirm(api, token, setup["token"], response)

    assert failed.status == 500
    assert listed["count"] == 0
    assert retried.status == 201, retried.body  # the enrolment was not used up either


# ---------------------------------------------------------------------------------- challenges answered


def test_a_challenge_offers_the_key_and_its_assertion_completes_the_change(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)

    challenge = ask(api, "PUT", "/users/me/username", token, username="keyed")
    options = challenge.body["challenge"]
    done = answer(
        api, "PUT", "/users/me/username", token, challenge, key.get(options, origin=ORIGIN), username="keyed"
    )

    assert challenge.body["types"] == ["webauthn", "backup"]
    assert options["rpId"] == RP_ID
    assert options["allowCredentials"] == [{"id": b64url(key.credential_id), "type": "public-key"}]
    assert len(options["challenge"]) >= 43  # at least 32 random bytes
    assert done.status == 200, done.body
    assert done.body["username"] == "keyed"
    assert stored_factor(stack, token)["signCount"]["N"] == "1"


def test_a_totp_only_account_gets_no_webauthn_options(api: Api, frozen: Clock) -> None:
    import pyotp

    _, token = new_user(api)
    setup = api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token).body
    body = {"token": setup["token"], "name": "Phone", "code": pyotp.TOTP(setup["secret"]).at(NOW)}
    assert api.call("POST", "/users/me/2fa/totp/confirm", body, token=token).status == 201

    challenge = ask(api, "PUT", "/users/me/username", token, username="nokey")

    assert "challenge" not in challenge.body
    assert challenge.body["types"] == ["totp", "backup"]


def test_a_replayed_assertion_or_an_old_counter_is_refused(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)
    challenge = ask(api, "PUT", "/users/me/username", token, username="rep1")
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    assert answer(api, "PUT", "/users/me/username", token, challenge, response, username="rep1").status == 200

    replayed = answer(api, "PUT", "/users/me/username", token, challenge, response, username="rep2")
    cloned = reverified(api, token, key, sign_count=1)  # a clone still at the counter already seen

    assert outcome(replayed) == WRONG
    assert outcome(cloned) == WRONG
    assert reverified(api, token, key).status == 201  # the real key goes on


def test_a_key_without_a_counter_answers_every_time(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator(counter=False)  # synced passkeys always send 0
    enrol(api, token, key)

    assert [reverified(api, token, key).status for _ in range(3)] == [201, 201, 201]


@pytest.mark.parametrize(
    "misbehaviour",
    [
        {"origin": "https://evil.test"},
        {"rp_id": "evil.test"},
        {"tamper_signature": True},
        {"challenge": b64url(b"\x02" * 64)},
        {"client_data_type": "webauthn.create"},
        {"user_present": False},
        {"cross_origin": True},
        {"top_origin": "https://evil.test"},
    ],
    ids=[
        "other origin",
        "other rp id",
        "bad signature",
        "other challenge",
        "creation type",
        "no presence",
        "in a frame of another page",
        "in a frame of a named page",
    ],
)
def test_an_assertion_that_does_not_prove_the_key_is_refused_and_counted(
    api: Api, frozen: Clock, misbehaviour: dict[str, Any]
) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)

    refused = reverified(api, token, key, **misbehaviour)

    assert outcome(refused) == WRONG
    assert reverified(api, token, key).status == 201  # the counter moved only on success


def test_another_users_key_cannot_answer(api: Api, frozen: Clock) -> None:
    _, victim = new_user(api)
    _, attacker = new_user(api)
    victim_key, attacker_key = SoftwareAuthenticator(), SoftwareAuthenticator()
    enrol(api, victim, victim_key)
    enrol(api, attacker, attacker_key)

    challenge = ask(api, "PUT", "/users/me/username", victim, username="stolen")
    response = attacker_key.get(challenge.body["challenge"], origin=ORIGIN, ignore_allow_credentials=True)
    renamed = answer(api, "PUT", "/users/me/username", victim, challenge, response, username="stolen")
    # The victim's credential id on the attacker's signature.
    claimed = attacker_key.get(
        challenge.body["challenge"],
        origin=ORIGIN,
        credential_id=victim_key.credential_id,
        ignore_allow_credentials=True,
    )
    impersonated = answer(api, "PUT", "/users/me/username", victim, challenge, claimed, username="stolen")

    assert outcome(renamed) == WRONG
    assert outcome(impersonated) == WRONG


@pytest.mark.parametrize("response", [{}, {"id": "AA", "rawId": "AA"}, {"id": 1, "rawId": [1]}])
def test_malformed_assertions_are_wrong_answers(api: Api, frozen: Clock, response: dict[str, Any]) -> None:
    _, token = new_user(api)
    enrol(api, token, SoftwareAuthenticator())
    challenge = ask(api, "PUT", "/users/me/username", token, username="malf")

    assert (
        outcome(answer(api, "PUT", "/users/me/username", token, challenge, response, username="malf"))
        == WRONG
    )


def test_a_webauthn_answer_without_a_response_object_names_the_field(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    enrol(api, token, SoftwareAuthenticator())
    challenge = ask(api, "PUT", "/users/me/username", token, username="nores")

    two_fa = {"token": challenge.body["token"], "type": "webauthn", "code": "123456"}
    reply = api.call("PUT", "/users/me/username", {"username": "nores", "2fa": two_fa}, token=token)

    assert (reply.status, code(reply), reply.body["fields"]) == (
        400,
        "MISSING_FIELDS_ERROR",
        ["2fa.response"],
    )


def test_a_key_logs_in_and_the_login_challenge_carries_its_options(api: Api, frozen: Clock) -> None:
    username, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)

    challenge = ask(api, "POST", "/login", None, username=username)
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    logged_in = answer(api, "POST", "/login", None, challenge, response, username=username, rememberMe=True)

    assert logged_in.status == 201, logged_in.body
    assert api.call("GET", "/users/me", token=logged_in.body["token"]).body["username"] == username


def test_a_login_answered_in_a_frame_of_another_page_is_refused_and_our_own_page_then_logs_in(
    api: Api, frozen: Clock
) -> None:
    username, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)

    answers = []
    for framed in ({"cross_origin": True}, {"top_origin": "https://evil.test"}):
        challenge = ask(api, "POST", "/login", None, username=username)
        response = key.get(challenge.body["challenge"], origin=ORIGIN, **framed)
        answers.append(answer(api, "POST", "/login", None, challenge, response, username=username))
    challenge = ask(api, "POST", "/login", None, username=username)
    own = answer(api, "POST", "/login", None, challenge, key.get(challenge.body["challenge"], origin=ORIGIN))

    assert [outcome(a) for a in answers] == [WRONG, WRONG]
    assert own.status == 201, own.body


def test_a_fault_while_answering_leaves_the_challenge_and_the_counter(
    api: Api, stack: Stack, faults: Faults, frozen: Clock
) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)
    challenge = ask(api, "PUT", "/users/me/username", token, username="flt")
    response = key.get(challenge.body["challenge"], origin=ORIGIN)

    faults.fail("dynamodb", "TransactWriteItems")
    failed = answer(api, "PUT", "/users/me/username", token, challenge, response, username="flt")
    faults.clear()
    count_after_fault = stored_factor(stack, token)["signCount"]["N"]
    retried = answer(api, "PUT", "/users/me/username", token, challenge, response, username="flt")

    assert failed.status == 500
    assert count_after_fault == "0"
    assert retried.status == 200, retried.body


@pytest.fixture
def debug_logs(service_logs: io.StringIO, log_level: Callable[[str], None]) -> io.StringIO:
    """Every line the functions log, with the operator's log level at DEBUG so they log all they can."""
    log_level("DEBUG")
    return service_logs


def test_no_key_material_or_challenge_secret_reaches_the_logs(
    api: Api, stack: Stack, frozen: Clock, debug_logs: io.StringIO
) -> None:
    _, token = new_user(api)
    key = SoftwareAuthenticator()
    enrol(api, token, key)
    challenge = ask(api, "POST", "/users/me/2fa/backup", token)
    refused = reverified(api, token, key, tamper_signature=True)  # a refusal is logged, with its reason
    response = key.get(challenge.body["challenge"], origin=ORIGIN)
    answered = answer(api, "POST", "/users/me/2fa/backup", token, challenge, response)
    # A TOTP app too: its seed, its enrolment token and the codes shown once.
    totp = ask(api, "POST", "/users/me/2fa/totp", token)
    totp_setup = answer(
        api, "POST", "/users/me/2fa/totp", token, totp, key.get(totp.body["challenge"], origin=ORIGIN)
    ).body
    body = {"token": totp_setup["token"], "name": "Phone", "code": pyotp.TOTP(totp_setup["secret"]).at(NOW)}
    confirmed = api.call("POST", "/users/me/2fa/totp/confirm", body, token=token)

    logged = debug_logs.getvalue()
    assert (outcome(refused), answered.status, confirmed.status) == (WRONG, 201, 201)
    assert "WebAuthn answer refused" in logged  # the logs were captured
    assert stored_factor(stack, token)["publicKey"]["S"] not in logged
    assert challenge.body["token"].split(".")[1] not in logged
    assert response["response"]["signature"] not in logged
    secrets = [totp_setup["secret"], totp_setup["token"], *answered.body["codes"], token.split(".")[2]]
    assert [s for s in secrets if s in logged] == []


def test_the_client_librarys_trailing_slash_starts_an_enrolment(api: Api) -> None:
    _, token = new_user(api)

    # cumulonimbus-wrapper 5.1.0's beginWebAuthnRegistration posts to "/users/me/2fa/webauthn/".
    reply = api.call("POST", "/users/me/2fa/webauthn/", {"password": PASSWORD}, token=token)

    assert (reply.status, reply.body["type"]) == (200, "webauthn")
