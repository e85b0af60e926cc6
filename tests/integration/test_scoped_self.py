"""A scoped session never deletes its own account or removes its own factors, whichever path it
takes: staff scopes on the staff endpoints reach other accounts only."""

from __future__ import annotations

import pytest

from nimbus_core.scopes import Scope
from tests.integration.conftest import Api, Stack
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
