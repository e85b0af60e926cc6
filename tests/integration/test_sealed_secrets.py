"""TOTP seeds sealed under the stack's KMS key (moto's KMS, the key created from template.yaml): no
table, index or pending enrolment holds a seed in the clear, and sign-in with a code works; seeds
stored in plaintext by releases before sealing keep working."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pyotp

from nimbus_core.adapters.items import from_item
from nimbus_core.adapters.sealing import Sealer
from nimbus_tools.cli.main import build_parser, run
from nimbus_tools.cli.reseal import reseal
from nimbus_tools.cli.target import Target
from nimbus_tools.template import local_key_arn, parameter_values
from tests.integration.conftest import NOW, PARAMS, REGION, Api, Clock, Stack, fresh_aws
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


def test_a_seed_the_tests_seal_after_the_stack_was_provisioned_again_signs_in(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    """Another test on the worker may wipe moto (``fresh_aws``); the stack provisioned again has a
    new TOTP key under the same id, so the tests' sealer must not reuse a data key of the old one."""
    stack.sealer.seal("JBSWY3DPEHPK3PXP", user_id="warm", factor_id="warm")  # a data key made
    with fresh_aws():
        pass
    stack.ensure_provisioned()
    stack.truncate()
    username, token = new_user(api)
    seed = promote(stack.dynamodb, stack.table("UsersTable"), token.split(".")[0], sealer=stack.sealer)
    assert seed is not None

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


class _Stack(Target):
    """The in-process stack as `nimbus` sees a deployed one, whose sealing can run a concurrent
    change right before its first write (``meanwhile``)."""

    meanwhile: Callable[[], None] | None = None

    def sealer(self, key_id: str | None = None) -> Sealer:
        real = super().sealer(key_id)
        target = self

        class Racing(Sealer):
            def seal(self, secret: str, *, user_id: str, factor_id: str) -> str:
                sealed = real.seal(secret, user_id=user_id, factor_id=factor_id)
                if target.meanwhile is not None:
                    change, target.meanwhile = target.meanwhile, None
                    change()
                return sealed

            def unseal(self, value: str, *, user_id: str, factor_id: str) -> str:
                return real.unseal(value, user_id=user_id, factor_id=factor_id)

        return Racing(lambda: None, key_id=real.key_id, stage="")  # type: ignore[arg-type, return-value]


def _target(stack: Stack) -> _Stack:
    return _Stack(
        description="the test stack",
        session=boto3.Session(region_name=REGION),
        tables=stack.provisioned.tables,
        parameters=stack.provisioned.parameters,
        stage=parameter_values(stack.template, PARAMS)["Stage"],
        totp_key=stack.provisioned.keys["TotpKey"],
    )


def _sealed_secrets(stack: Stack) -> list[str]:
    return [v["S"] for i in stack.items("UsersTable") for k, v in i.items() if k.startswith("totpSecret#")]


def test_reseal_moves_every_secret_to_the_new_key_seals_plaintext_ones_and_is_idempotent(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    enrolled, token = new_user(api)
    setup = start(api, token).body
    pending = start(api, token).body  # an enrolment under way: its seed is sealed in the tokens table
    assert confirm(api, token, setup, NOW).status == 201
    legacy, legacy_token = new_user(api)
    legacy_seed = promote(stack.dynamodb, stack.table("UsersTable"), legacy_token.split(".")[0])
    assert legacy_seed is not None
    new_key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]

    report = reseal(_target(stack), key=new_key)

    assert (report.resealed, report.sealed_plaintext, report.already, report.failed) == (2, 1, 0, [])
    assert len(_sealed_secrets(stack)) == 2
    assert all(stack.sealer.sealed_with(s) == new_key for s in _sealed_secrets(stack))
    [enrol] = [from_item(i) for i in stack.items("TokensTable") if i["pk"]["S"].startswith("ENROL#")]
    assert stack.sealer.sealed_with(enrol["secret"]) == new_key
    assert legacy_seed not in _everything(stack)
    # Run again as the operator runs it: nothing left to do.
    again = run(build_parser().parse_args(["totp", "reseal", "--key", new_key]), lambda: _target(stack))
    assert "resealed from another key: 0\n  sealed (were in plaintext): 0\n  already under it: 3" in again
    # The functions open what was resealed (the sealed form names its key) and seal anew as before.
    frozen.now = NOW + 60
    assert _login_with_code(api, enrolled, setup["secret"], frozen.now).status == 201, "resealed"
    assert _login_with_code(api, legacy, legacy_seed, frozen.now).status == 201, "was plaintext"
    assert confirm(api, token, pending, frozen.now, name="Tablet").status == 201, "pending"


def test_reseal_never_brings_back_a_factor_removed_while_it_ran(
    api: Api, stack: Stack, frozen: Clock
) -> None:
    _, token = new_user(api)
    setup = start(api, token).body
    factor = confirm(api, token, setup, NOW).body["id"]
    new_key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    target = _target(stack)

    def removed() -> None:  # the owner removes the factor between the run's read and its write
        stack.dynamodb.update_item(
            TableName=stack.table("UsersTable"),
            Key={"pk": {"S": f"USER#{token.split('.')[0]}"}},
            UpdateExpression="REMOVE secondFactors.#f, #s",
            ExpressionAttributeNames={"#f": factor, "#s": f"totpSecret#{factor}"},
        )

    target.meanwhile = removed
    report = reseal(target, key=new_key)

    assert (report.raced, report.resealed, report.failed) == (1, 0, [])
    [user] = [from_item(i) for i in stack.items("UsersTable") if i["pk"]["S"].startswith("USER#")]
    assert factor not in user["secondFactors"]
    assert not [k for k in user if k.startswith("totpSecret#")]
