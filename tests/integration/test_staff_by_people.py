"""Staff is granted and changed by people, never by keys (CONTRACT section 8): a leaked staff key,
whatever its scopes, neither raises an account its thief holds to staff nor takes a staff account
(its own or another staff member's) by its password, address, second factors or verification. The
two chains a leaked key with STAFF_MODIFY_ACCOUNTS once completed, each cut at its first step:

- through a new account: the key grants staff to an account its thief holds, whose normal session
  then removes the key owner's factors and sets their password;
- through another staff member: the key gives that member's account the thief's address, and the
  recovery link that then arrives there opens a staff account.

The same key still does its work on accounts that are not staff."""

from __future__ import annotations

import pytest

from nimbus_core.domain.scopes import Scope
from tests.integration.conftest import Api, Stack
from tests.integration.test_self_service import scoped_token
from tests.integration.test_staff_accounts import NEW_PASSWORD, Staff, code, fresh_ip, new_user, staff  # noqa: F401
from tests.staff import promote

REFUSED = (403, "INSUFFICIENT_PERMISSIONS_ERROR")
STAFF_KEYS = [
    Scope.STAFF_MODIFY_ACCOUNTS,
    Scope.STAFF_MODIFY_ACCOUNTS | Scope.STAFF_MODIFY_SECOND_FACTORS | Scope.STAFF_READ_SECOND_FACTORS,
    Scope.ALL,
]
KEY_IDS = ["STAFF_MODIFY_ACCOUNTS", "every staff scope it needs", "ALL"]


def _staff_member(api: Api, stack: Stack) -> str:
    """Another staff member (with a second factor, as staff need): their id."""
    member_id, _, _ = new_user(api, "colleague")
    promote(stack.dynamodb, stack.table("UsersTable"), member_id, sealer=stack.sealer)
    return member_id


def _outcome(
    api: Api, method: str, path: str, key: str, body: dict[str, object] | None = None
) -> tuple[int, str]:
    reply = api.call(method, path, body, token=key, ip=fresh_ip())
    return reply.status, code(reply)


@pytest.mark.parametrize("flags", STAFF_KEYS, ids=KEY_IDS)
def test_a_staff_key_never_grants_or_removes_staff(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    flags: int,
) -> None:
    key = scoped_token(stack, staff.token, int(flags))
    thief_id, _, thief_token = new_user(api)
    # A second factor of its own (staff needs one), so that only the key's rule decides.
    promote(stack.dynamodb, stack.table("UsersTable"), thief_id, sealer=stack.sealer)
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{thief_id}"}},
        UpdateExpression="REMOVE staff",
    )
    colleague_id = _staff_member(api, stack)

    assert _outcome(api, "PUT", f"/users/{thief_id}/staff", key) == REFUSED
    assert _outcome(api, "DELETE", f"/users/{colleague_id}/staff", key) == REFUSED
    assert staff.call("GET", f"/users/{thief_id}").body["staff"] is False
    assert staff.call("GET", f"/users/{colleague_id}").body["staff"] is True
    assert api.call("GET", "/users", token=thief_token, ip=fresh_ip()).status == 403


@pytest.mark.parametrize("flags", STAFF_KEYS, ids=KEY_IDS)
def test_a_staff_key_never_takes_a_staff_account_its_own_or_another_members(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
    flags: int,
) -> None:
    key = scoped_token(stack, staff.token, int(flags))
    colleague_id = _staff_member(api, stack)
    before = staff.call("GET", f"/users/{colleague_id}").body
    password: dict[str, object] = {"newPassword": NEW_PASSWORD, "confirmNewPassword": NEW_PASSWORD}

    for account in (colleague_id, staff.id):
        assert _outcome(api, "PUT", f"/users/{account}/email", key, {"email": "thief@example.com"}) == REFUSED
        assert _outcome(api, "PUT", f"/users/{account}/password", key, password) == REFUSED
        assert _outcome(api, "PUT", f"/users/{account}/verify", key) == REFUSED
        assert _outcome(api, "DELETE", f"/users/{account}/verify", key) == REFUSED
        assert _outcome(api, "DELETE", f"/users/{account}/2fa/all", key) == REFUSED
        assert _outcome(api, "DELETE", f"/users/{account}/2fa", key, {"ids": ["x"]}) == REFUSED
    assert staff.call("GET", f"/users/{colleague_id}").body == before
    assert staff.call("GET", "/users/me/2fa").body["count"] == 1


def test_the_same_key_still_changes_an_account_that_is_not_staff(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
) -> None:
    key = scoped_token(stack, staff.token, int(Scope.STAFF_MODIFY_ACCOUNTS))
    user_id, _, _ = new_user(api)

    changed = api.call(
        "PUT", f"/users/{user_id}/email", {"email": "new@example.com"}, token=key, ip=fresh_ip()
    )

    assert changed.status == 200, changed.body
    assert changed.body["email"] == "new@example.com"
