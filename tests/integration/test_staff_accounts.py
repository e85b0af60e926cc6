"""Staff operations on other accounts through the API (CONTRACT sections 3, 4, 8 and 13)."""

from __future__ import annotations

import html
import io
import itertools
import json
from collections.abc import Callable
from typing import Any

import pyotp
import pytest

from nimbus_core.platform.clock import iso
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import NOW, Api, Clock, Faults, Stack
from tests.staff import promote

PASSWORD = "correct horse"
NEW_PASSWORD = "a brand new password"
_ips = itertools.count(1)


def code(reply: Reply) -> str:
    return str(reply.body.get("code"))


def fresh_ip() -> str:
    n = next(_ips)
    return f"10.77.{n // 250 % 250}.{n % 250 + 1}"


def new_user(api: Api, prefix: str = "u") -> tuple[str, str, str]:
    """A registered user: (id, username, token)."""
    username = f"{prefix}{new_id()[-10:].lower()}"
    reply = api.register(username=username, ip=fresh_ip())
    assert reply.status == 201, reply.body
    token = str(reply.body["token"])
    return token.split(".", maxsplit=1)[0], username, token


class Staff:
    """A staff member with a TOTP factor, answering their own challenges (each at a new time step)."""

    def __init__(self, api: Api, stack: Stack, frozen: Clock) -> None:
        self.api, self.frozen = api, frozen
        self.id, self.username, self.token = new_user(api, "staff")
        secret = promote(stack.dynamodb, stack.table("UsersTable"), self.id, sealer=stack.sealer)
        assert secret is not None
        self.totp = pyotp.TOTP(secret)
        self.step = 0

    def next_step(self) -> None:
        """Move to the next TOTP time step (a code is accepted once)."""
        self.step += 1
        self.frozen.now = NOW + 30 * self.step

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Reply:
        """A staff request without reverification."""
        return self.api.call(method, path, body, token=self.token, ip=fresh_ip())

    def reverified(self, method: str, path: str, **body: Any) -> Reply:
        """The request with the staff member's password, then the TOTP answer to its challenge."""
        first = self.api.call(method, path, {**body, "password": PASSWORD}, token=self.token, ip=fresh_ip())
        if first.status != 401 or code(first) != "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR":
            return first
        self.next_step()
        answer = {"token": first.body["token"], "type": "totp", "code": self.totp.at(self.frozen.now)}
        return self.api.call(method, path, {**body, "2fa": answer}, token=self.token, ip=fresh_ip())


@pytest.fixture
def staff(api: Api, stack: Stack, frozen: Clock) -> Staff:
    return Staff(api, stack, frozen)


# ------------------------------------------------------------------------------------ reading users


def test_the_user_list_is_newest_first_and_counts_every_user(api: Api, staff: Staff) -> None:
    made = [new_user(api)[0] for _ in range(3)]

    everyone = staff.call("GET", "/users")
    page = staff.call("GET", "/users?limit=2&offset=1")
    empty = staff.call("GET", "/users?limit=0")

    assert everyone.status == 200, everyone.body
    assert [u["id"] for u in everyone.body["items"]] == [*reversed(made), staff.id]
    assert everyone.body["count"] == 4
    assert set(everyone.body["items"][0]) == {
        "id", "username", "email", "staff", "domain", "subdomain", "verifiedAt", "bannedAt", "banReason",
        "twoFactorBackupCodeUsedAt", "createdAt", "updatedAt",
    }  # fmt: skip
    assert "passwordHash" not in json.dumps(everyone.body)
    assert (page.body["count"], [u["id"] for u in page.body["items"]]) == (4, [made[1], made[0]])
    assert empty.body == {"count": 4, "items": []}


@pytest.mark.parametrize(
    "offset", ["4", "10001", "2147483648", "9223372036854775807", "99999999999999999999999"]
)
def test_an_offset_past_every_user_is_an_empty_page_however_large(
    api: Api, staff: Staff, offset: str
) -> None:
    new_user(api)

    beyond = staff.call("GET", f"/users?offset={offset}&limit=9223372036854775807")

    assert (beyond.status, beyond.body) == (200, {"count": 2, "items": []})


def test_a_deep_offset_past_every_user_reads_only_the_count(api: Api, staff: Staff, faults: Faults) -> None:
    """No Query of the list index for an offset the count shows is past every user: with every
    Query failing, the answer is still the empty page."""
    new_user(api)
    faults.fail("dynamodb", "Query")

    beyond = staff.call("GET", "/users?offset=1000000000000")
    near = staff.call("GET", "/users?offset=1")

    assert (beyond.status, beyond.body) == (200, {"count": 2, "items": []})
    assert near.status == 500  # a shallow offset does query: the fault is real


def test_the_count_stays_exact_through_deletions(api: Api, staff: Staff) -> None:
    gone, _, _ = new_user(api)
    kept, _, _ = new_user(api)

    deleted = staff.reverified("DELETE", f"/users/{gone}")
    listed = staff.call("GET", "/users")

    assert deleted.status == 200, deleted.body
    assert (listed.body["count"], [u["id"] for u in listed.body["items"]]) == (2, [kept, staff.id])


def test_staff_read_one_user_and_an_unknown_id_is_404(api: Api, staff: Staff) -> None:
    uid, username, _ = new_user(api)

    one = staff.call("GET", f"/users/{uid}")
    unknown = staff.call("GET", f"/users/{new_id()}")
    malformed = staff.call("GET", "/users/not-an-id")

    assert (one.status, one.body["id"], one.body["username"]) == (200, uid, username)
    assert (unknown.status, code(unknown)) == (404, "INVALID_USER_ERROR")
    assert (malformed.status, code(malformed)) == (404, "INVALID_USER_ERROR")


def test_non_staff_and_staff_without_a_factor_are_refused(api: Api, stack: Stack) -> None:
    uid, _, token = new_user(api)
    lax_id, _, lax = new_user(api)
    promote(stack.dynamodb, stack.table("UsersTable"), lax_id, with_factor=False)

    as_user = api.call("GET", f"/users/{uid}", token=token)
    as_lax_staff = api.call("GET", f"/users/{uid}", token=lax)
    anonymous = api.call("GET", "/users")

    assert (as_user.status, code(as_user)) == (403, "INSUFFICIENT_PERMISSIONS_ERROR")
    assert (as_lax_staff.status, code(as_lax_staff)) == (401, "ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR")
    assert (anonymous.status, code(anonymous)) == (401, "INVALID_SESSION_ERROR")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/users/{id}/username", {"username": "someone_else"}),
        ("PUT", "/users/{id}/ban", {"reason": "spam"}),
        ("DELETE", "/users/{id}", {}),
        ("PUT", "/users/{id}/staff", {}),
    ],
)
def test_an_unknown_user_is_404_only_after_the_staff_reverification(
    staff: Staff, method: str, path: str, body: dict[str, Any]
) -> None:
    target = path.format(id=new_id())

    without_password = staff.call(method, target, body)
    reverified = staff.reverified(method, target, **body)

    assert (without_password.status, code(without_password)) == (400, "MISSING_FIELDS_ERROR")
    assert without_password.body["fields"] == ["password"]
    assert (reverified.status, code(reverified)) == (404, "INVALID_USER_ERROR")


# ------------------------------------------------------------------------------------ changing users


def test_staff_rename_a_user_and_a_taken_name_is_409(api: Api, staff: Staff) -> None:
    uid, _, token = new_user(api)
    _, taken, _ = new_user(api)

    renamed = staff.reverified("PUT", f"/users/{uid}/username", username="Renamed_By_Staff")
    conflict = staff.reverified("PUT", f"/users/{uid}/username", username=taken.upper())

    assert (renamed.status, renamed.body["username"]) == (200, "Renamed_By_Staff")
    assert (conflict.status, code(conflict)) == (409, "USER_EXISTS_ERROR")
    assert api.call("GET", "/users/me", token=token).body["username"] == "Renamed_By_Staff"


def test_a_staff_email_change_makes_the_address_unverified_and_mails_it(
    api: Api, stack: Stack, staff: Staff
) -> None:
    uid, _, _ = new_user(api)
    assert staff.reverified("PUT", f"/users/{uid}/verify").status == 200

    changed = staff.reverified("PUT", f"/users/{uid}/email", email="moved@example.com")

    assert changed.status == 200, changed.body
    assert (changed.body["email"], changed.body["verifiedAt"]) == ("moved@example.com", None)
    mailed = [m for m in stack.emails if m["to"] == ["moved@example.com"]]
    assert len(mailed) == 1
    assert "/verify?token=" in mailed[0]["text"]


def test_a_staff_password_set_revokes_every_session_of_the_user(api: Api, staff: Staff) -> None:
    uid, username, token = new_user(api)
    other = api.login(username=username, ip=fresh_ip()).body["token"]

    done = staff.reverified(
        "PUT", f"/users/{uid}/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )

    assert done.status == 200, done.body
    for revoked in (token, other):
        assert code(api.call("GET", "/users/me", token=revoked)) == "INVALID_SESSION_ERROR"
    assert api.login(username=username, ip=fresh_ip()).status == 401  # the old password
    assert api.login(username=username, password=NEW_PASSWORD, ip=fresh_ip()).status == 201
    assert staff.call("GET", "/users/me").status == 200  # the staff member's own session is untouched


def test_a_staff_password_set_checks_the_confirmation_first(api: Api, staff: Staff) -> None:
    uid, _, _ = new_user(api)

    mismatch = staff.call(
        "PUT", f"/users/{uid}/password", {"newPassword": NEW_PASSWORD, "confirmNewPassword": "x"}
    )
    short = staff.call(
        "PUT", f"/users/{uid}/password", {"newPassword": "short", "confirmNewPassword": "short"}
    )

    assert (mismatch.status, code(mismatch)) == (400, "PASSWORDS_DO_NOT_MATCH_ERROR")
    assert (short.status, code(short), short.body["fields"]) == (400, "INVALID_FIELDS_ERROR", ["newPassword"])


def test_staff_change_a_users_domain_without_reverifying(api: Api, staff: Staff) -> None:
    uid, _, _ = new_user(api)

    changed = staff.call("PUT", f"/users/{uid}/domain", {"domain": "NIMBUS.TEST"})
    unknown = staff.call("PUT", f"/users/{uid}/domain", {"domain": "elsewhere.test"})

    assert (changed.status, changed.body["domain"]) == (200, "nimbus.test")
    assert (unknown.status, code(unknown)) == (404, "INVALID_DOMAIN_ERROR")


def test_verify_and_unverify_answer_the_contracts_errors(api: Api, stack: Stack, staff: Staff) -> None:
    uid, _, token = new_user(api)
    link = stack.emails[-1]["text"].split("token=")[1].split()[0]

    unverify_unverified = staff.reverified("DELETE", f"/users/{uid}/verify")
    verified = staff.reverified("PUT", f"/users/{uid}/verify")
    again = staff.reverified("PUT", f"/users/{uid}/verify")
    resend_verified = staff.call("GET", f"/users/{uid}/verify")
    old_link = api.call("PUT", "/users/verify", {"token": link})
    unverified = staff.reverified("DELETE", f"/users/{uid}/verify")
    resent = staff.call("GET", f"/users/{uid}/verify")

    assert (unverify_unverified.status, code(unverify_unverified)) == (400, "EMAIL_NOT_VERIFIED_ERROR")
    assert verified.status == 200
    assert verified.body["verifiedAt"] is not None
    assert (again.status, code(again)) == (400, "EMAIL_ALREADY_VERIFIED_ERROR")
    assert (resend_verified.status, code(resend_verified)) == (400, "EMAIL_ALREADY_VERIFIED_ERROR")
    assert (old_link.status, code(old_link)) == (400, "INVALID_VERIFICATION_TOKEN_ERROR")  # consumed
    assert (unverified.status, unverified.body["verifiedAt"]) == (200, None)
    assert (resent.status, code(resent)) == (201, "SEND_VERIFICATION_EMAIL_SUCCESS")
    assert api.call("GET", "/users/me", token=token).body["verifiedAt"] is None


def test_promotion_requires_a_second_factor_on_the_target(api: Api, stack: Stack, staff: Staff) -> None:
    uid, _, _ = new_user(api)
    with_factor, _, _ = new_user(api)
    promote(stack.dynamodb, stack.table("UsersTable"), with_factor, sealer=stack.sealer)
    stack.dynamodb.update_item(  # a user with a factor who is not staff (yet)
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{with_factor}"}},
        UpdateExpression="SET staff = :f",
        ExpressionAttributeValues={":f": {"BOOL": False}},
    )

    refused = staff.reverified("PUT", f"/users/{uid}/staff")
    promoted = staff.reverified("PUT", f"/users/{with_factor}/staff")
    demoted = staff.reverified("DELETE", f"/users/{with_factor}/staff")

    assert (refused.status, code(refused)) == (400, "USER_REQUIRES_SECOND_FACTOR_ERROR")
    assert (promoted.status, promoted.body["staff"]) == (200, True)
    assert (demoted.status, demoted.body["staff"]) == (200, False)
    assert staff.call("GET", f"/users/{uid}").body["staff"] is False


# ------------------------------------------------------------------------------------ bans


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, ("MISSING_FIELDS_ERROR", ["reason"])),
        ({"reason": None}, ("MISSING_FIELDS_ERROR", ["reason"])),
        ({"reason": 42}, ("MISSING_FIELDS_ERROR", ["reason"])),
        ({"reason": "   "}, ("INVALID_FIELDS_ERROR", ["reason"])),
        ({"reason": "x" * 513}, ("INVALID_FIELDS_ERROR", ["reason"])),
        ({"reason": "forged\u202eline"}, ("INVALID_FIELDS_ERROR", ["reason"])),
    ],
)
def test_a_ban_reason_is_1_to_512_readable_characters(
    api: Api, staff: Staff, body: dict[str, Any], expected: tuple[str, list[str]]
) -> None:
    uid, _, _ = new_user(api)

    refused = staff.call("PUT", f"/users/{uid}/ban", {**body, "password": PASSWORD})

    assert (refused.status, code(refused), refused.body["fields"]) == (400, *expected)


def test_a_ban_revokes_every_session_mails_a_notice_and_blocks_login_after_the_password(
    api: Api, stack: Stack, staff: Staff
) -> None:
    uid, username, token = new_user(api)
    link = stack.emails[-1]["text"].split("token=")[1].split()[0]
    other = api.login(username=username, ip=fresh_ip()).body["token"]
    # Holds verification mail, never a ban notice (switched through the API: it keeps the SES recorder).
    assert staff.reverified("PUT", "/killswitches/3").status == 200
    reason = "<script>alert('spam')</script> & more   "

    banned = staff.reverified("PUT", f"/users/{uid}/ban", reason=reason)

    assert banned.status == 200, banned.body
    assert banned.body["banReason"] == reason.strip()
    assert banned.body["bannedAt"] is not None
    for revoked in (token, other):
        assert code(api.call("GET", "/users/me", token=revoked)) == "INVALID_SESSION_ERROR"
    [notice] = [m for m in stack.emails if m["subject"] == "Your account has been banned"]
    assert reason.strip() in notice["text"]
    assert "<script>" not in notice["html"]
    assert html.escape(reason.strip()) in notice["html"]
    assert staff.reverified("DELETE", "/killswitches/3").status == 200
    wrong = api.login(username=username, password="not the password", ip=fresh_ip())
    right = api.login(username=username, ip=fresh_ip())
    assert (wrong.status, code(wrong)) == (401, "INVALID_PASSWORD_ERROR")  # nothing revealed
    assert (right.status, code(right)) == (403, "BANNED_ERROR")
    verify = api.call("PUT", "/users/verify", {"token": link})
    assert (verify.status, code(verify)) == (403, "BANNED_ERROR")
    assert staff.call("GET", f"/users/{uid}").body["banReason"] == reason.strip()


def test_an_unban_restores_login(api: Api, staff: Staff) -> None:
    uid, username, _ = new_user(api)
    assert staff.reverified("PUT", f"/users/{uid}/ban", reason="spam").status == 200

    lifted = staff.reverified("DELETE", f"/users/{uid}/ban")

    assert (lifted.status, lifted.body["bannedAt"], lifted.body["banReason"]) == (200, None, None)
    assert api.login(username=username, ip=fresh_ip()).status == 201


def test_a_ban_with_the_same_reason_again_changes_nothing_and_mails_nothing(
    api: Api, stack: Stack, staff: Staff
) -> None:
    uid, _, _ = new_user(api)
    first = staff.reverified("PUT", f"/users/{uid}/ban", reason="spam")
    sent = len(stack.emails)

    again = staff.reverified("PUT", f"/users/{uid}/ban", reason="spam")

    assert again.body == first.body
    assert len(stack.emails) == sent


# ------------------------------------------------------------------------------------ deletion


def _everything_of(stack: Stack, user_id: str, email: str) -> dict[str, int]:
    users = [
        i for i in stack.items("UsersTable") if user_id in json.dumps(i) or email.lower() in json.dumps(i)
    ]
    sessions = [i for i in stack.items("SessionsTable") if i["userId"]["S"] == user_id]
    # Known devices stay until their TTL, inert: bound to an id no later account has.
    tokens = [
        i
        for i in stack.items("TokensTable")
        if i.get("userId", {}).get("S") == user_id and i["kind"]["S"] != "device"
    ]
    mail = [i for i in stack.messages() if i.get("userId", {}).get("S") == user_id]
    return {"users": len(users), "sessions": len(sessions), "tokens": len(tokens), "mail": len(mail)}


def test_deleting_a_user_removes_everything_of_theirs(api: Api, stack: Stack, staff: Staff) -> None:
    uid, username, token = new_user(api)
    api.login(username=username, ip=fresh_ip())
    email = f"{username}@example.com"
    promote(
        stack.dynamodb, stack.table("UsersTable"), uid, sealer=stack.sealer
    )  # a second factor (upstream failed here)
    assert _everything_of(stack, uid, email)["mail"] == 1  # the verification email, kept for replay

    deleted = staff.reverified("DELETE", f"/users/{uid}")
    stack.sweep()

    assert (deleted.status, code(deleted)) == (200, "DELETE_USER_SUCCESS")
    assert _everything_of(stack, uid, email) == {"users": 0, "sessions": 0, "tokens": 0, "mail": 0}
    assert code(api.call("GET", "/users/me", token=token)) == "INVALID_SESSION_ERROR"
    again = api.register(username=username, ip=fresh_ip())
    assert again.status == 201, again.body  # the name and address are free again
    assert code(staff.reverified("DELETE", f"/users/{uid}")) == "INVALID_USER_ERROR"


def test_bulk_deletion_skips_unknown_ids_and_counts_what_it_deleted(api: Api, staff: Staff) -> None:
    ids = [new_user(api)[0] for _ in range(3)]

    deleted = staff.reverified("DELETE", "/users", ids=[*ids, new_id(), "not-an-id", ids[0]])
    again = staff.reverified("DELETE", "/users", ids=ids)
    too_many = staff.call("DELETE", "/users", {"ids": [new_id() for _ in range(51)], "password": PASSWORD})

    assert (deleted.status, code(deleted), deleted.body["count"]) == (200, "DELETE_USERS_SUCCESS", 3)
    assert again.body["count"] == 0
    assert (too_many.status, code(too_many)) == (400, "BODY_TOO_LARGE_ERROR")
    assert staff.call("GET", "/users").body["count"] == 1


def test_a_bulk_deletion_interrupted_by_a_fault_resumes_where_it_stopped(
    api: Api, staff: Staff, faults: Faults
) -> None:
    ids = [new_user(api)[0] for _ in range(4)]
    first = staff.api.call("DELETE", "/users", {"ids": ids, "password": PASSWORD}, token=staff.token)
    assert code(first) == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR"
    staff.next_step()
    answer = {"token": first.body["token"], "type": "totp", "code": staff.totp.at(staff.frozen.now)}
    faults.fail("dynamodb", "TransactWriteItems", after=2)  # two users go, then the store fails

    failed = api.call("DELETE", "/users", {"ids": ids, "2fa": answer}, token=staff.token)
    faults.clear()
    listed = staff.call("GET", "/users")
    resumed = staff.reverified("DELETE", "/users", ids=ids)

    assert failed.status == 500
    assert listed.body["count"] == 3  # two deleted, nothing half-deleted: the staff member + two users
    assert (resumed.status, resumed.body["count"]) == (200, 2)
    assert staff.call("GET", "/users").body["count"] == 1


# ------------------------------------------------------------------------------------ the audit trail


def _audit_lines(output: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [line["audit"] for line in lines if "audit" in line]


def test_changes_to_another_account_leave_an_audit_line_without_secrets(
    api: Api, staff: Staff, service_logs: io.StringIO, log_level: Callable[[str], None]
) -> None:
    uid, _, _ = new_user(api)
    log_level("NONE")  # even at NONE
    start = len(service_logs.getvalue())  # what was logged before (registration, at INFO)
    staff.reverified(
        "PUT", f"/users/{uid}/password", newPassword=NEW_PASSWORD, confirmNewPassword=NEW_PASSWORD
    )
    staff.call("GET", f"/users/{uid}")  # a read: no audit line
    api.register(username=f"quiet{new_id()[-8:].lower()}", ip=fresh_ip())  # logs "user registered" at INFO
    output = service_logs.getvalue()[start:]

    lines = _audit_lines(output)
    assert [(a["action"], a["status"]) for a in lines] == [
        ("PUT /users/<id>/password", 401),  # the challenge
        ("PUT /users/<id>/password", 200),
    ]
    done = lines[-1]
    assert (done["actor"], done["target"], done["at"]) == (staff.id, {"id": uid}, iso(staff.frozen.now))
    assert done["actorSession"]
    assert done["sourceIp"]
    assert NEW_PASSWORD not in output
    assert PASSWORD not in output
    assert "user registered" not in output  # NONE silenced everything else
