"""Enrolling and managing one's own second factors through the API."""

from __future__ import annotations

import itertools
from typing import Any

import pyotp
import pytest

from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import NOW, Api, Clock, Stack
from tests.staff import promote

PASSWORD = "correct horse"
_ips = itertools.count(1)


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def fresh_ip() -> str:
    n = next(_ips)
    return f"10.88.{n // 250 % 250}.{n % 250 + 1}"


def new_user(api: Api) -> tuple[str, str]:
    username = f"sf{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=fresh_ip())
    assert reply.status == 201, reply.body
    return username, str(reply.body["token"])


def start(api: Api, token: str) -> Reply:
    return api.call("POST", "/users/me/2fa/totp", {"password": PASSWORD}, token=token)


def confirm(api: Api, token: str, setup: dict[str, Any], at: float, name: str = "Phone") -> Reply:
    body = {"token": setup["token"], "name": name, "code": pyotp.TOTP(setup["secret"]).at(at)}
    return api.call("POST", "/users/me/2fa/totp/confirm", body, token=token)


def challenged(api: Api, method: str, path: str, token: str, secret: str, at: float, **body: Any) -> Reply:
    first = api.call(method, path, {**body, "password": PASSWORD}, token=token, ip=fresh_ip())
    assert first.status == 401, first.body
    answer = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(secret).at(at)}
    return api.call(method, path, {**body, "2fa": answer}, token=token, ip=fresh_ip())


def test_totp_enrolment_shows_the_seed_once_and_confirms_with_a_code(api: Api, frozen: Clock) -> None:
    username, token = new_user(api)

    setup = start(api, token)

    assert setup.status == 200, setup.body
    body = setup.body
    assert (body["type"], body["digits"], body["algorithm"], body["period"]) == ("totp", 6, "SHA1", 30)
    assert body["exp"] == int(NOW) + 600
    assert body["uri"].startswith(f"otpauth://totp/Nimbus:{username}?secret={body['secret']}")
    done = confirm(api, token, body, NOW)
    assert done.status == 201, done.body
    assert (done.body["type"], done.body["name"]) == ("totp", "Phone")
    assert len(done.body["codes"]) == 10
    listed = api.call("GET", "/users/me/2fa", token=token).body
    assert listed["count"] == 1
    assert body["secret"] not in str(listed)
    assert set(listed["items"][0]) == {"id", "type", "name", "passkey", "usedAt", "createdAt", "updatedAt"}
    assert api.call("GET", f"/users/me/2fa/{done.body['id']}", token=token).body["id"] == done.body["id"]


def test_a_pending_enrolment_is_single_use_bound_to_its_session_and_expires(api: Api, frozen: Clock) -> None:
    username, token = new_user(api)
    other = api.login(username=username, ip=fresh_ip()).body["token"]
    setup = start(api, token).body

    from_elsewhere = confirm(api, other, setup, NOW)
    wrong_code = api.call(
        "POST",
        "/users/me/2fa/totp/confirm",
        {"token": setup["token"], "name": "x", "code": "12345"},
        token=token,
    )
    frozen.now = NOW + 601
    too_late = confirm(api, token, setup, NOW + 601)

    assert (from_elsewhere.status, code(from_elsewhere)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert (wrong_code.status, code(wrong_code)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert (too_late.status, code(too_late)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 0


def test_a_confirmed_enrolment_cannot_be_confirmed_again(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    assert confirm(api, token, setup, NOW).status == 201

    frozen.now = NOW + 30
    again = confirm(api, token, setup, NOW + 30)

    assert (again.status, code(again)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 1


def test_a_second_factor_enrolment_needs_the_first_one_and_keeps_the_codes(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    first = start(api, token).body
    assert confirm(api, token, first, NOW).status == 201

    frozen.now = NOW + 30
    second_setup = challenged(api, "POST", "/users/me/2fa/totp", token, first["secret"], NOW + 30)
    assert second_setup.status == 200, second_setup.body
    second = confirm(api, token, second_setup.body, NOW + 30, name="Tablet")

    assert second.status == 201
    assert "codes" not in second.body  # the first set is still there
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 2


def test_backup_codes_are_regenerated_only_for_a_user_with_a_factor(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    refused = api.call("POST", "/users/me/2fa/backup", {"password": PASSWORD}, token=token)
    setup = start(api, token).body
    old_codes = confirm(api, token, setup, NOW).body["codes"]

    frozen.now = NOW + 30
    fresh = challenged(api, "POST", "/users/me/2fa/backup", token, setup["secret"], NOW + 30)

    assert (refused.status, code(refused)) == (400, "USER_REQUIRES_SECOND_FACTOR_ERROR")
    assert fresh.status == 201
    assert len(fresh.body["codes"]) == 10
    assert not set(fresh.body["codes"]) & set(old_codes)


def test_removing_every_factor_removes_the_backup_codes_and_the_challenge(api: Api, frozen: Clock) -> None:
    username, token = new_user(api)
    setup = start(api, token).body
    factor = confirm(api, token, setup, NOW).body

    frozen.now = NOW + 30
    removed = challenged(api, "DELETE", "/users/me/2fa/all", token, setup["secret"], NOW + 30)

    assert (removed.status, removed.body["count"]) == (200, 1)
    assert api.call("GET", f"/users/me/2fa/{factor['id']}", token=token).status == 404
    assert api.login(username=username, ip=fresh_ip()).status == 201  # no challenge any more


def test_bulk_removal_skips_unknown_ids_and_refuses_more_than_fifty(api: Api, frozen: Clock) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    factor = confirm(api, token, setup, NOW).body

    too_many = api.call("DELETE", "/users/me/2fa", {"ids": ["x"] * 51, "password": PASSWORD}, token=token)
    frozen.now = NOW + 30
    removed = challenged(
        api, "DELETE", "/users/me/2fa", token, setup["secret"], NOW + 30, ids=[factor["id"], new_id(), "nope"]
    )

    assert (too_many.status, code(too_many)) == (400, "BODY_TOO_LARGE_ERROR")
    assert (removed.status, removed.body["count"]) == (200, 1)


def test_a_user_sees_and_removes_only_their_own_factors(api: Api, frozen: Clock) -> None:
    _, owner = new_user(api)
    _, other = new_user(api)
    factor = confirm(api, owner, start(api, owner).body, NOW).body

    seen = api.call("GET", f"/users/me/2fa/{factor['id']}", token=other)
    removed = api.call("DELETE", f"/users/me/2fa/{factor['id']}", {"password": PASSWORD}, token=other)

    assert (seen.status, code(seen)) == (404, "INVALID_SECOND_FACTOR_ERROR")
    assert (removed.status, code(removed)) == (404, "INVALID_SECOND_FACTOR_ERROR")
    assert api.call("GET", "/users/me/2fa", token=owner).body["count"] == 1


@pytest.mark.parametrize("flags", [16, 1])
def test_scoped_sessions_read_factors_but_never_enrol_or_remove(api: Api, flags: int) -> None:
    _, token = new_user(api)
    key = api.call(
        "POST",
        "/users/me/sessions",
        {"name": "k", "permissionFlags": flags, "password": PASSWORD},
        token=token,
        ip=fresh_ip(),
    ).body["token"]

    assert api.call("GET", "/users/me/2fa", token=key).status == 200
    for method, path in (
        ("POST", "/users/me/2fa/totp"),
        ("POST", "/users/me/2fa/backup"),
        ("DELETE", "/users/me/2fa/all"),
    ):
        reply = api.call(method, path, {}, token=key)
        assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR"), path


def test_deleting_the_account_removes_its_factors(api: Api, stack: Stack, frozen: Clock) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    confirm(api, token, setup, NOW)

    frozen.now = NOW + 30
    deleted = challenged(api, "DELETE", "/users/me", token, setup["secret"], NOW + 30)

    assert deleted.status == 200, deleted.body
    user_id = token.split(".", maxsplit=1)[0]
    assert [i for i in stack.items("UsersTable") if i["pk"]["S"] == f"USER#{user_id}"] == []


# ---------------------------------------------------------------------------------------- staff variants


def staff_user(api: Api, stack: Stack) -> tuple[str, str]:
    """A staff caller with a TOTP factor (staff endpoints require one): (token, seed)."""
    _, token = new_user(api)
    secret = promote(stack.dynamodb, stack.table("UsersTable"), token.split(".")[0], sealer=stack.sealer)
    assert secret is not None
    return token, secret


def with_factor(api: Api) -> tuple[str, str, dict[str, Any]]:
    """A user with a TOTP factor: (their user id, token, the factor)."""
    _, token = new_user(api)
    factor = confirm(api, token, start(api, token).body, NOW).body
    return token.split(".")[0], token, factor


def test_staff_read_a_users_factors_with_their_scope(api: Api, stack: Stack, frozen: Clock) -> None:
    staff, _ = staff_user(api, stack)
    uid, _, factor = with_factor(api)

    listed = api.call("GET", f"/users/{uid}/2fa", token=staff)
    one = api.call("GET", f"/users/{uid}/2fa/{factor['id']}", token=staff)
    unknown_user = api.call("GET", f"/users/{new_id()}/2fa", token=staff)
    unknown_factor = api.call("GET", f"/users/{uid}/2fa/{new_id()}", token=staff)

    assert (listed.status, [f["id"] for f in listed.body["items"]]) == (200, [factor["id"]])
    assert set(listed.body["items"][0]) == {
        "id",
        "type",
        "name",
        "passkey",
        "usedAt",
        "createdAt",
        "updatedAt",
    }
    assert (one.status, one.body["id"]) == (200, factor["id"])
    assert (unknown_user.status, code(unknown_user)) == (404, "INVALID_USER_ERROR")
    assert (unknown_factor.status, code(unknown_factor)) == (404, "INVALID_SECOND_FACTOR_ERROR")


def test_staff_remove_a_users_factors_after_answering_their_own_challenge(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    staff, secret = staff_user(api, stack)
    uid, token, factor = with_factor(api)
    _, _, other = with_factor(api)  # another user's factor is not this user's

    frozen.now = NOW + 30
    foreign = challenged(api, "DELETE", f"/users/{uid}/2fa/{other['id']}", staff, secret, NOW + 30)
    frozen.now = NOW + 60
    removed = challenged(api, "DELETE", f"/users/{uid}/2fa/{factor['id']}", staff, secret, NOW + 60)

    assert (foreign.status, code(foreign)) == (404, "INVALID_SECOND_FACTOR_ERROR")
    assert (removed.status, code(removed)) == (200, "DELETE_SECOND_FACTOR_SUCCESS")
    assert api.call("GET", "/users/me/2fa", token=token).body["count"] == 0


def test_staff_bulk_and_total_removal_count_what_they_removed(api: Api, stack: Stack, frozen: Clock) -> None:
    staff, secret = staff_user(api, stack)
    uid, _, factor = with_factor(api)
    uid2, token2, _ = with_factor(api)

    frozen.now = NOW + 30
    bulk = challenged(
        api, "DELETE", f"/users/{uid}/2fa", staff, secret, NOW + 30, ids=[factor["id"], new_id()]
    )
    frozen.now = NOW + 60
    everything = challenged(api, "DELETE", f"/users/{uid2}/2fa/all", staff, secret, NOW + 60)

    assert (bulk.status, bulk.body["count"]) == (200, 1)
    assert (everything.status, everything.body["count"]) == (200, 1)
    assert api.call("GET", "/users/me/2fa", token=token2).body["count"] == 0


def test_an_unknown_user_is_404_only_after_the_staff_reverification(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    staff, secret = staff_user(api, stack)

    without_password = api.call("DELETE", f"/users/{new_id()}/2fa/all", {}, token=staff)
    frozen.now = NOW + 30
    after_challenge = challenged(api, "DELETE", f"/users/{new_id()}/2fa/all", staff, secret, NOW + 30)

    assert (without_password.status, code(without_password)) == (400, "MISSING_FIELDS_ERROR")
    assert (after_challenge.status, code(after_challenge)) == (404, "INVALID_USER_ERROR")


def test_non_staff_cannot_use_the_staff_variants(api: Api, frozen: Clock) -> None:
    uid, _, factor = with_factor(api)
    _, caller = new_user(api)

    for method, path in (
        ("GET", f"/users/{uid}/2fa"),
        ("GET", f"/users/{uid}/2fa/{factor['id']}"),
        ("DELETE", f"/users/{uid}/2fa/{factor['id']}"),
        ("DELETE", f"/users/{uid}/2fa"),
        ("DELETE", f"/users/{uid}/2fa/all"),
    ):
        reply = api.call(method, path, {"password": PASSWORD, "ids": []}, token=caller)
        assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR"), path


def test_a_factor_s_used_at_is_null_until_it_answers_a_challenge_then_the_latest_answer(
    api: Api, frozen: Clock
) -> None:
    username, token = new_user(api)
    setup = start(api, token).body
    factor_id = confirm(api, token, setup, NOW).body["id"]

    def used_at() -> Any:
        return api.call("GET", f"/users/me/2fa/{factor_id}", token=token).body["usedAt"]

    assert used_at() is None  # the confirmation's code is no challenge answer
    assert api.call("GET", "/users/me/2fa", token=token).body["items"][0]["usedAt"] is None

    frozen.now = NOW + 60
    first = api.login(username=username, ip=fresh_ip())
    assert code(first) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
    answer = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(setup["secret"]).at(NOW + 60)}
    assert api.call("POST", "/login", {"2fa": answer}, ip=fresh_ip()).status == 201
    assert used_at() == "2027-01-15T08:01:00.250Z"

    frozen.now = NOW + 120  # a reverified change answers the next challenge
    renamed = challenged(
        api, "PUT", "/users/me/username", token, setup["secret"], NOW + 120, username="sf_used"
    )
    assert renamed.status == 200, renamed.body
    assert used_at() == "2027-01-15T08:02:00.250Z"
