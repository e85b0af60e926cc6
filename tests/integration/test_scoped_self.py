"""A scoped session never deletes its own account, removes its own factors, or changes its own
account's password or address, whichever path it takes: staff scopes on the staff endpoints reach
other accounts only (CONTRACT section 8)."""

from __future__ import annotations

import pytest

from nimbus_core.adapters.items import from_item
from nimbus_core.domain.scopes import Scope
from nimbus_core.platform.ids import new_id
from tests.integration.conftest import PARAMS, Api, Stack
from tests.integration.test_self_service import code, new_user, scoped_token
from tests.integration.test_staff_accounts import Staff, staff  # noqa: F401 (the fixture)

STAFF_SCOPES = [Scope.STAFF_MODIFY_ACCOUNTS | Scope.STAFF_MODIFY_SECOND_FACTORS, Scope.ALL]


def _own_paths(staff: Staff) -> list[tuple[str, str, dict[str, object] | None]]:  # noqa: F811
    factor_id = next(iter(_factors(staff)))
    return [
        ("DELETE", f"/users/{staff.id}", None),
        ("DELETE", "/users", {"ids": [staff.id]}),
        ("DELETE", f"/users/{staff.id}/2fa/{factor_id}", None),
        ("DELETE", f"/users/{staff.id}/2fa", {"ids": [factor_id]}),
        ("DELETE", f"/users/{staff.id}/2fa/all", None),
    ]


def _factors(staff: Staff) -> list[str]:  # noqa: F811
    listed = staff.call("GET", "/users/me/2fa")
    assert listed.status == 200, listed.body
    return [item["id"] for item in listed.body["items"]]


@pytest.mark.parametrize("flags", STAFF_SCOPES, ids=["staff scopes", "ALL"])
def test_a_scoped_session_cannot_delete_its_own_account_or_factors_through_staff_paths(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    flags: int,
) -> None:
    scoped = scoped_token(stack, staff.token, int(flags))
    factors = _factors(staff)

    for method, path, body in _own_paths(staff):
        reply = api.call(method, path, body, token=scoped)

        assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR"), (method, path)
    assert _factors(staff) == factors
    assert staff.call("GET", "/users/me").status == 200


def test_a_bulk_delete_naming_the_caller_among_others_deletes_nobody(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
) -> None:
    other, _ = new_user(api)
    other_id = api.login(other, ip="192.0.2.77").body["token"].split(".")[0]
    scoped = scoped_token(stack, staff.token, int(Scope.STAFF_MODIFY_ACCOUNTS))

    reply = api.call("DELETE", "/users", {"ids": [other_id, staff.id]}, token=scoped)

    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert staff.call("GET", f"/users/{other_id}").status == 200


def test_staff_scopes_still_reach_other_accounts(api: Api, stack: Stack, staff: Staff) -> None:  # noqa: F811
    other, _ = new_user(api)
    other_id = api.login(other, ip="192.0.2.78").body["token"].split(".")[0]
    scoped = scoped_token(stack, staff.token, int(Scope.STAFF_MODIFY_ACCOUNTS))

    reply = api.call("DELETE", "/users", {"ids": [other_id]}, token=scoped)

    assert (reply.status, reply.body.get("count")) == (200, 1)


# ---------------------------------------------- the password and the address of an API key's own account

NEW_PASSWORD = "a brand new password"
_CHANGES: dict[str, dict[str, object]] = {
    "password": {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD},
    "email": {"email": "taken.over@example.org"},
}
ACCOUNT_KEYS = [Scope.ACCOUNT_MODIFY, Scope.ALL, Scope.ALL | Scope.ACCOUNT_MODIFY | Scope.SESSION_MODIFY]


def _account(stack: Stack, user_id: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The stored user item (password hash, address, verification, pending links, generation) and
    the outbox messages about the user: what a refused change must leave as it was."""
    [item] = [from_item(i) for i in stack.items("UsersTable") if i["pk"]["S"] == f"USER#{user_id}"]
    mail = [m for m in map(from_item, stack.messages()) if m.get("userId") == user_id]
    return item, mail


@pytest.mark.parametrize("flags", ACCOUNT_KEYS, ids=["ACCOUNT_MODIFY", "ALL", "ALL and more"])
@pytest.mark.parametrize("field", ["password", "email"])
def test_an_api_key_never_changes_the_password_or_address_of_its_account(
    api: Api, stack: Stack, field: str, flags: int
) -> None:
    username, token = new_user(api)
    user_id = token.split(".")[0]
    key = scoped_token(stack, token, int(flags))
    before = _account(stack, user_id)

    reply = api.call("PUT", f"/users/me/{field}", _CHANGES[field], token=key)

    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert _account(stack, user_id) == before
    assert api.login(username).status == 201  # the password it had


@pytest.mark.parametrize("flags", STAFF_SCOPES, ids=["staff scopes", "ALL"])
@pytest.mark.parametrize("field", ["password", "email"])
def test_a_staff_key_never_changes_its_own_password_or_address_through_the_staff_paths(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    field: str,
    flags: int,
) -> None:
    key = scoped_token(stack, staff.token, int(flags))
    before = _account(stack, staff.id)

    reply = api.call("PUT", f"/users/{staff.id}/{field}", _CHANGES[field], token=key)

    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert _account(stack, staff.id) == before
    # The password it had still proves itself: the second-factor challenge follows only a right one.
    assert code(api.login(staff.username)) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
    assert staff.call("GET", "/users/me").status == 200  # the staff member's own session lives


@pytest.mark.parametrize("field", ["password", "email"])
def test_a_staff_key_is_refused_its_own_account_at_the_scope_step_before_the_body_is_read(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    field: str,
) -> None:
    """CONTRACT section 4: the path names the account, so the refusal is step 5's, ahead of step 6
    (a body missing every field) and of the endpoint's own 404 rules."""
    key = scoped_token(stack, staff.token, int(Scope.STAFF_MODIFY_ACCOUNTS))

    reply = api.call("PUT", f"/users/{staff.id}/{field}", {}, token=key)

    assert (reply.status, code(reply)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")


@pytest.mark.parametrize("field", ["password", "email"])
def test_a_staff_key_still_changes_the_password_and_address_of_other_users(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    field: str,
) -> None:
    other, token = new_user(api)
    other_id = token.split(".")[0]
    key = scoped_token(stack, staff.token, int(Scope.STAFF_MODIFY_ACCOUNTS))

    reply = api.call("PUT", f"/users/{other_id}/{field}", _CHANGES[field], token=key)

    assert reply.status == 200, reply.body
    if field == "password":
        assert api.login(other, password=NEW_PASSWORD).status == 201
    else:
        assert reply.body["email"] == _CHANGES["email"]["email"]


def test_an_api_key_with_account_modify_still_changes_the_username_and_the_domain(
    api: Api, stack: Stack
) -> None:
    _, token = new_user(api)
    key = scoped_token(stack, token, int(Scope.ACCOUNT_MODIFY))

    renamed = api.call("PUT", "/users/me/username", {"username": f"k{new_id()[-10:].lower()}"}, token=key)
    moved = api.call("PUT", "/users/me/domain", {"domain": PARAMS["DefaultDomain"]}, token=key)

    assert (renamed.status, moved.status) == (200, 200), (renamed.body, moved.body)
