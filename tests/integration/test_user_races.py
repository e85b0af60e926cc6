"""Changes of one user that land inside another request's read-then-write window, on moto through
the API: deletion deletes the claims the user holds when it commits, a rename that finds its read
stale is rebuilt (never a 409 for a free name), and every new spelling of an address is verified."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nimbus_core.accounts import account_changes, notices
from nimbus_core.adapters import clients, container
from tests.integration.conftest import NOW, Api, Clock, Stack
from tests.integration.test_second_factor_challenge import enrol_totp, totp_now
from tests.integration.test_self_service import PASSWORD, code, links, new_user, put
from tests.integration.test_staff_accounts import Staff, staff  # noqa: F401 (the fixture)
from tests.invariants import users_table_violations

LONG_S_SAM = "\u017fam@example.com"  # LATIN SMALL LETTER LONG S: casefolds to "sam@example.com"


def commit_of_a_concurrent_request(user_id: str, field: str, value: str) -> Callable[[], Any]:
    """The commit of another request of the same user that authenticated before this one deleted
    its other sessions: built from its own read, made through the production stores."""

    def commit() -> Any:
        deps = container.production_deps()
        user = deps.users.get(user_id)
        assert user is not None
        if field == "username":
            return account_changes.rename(deps, user, value, time.time())
        return account_changes.change_email(deps, user, value, time.time(), actor=notices.STAFF)

    return commit


@contextmanager
def before_next_transaction(action: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``action`` once, just before the next TransactWriteItems is sent: after the request
    read the user, before its write commits (the window two concurrent requests share)."""
    done: list[Any] = []

    def interleave(**_: Any) -> None:
        if not done:
            done.append(None)  # first: the action's own transaction must not trigger it again
            done.append(action())

    events = clients.dynamodb().meta.events
    events.register("before-call.dynamodb.TransactWriteItems", interleave)
    try:
        yield done
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", interleave)


def _me(api: Api, token: str) -> dict[str, Any]:
    reply = api.call("GET", "/users/me", token=token)
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def _free(api: Api, username: str, email: str) -> None:
    """The name and the address can be registered again: no claim outlived its user."""
    again = api.register(username=username, email=email, ip="192.0.2.200")
    assert again.status == 201, again.body


def test_a_rename_inside_a_self_deletion_leaves_the_new_name_free(api: Api, stack: Stack) -> None:
    username, token = new_user(api)
    user_id = _me(api, token)["id"]

    with before_next_transaction(commit_of_a_concurrent_request(user_id, "username", "moved_on")) as done:
        deleted = api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token)

    assert done[1].username == "moved_on"  # the rename committed first
    assert deleted.status == 200, deleted.body
    _free(api, "moved_on", f"{username}@example.com")


def test_an_address_change_inside_a_self_deletion_leaves_the_new_address_free(api: Api) -> None:
    username, token = new_user(api)
    user_id = _me(api, token)["id"]

    with before_next_transaction(
        commit_of_a_concurrent_request(user_id, "email", "moved@example.org")
    ) as done:
        deleted = api.call("DELETE", "/users/me", {"password": PASSWORD}, token=token)

    assert done[1].email == "moved@example.org"
    assert deleted.status == 200, deleted.body
    _free(api, username, "moved@example.org")


def test_a_rename_inside_a_staff_deletion_leaves_the_new_name_free(api: Api, staff: Staff) -> None:  # noqa: F811
    username, token = new_user(api)
    user_id = _me(api, token)["id"]

    def rename() -> Any:
        return put(api, "/users/me/username", token, {"username": "staff_raced", "password": PASSWORD})

    first = staff.api.call("DELETE", f"/users/{user_id}", {"password": PASSWORD}, token=staff.token)
    assert code(first) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", first.body
    staff.next_step()
    answer = {"token": first.body["token"], "type": "totp", "code": staff.totp.at(staff.frozen.now)}
    with before_next_transaction(rename) as done:
        deleted = staff.api.call("DELETE", f"/users/{user_id}", {"2fa": answer}, token=staff.token)

    assert done[1].status == 200, done[1].body
    assert deleted.status == 200, deleted.body
    _free(api, "staff_raced", f"{username}@example.com")


def test_a_rename_from_a_stale_read_is_rebuilt_not_refused_as_a_taken_name(api: Api) -> None:
    username, token = new_user(api)
    second = api.login(username, password=PASSWORD, ip="192.0.2.9").body["token"]

    with before_next_transaction(
        lambda: put(api, "/users/me/username", second, {"username": "got_there_first", "password": PASSWORD})
    ) as done:
        renamed = put(api, "/users/me/username", token, {"username": "free_name", "password": PASSWORD})

    assert done[1].status == 200, done[1].body
    assert renamed.status == 200, renamed.body
    assert _me(api, token)["username"] == "free_name"
    _free(api, "got_there_first", "someone_else@example.com")  # the first rename's claim was released
    refused = api.register(username="free_name", email="third@example.com", ip="192.0.2.201")
    assert (refused.status, code(refused)) == (409, "USER_EXISTS_ERROR")


def test_a_rename_racing_a_deletion_that_commits_first_answers_invalid_session(api: Api) -> None:
    username, token = new_user(api)
    second = api.login(username, password=PASSWORD, ip="192.0.2.9").body["token"]

    with before_next_transaction(
        lambda: api.call("DELETE", "/users/me", {"password": PASSWORD}, token=second)
    ) as done:
        renamed = put(api, "/users/me/username", token, {"username": "too_late", "password": PASSWORD})

    assert done[1].status == 200, done[1].body
    assert (renamed.status, code(renamed)) == (401, "INVALID_SESSION_ERROR")
    _free(api, "too_late", f"{username}@example.com")


def test_another_spelling_of_the_address_starts_unverified_and_is_mailed(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    put(api, "/users/me/email", token, {"email": "sam@example.com", "password": PASSWORD})
    verified = api.call("PUT", "/users/verify", {"token": links(stack, "sam@example.com")[-1]})
    assert verified.status == 200, verified.body
    assert _me(api, token)["verifiedAt"] is not None

    for spelling in (LONG_S_SAM, "SAM@example.com"):  # casefold-equal: the same claim
        changed = put(api, "/users/me/email", token, {"email": spelling, "password": PASSWORD})

        assert changed.status == 200, changed.body
        assert (changed.body["email"], changed.body["verifiedAt"]) == (spelling, None)
        assert len(links(stack, spelling)) == 1
    again = api.call("PUT", "/users/verify", {"token": links(stack, LONG_S_SAM)[-1]})
    assert (again.status, code(again)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")  # bound to its address


def test_the_identical_address_is_no_change_and_keeps_its_verification(api: Api, stack: Stack) -> None:
    _, token = new_user(api)
    put(api, "/users/me/email", token, {"email": "same@example.com", "password": PASSWORD})
    api.call("PUT", "/users/verify", {"token": links(stack, "same@example.com")[-1]})

    unchanged = put(api, "/users/me/email", token, {"email": "same@example.com", "password": PASSWORD})

    assert unchanged.status == 200, unchanged.body
    assert unchanged.body["verifiedAt"] is not None
    assert len(links(stack, "same@example.com")) == 1


def test_staff_giving_another_spelling_of_the_address_unverifies_and_mails_it(
    api: Api,
    stack: Stack,
    staff: Staff,  # noqa: F811
) -> None:
    _, token = new_user(api)
    user_id = _me(api, token)["id"]
    put(api, "/users/me/email", token, {"email": "strasse@example.com", "password": PASSWORD})
    api.call("PUT", "/users/verify", {"token": links(stack, "strasse@example.com")[-1]})

    changed = staff.reverified("PUT", f"/users/{user_id}/email", email="STRASSE@example.com")

    assert changed.status == 200, changed.body
    assert changed.body["verifiedAt"] is None
    assert len(links(stack, "STRASSE@example.com")) == 1


def test_a_challenged_rename_that_goes_stale_is_rebuilt_and_spends_its_answer_once(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    user_id = _me(api, token)["id"]
    secret = enrol_totp(stack, token)
    challenge = put(api, "/users/me/username", token, {"username": "answered", "password": PASSWORD})
    assert code(challenge) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", challenge.body
    answer = {"token": challenge.body["token"], "type": "totp", "code": totp_now(secret, NOW)}

    with before_next_transaction(commit_of_a_concurrent_request(user_id, "username", "someone")):
        done = put(api, "/users/me/username", token, {"username": "answered", "2fa": answer})
    replayed = put(api, "/users/me/username", token, {"username": "replayed", "2fa": answer})

    assert done.status == 200, done.body
    assert (replayed.status, code(replayed)) == (401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR")
    assert _me(api, token)["username"] == "answered"


def test_staff_renaming_a_user_deleted_meanwhile_get_invalid_user(api: Api, staff: Staff) -> None:  # noqa: F811
    _, token = new_user(api)
    user_id = _me(api, token)["id"]

    def deleted() -> Any:
        deps = container.production_deps()
        user = deps.users.get(user_id)
        assert user is not None
        return account_changes.delete_user(deps, user)

    first = staff.api.call(
        "PUT", f"/users/{user_id}/username", {"username": "late", "password": PASSWORD}, token=staff.token
    )
    staff.next_step()
    answer = {"token": first.body["token"], "type": "totp", "code": staff.totp.at(staff.frozen.now)}
    with before_next_transaction(deleted):
        renamed = staff.api.call(
            "PUT", f"/users/{user_id}/username", {"username": "late", "2fa": answer}, token=staff.token
        )

    assert (renamed.status, code(renamed)) == (404, "INVALID_USER_ERROR")


@pytest.fixture(autouse=True)
def _users_table_invariants(stack: Stack) -> Iterator[None]:
    """After every race here, the users table is whole (tests/invariants.py)."""
    yield
    assert users_table_violations(stack.dynamodb, stack.table("UsersTable")) == []


def test_the_invariant_checker_names_an_orphan_claim_a_lost_claim_and_a_wrong_count(
    api: Api, stack: Stack
) -> None:
    _, token = new_user(api)
    user_id = _me(api, token)["id"]
    table = stack.table("UsersTable")
    stack.dynamodb.put_item(TableName=table, Item={"pk": {"S": "USERNAME#ghost"}, "userId": {"S": "nobody"}})
    stack.dynamodb.delete_item(
        TableName=table, Key={"pk": {"S": f"EMAIL#{_me(api, token)['email'].lower()}"}}
    )
    stack.dynamodb.put_item(TableName=table, Item={"pk": {"S": "USERCOUNT#15"}, "users": {"N": "5"}})

    found = users_table_violations(stack.dynamodb, table)

    assert "USERNAME#ghost names user nobody, who does not exist" in found
    assert any(f"user {user_id} does not hold its email claim" in f for f in found)
    assert any(f.startswith("the user count says") for f in found)
    stack.truncate()  # leave the table whole for the fixture's own check
