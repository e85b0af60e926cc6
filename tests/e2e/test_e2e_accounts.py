"""Register, read the emailed link, log in and use the session, over HTTP."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from nimbus_tools.local.control import read_mail
from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip, new_name
from tests.e2e.conftest import Client, run_cli, with_totp

VERIFY_LINK = r"http://localhost:\d+/console/verify\?token=[0-9A-Z]{26}\.[A-Za-z0-9_-]{43}"


def _user_id(token: str) -> str:
    return token.split(".", maxsplit=1)[0]


def test_register_login_and_read_me_over_http(client: Client, local_api: LocalApiProcess) -> None:
    name = new_name("Alice")
    registered = client.register(name)
    assert registered.status == 201, registered.body
    assert set(registered.body) == {"token", "exp", "device"}
    assert registered.headers["Cache-Control"] == "no-store"
    assert registered.headers["Content-Type"] == "application/json"
    assert registered.headers["RateLimit-Limit"] == "1"

    by_email = client.login(f"{name.upper()}@EXAMPLE.COM")
    assert by_email.status == 201, by_email.body
    me = client.call("GET", "/users/me", token=by_email.body["token"])
    assert me.status == 200
    assert me.body["username"] == name
    assert me.body["verifiedAt"] is None


def test_verification_link_is_captured_and_listed_by_the_operator_tool(
    client: Client, local_api: LocalApiProcess
) -> None:
    name = new_name()
    assert client.register(name).status == 201
    address = f"{name}@example.com"
    mails: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5  # the mail function sends it from the outbox stream
    while not mails and time.monotonic() < deadline:
        time.sleep(0.2)
        mails = [m for m in read_mail(local_api.aws_endpoint_url) if address in m["to"]]
    assert len(mails) == 1
    link = re.search(VERIFY_LINK, mails[0]["text"])
    assert link, mails[0]["text"]
    assert link.group(0) in mails[0]["html"]

    listed = run_cli(local_api, "mail", "list", "--to", address)
    assert listed.returncode == 0, listed.stderr
    assert link.group(0) in listed.stdout
    as_json = run_cli(local_api, "mail", "list", "--to", address, "--json")
    assert [m["subject"] for m in json.loads(as_json.stdout)] == ["Verify your email address"]


def test_revoked_session_is_refused_on_the_next_request(client: Client, dynamodb: Any) -> None:
    token = client.register(new_name()).body["token"]
    assert client.call("GET", "/users/me", token=token).status == 200
    user_id, session_id, _ = token.split(".")
    dynamodb.delete_item(
        TableName="SessionsTable", Key={"userId": {"S": user_id}, "sessionId": {"S": session_id}}
    )
    refused = client.call("GET", "/users/me", token=token)
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")


def test_expired_session_is_refused_although_ttl_has_not_removed_it(client: Client, dynamodb: Any) -> None:
    token = client.register(new_name()).body["token"]
    user_id, session_id, _ = token.split(".")
    dynamodb.update_item(
        TableName="SessionsTable",
        Key={"userId": {"S": user_id}, "sessionId": {"S": session_id}},
        UpdateExpression="SET #e = :past",
        ExpressionAttributeNames={"#e": "exp"},
        ExpressionAttributeValues={":past": {"N": "1000"}},
    )
    refused = client.call("GET", "/users/me", token=token)
    assert (refused.status, refused.body["code"]) == (401, "INVALID_SESSION_ERROR")


def test_bad_bodies_get_their_contract_errors_never_a_500(client: Client) -> None:
    cases: list[tuple[bytes, str]] = [
        (b"not json", "INVALID_BODY_ERROR"),
        (b"[1,2,3]", "INVALID_BODY_ERROR"),
        (b'{"username": "\xff\xfe"}', "INVALID_BODY_ERROR"),
        (b'{"username": "\\ud800", "email": "a@b.io", "password": "12345678"}', "INVALID_BODY_ERROR"),
        (b"[" * 50_000, "INVALID_BODY_ERROR"),
        (b'{"username": 5, "email": null}', "MISSING_FIELDS_ERROR"),
        (
            b'{"username": "' + b"a" * 65 + b'", "email": "a@b.io", "password": "12345678"}',
            "INVALID_USERNAME_ERROR",
        ),
        (
            json.dumps({"username": "\u202eevil", "email": "a@b.io", "password": "12345678"}).encode(),
            "INVALID_USERNAME_ERROR",
        ),
        (b'{"username": "ok_name", "email": "not-an-email", "password": "12345678"}', "INVALID_EMAIL_ERROR"),
        (b'{"username": "ok_name", "email": "a@b.io", "password": "short"}', "INVALID_FIELDS_ERROR"),
    ]
    for raw, code in cases:
        reply = client.call("POST", "/register", raw=raw, ip=new_ip())
        assert (reply.status, reply.body["code"]) == (400, code), raw[:60]


def test_unknown_routes_answer_json_404_and_trailing_slashes_are_tolerated(client: Client) -> None:
    for method, path in [("GET", "/nope"), ("GET", "/login"), ("PATCH", "/users/me"), ("PUT", "/")]:
        reply = client.call(method, path)
        assert (reply.status, reply.body["code"]) == (404, "INVALID_ENDPOINT_ERROR"), (method, path)
        assert reply.headers["Content-Type"] == "application/json"
    token = client.register(new_name()).body["token"]
    assert client.call("GET", "/users/me/", token=token).status == 200


def test_unknown_methods_reach_the_default_route_and_answer_json_404(client: Client) -> None:
    for method, path in [("FOO", "/"), ("TRACE", "/"), ("PROPFIND", "/users/me")]:
        reply = client.call(method, path)
        assert (reply.status, reply.body) == (
            404,
            {"code": "INVALID_ENDPOINT_ERROR", "message": "Invalid Endpoint"},
        ), method
        assert reply.headers["Content-Type"] == "application/json"
        assert reply.headers["Cache-Control"] == "no-store"


def test_source_ip_comes_from_the_socket_not_from_forwarding_headers(client: Client) -> None:
    ip = new_ip()
    assert client.register(new_name(), ip=ip).status == 201
    spoofed = client.call(
        "POST",
        "/register",
        {"username": new_name(), "email": f"{new_name()}@example.com", "password": "12345678"},
        headers={"X-Forwarded-For": "192.0.2.99", "X-Real-IP": "192.0.2.99"},
        ip=ip,
    )
    assert spoofed.status == 429


def test_one_log_line_per_request(client: Client, local_api: LocalApiProcess) -> None:
    before = len(local_api.request_lines())
    for _ in range(3):
        client.call("GET", "/")
    assert local_api.wait_for(lambda: len(local_api.request_lines()) >= before + 3, timeout=10)
    last = local_api.request_lines()[-1]
    assert (last["method"], last["path"], last["status"], last["function"]) == (
        "GET",
        "/",
        "200",
        "AdminFunction",
    )


# Values no list reaches, of every size a client can send: past DynamoDB's 32-bit Limit, the largest
# 64-bit integer (the one that once answered 500), and past any integer type.
HUGE = ("2147483648", "9223372036854775807", "99999999999999999999999")


def test_every_list_answers_an_offset_or_limit_past_any_list_with_a_page_never_a_500(
    client: Client, local_api: LocalApiProcess
) -> None:
    staff_name, staff_token, _, _ = with_totp(client)
    assert run_cli(local_api, "staff", "promote", staff_name).returncode == 0
    staff_id = staff_token.split(".", maxsplit=1)[0]
    lists = ["/domains", "/users/me/sessions", f"/users/{staff_id}/sessions", "/users/me/2fa"]
    lists += [f"/users/{staff_id}/2fa", "/users"]

    for path in lists:
        whole = client.call("GET", path, token=staff_token)
        assert whole.status == 200, (path, whole.body)
        for huge in HUGE:
            beyond = client.call("GET", f"{path}?offset={huge}", token=staff_token)
            assert (beyond.status, beyond.body) == (200, {"count": whole.body["count"], "items": []}), path
            for limit in (huge, f"-{huge}"):
                page = client.call("GET", f"{path}?limit={limit}", token=staff_token)
                assert (page.status, page.body) == (200, whole.body), (path, limit)
