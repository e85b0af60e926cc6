"""TOTP seeds sealed under the stack's KMS key (moto's KMS, the key created from template.yaml): no
table, index or pending enrolment holds a seed in the clear, and sign-in with a code works; seeds
stored in plaintext by releases before sealing keep working."""

from __future__ import annotations

import json
from typing import Any

import pyotp

from nimbus_core.adapters.items import from_item
from nimbus_tools.template import local_key_arn
from tests.integration.conftest import NOW, Api, Clock, Stack
from tests.integration.test_second_factors import confirm, fresh_ip, new_user, start
from tests.staff import promote


def _everything(stack: Stack) -> str:
    """Every item of every table, and of the login lookups, as one text to search."""
    found: list[Any] = [stack.items(t) for t in ("UsersTable", "TokensTable", "OutboxTable", "SessionsTable")]
    return json.dumps(found)


def _lookups(stack: Stack, username: str) -> list[dict[str, Any]]:
    """The user's entries in the login lookups, as login's Query reads them."""
    entries = []
    for index, attr, key in (
        ("UsernameLookup", "usernameKey", username.lower()),
        ("EmailLookup", "emailKey", f"{username}@example.com"),
    ):
        entries += stack.dynamodb.query(
            TableName=stack.table("UsersTable"),
            IndexName=index,
            KeyConditionExpression="#k = :k",
            ExpressionAttributeNames={"#k": attr},
            ExpressionAttributeValues={":k": {"S": key}},
        )["Items"]
    return entries


def _login_with_code(api: Api, username: str, secret: str, at: float) -> Any:
    first = api.login(username=username, ip=fresh_ip())
    assert first.status == 401, first.body
    answer = {"token": first.body["token"], "type": "totp", "code": pyotp.TOTP(secret).at(at)}
    return api.call("POST", "/login", {"username": username, "2fa": answer}, ip=fresh_ip())


def test_an_enrolled_seed_is_stored_sealed_nowhere_in_the_clear_and_signs_in(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    username, token = new_user(api)
    setup = start(api, token).body
    seed = setup["secret"]
    assert seed not in _everything(stack), "the pending enrolment holds the seed in the clear"

    done = confirm(api, token, setup, NOW)
    assert done.status == 201, done.body

    assert seed not in _everything(stack)
    [user] = [from_item(i) for i in stack.items("UsersTable") if i["pk"]["S"].startswith("USER#")]
    sealed = user[f"totpSecret#{done.body['id']}"]
    assert sealed.startswith("kms1.")
    assert stack.sealer.sealed_with(sealed) == local_key_arn("TotpKey")
    assert "secret" not in user["secondFactors"][done.body["id"]]
    entries = _lookups(stack, username)
    assert len(entries) == 2
    assert all(not any(a.startswith("totpSecret#") for a in e) for e in entries)
    assert seed not in json.dumps(entries)

    frozen.now = NOW + 60  # a later time step: the enrolment's code is used up
    signed_in = _login_with_code(api, username, seed, frozen.now)
    assert signed_in.status == 201, signed_in.body


def test_a_plaintext_seed_stored_before_sealing_still_signs_in(api: Api, stack: Stack, frozen: Clock) -> None:
    username, token = new_user(api)
    uid = token.split(".")[0]
    seed = promote(stack.dynamodb, stack.table("UsersTable"), uid)  # the shape of older releases
    assert seed is not None
    assert seed in _everything(stack)

    signed_in = _login_with_code(api, username, seed, NOW)
    assert signed_in.status == 201, signed_in.body


def test_a_sealed_seed_copied_onto_another_user_does_not_sign_them_in(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, victim = new_user(api)
    thief_name, thief = new_user(api)
    setup = start(api, victim).body
    done = confirm(api, victim, setup, NOW)
    assert done.status == 201, done.body
    theirs = stack.dynamodb.get_item(
        TableName=stack.table("UsersTable"), Key={"pk": {"S": f"USER#{victim.split('.')[0]}"}}
    )
    sealed = theirs["Item"][f"totpSecret#{done.body['id']}"]
    # The thief, able to write the table, gives their own account the victim's factor and sealed seed.
    stack.dynamodb.update_item(
        TableName=stack.table("UsersTable"),
        Key={"pk": {"S": f"USER#{thief.split('.')[0]}"}},
        UpdateExpression="SET secondFactors.#f = :f, #s = :s",
        ExpressionAttributeNames={"#f": done.body["id"], "#s": f"totpSecret#{done.body['id']}"},
        ExpressionAttributeValues={":f": theirs["Item"]["secondFactors"]["M"][done.body["id"]], ":s": sealed},
    )

    frozen.now = NOW + 60
    refused = _login_with_code(api, thief_name, setup["secret"], frozen.now)
    assert refused.status == 401, refused.body
    assert refused.body["code"] == "INVALID_SECOND_FACTOR_RESPONSE_ERROR"
