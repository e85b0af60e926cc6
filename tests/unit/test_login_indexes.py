"""The login lookups copy exactly what a user read from them needs, and never a sealed secret.

Login (and the recovery function) read the user from UsernameLookup/EmailLookup in one round trip
and use every attribute of it but the sealed TOTP secrets, which only checking a code reads (from
the table). An INCLUDE projection names what it copies: a user attribute added later and not named
there would read as its default from the index, so the list must be every attribute of ``User``
but those stored one attribute per entry (``PREFIXED``: the sealed secrets)."""

from __future__ import annotations

import copy
import dataclasses

import boto3
from moto import mock_aws

from nimbus_core.adapters.items import stored_name
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import EMAIL_LOOKUP, USERNAME_LOOKUP, DynamoUsers
from nimbus_core.domain.models import PREFIXED, User
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.provision import create_tables
from nimbus_tools.template import load_template

USERS = load_template()["Resources"]["UsersTable"]["Properties"]


def _indexes() -> dict[str, dict[str, object]]:
    return {i["IndexName"]: i for i in USERS["GlobalSecondaryIndexes"]}


def test_the_login_lookups_copy_every_user_attribute_but_the_sealed_secrets() -> None:
    wanted = {stored_name(f.name) for f in dataclasses.fields(User) if not f.metadata.get(PREFIXED)}
    for name in (USERNAME_LOOKUP, EMAIL_LOOKUP):
        projection = _indexes()[name]["Projection"]
        assert isinstance(projection, dict)
        assert projection["ProjectionType"] == "INCLUDE", name
        assert set(projection["NonKeyAttributes"]) == wanted, name
        assert len(projection["NonKeyAttributes"]) == len(wanted), f"{name} names an attribute twice"


def test_no_index_of_the_users_table_copies_every_attribute() -> None:
    assert all(i["Projection"]["ProjectionType"] != "ALL" for i in USERS["GlobalSecondaryIndexes"])


def test_the_sealed_secrets_are_stored_under_names_no_projection_lists() -> None:
    prefixed = [f.metadata[PREFIXED] for f in dataclasses.fields(User) if f.metadata.get(PREFIXED)]
    assert prefixed == ["totpSecret#"]
    for index in USERS["GlobalSecondaryIndexes"]:
        named = index["Projection"].get("NonKeyAttributes", [])
        assert not [a for a in named if a.startswith("totpSecret")], index["IndexName"]


def test_login_finds_a_user_while_the_lookups_are_not_there_yet() -> None:
    """An upgrade creates the lookups one deploy at a time and they backfill (docs/operations.md):
    meanwhile a lookup that is missing is a miss, and the claim item finds the user."""
    template = copy.deepcopy(load_template())
    table = template["Resources"]["UsersTable"]["Properties"]
    indexes = table["GlobalSecondaryIndexes"]
    indexes[:] = [i for i in indexes if i["IndexName"] not in {USERNAME_LOOKUP, EMAIL_LOOKUP}]
    keys = table["AttributeDefinitions"]
    keys[:] = [k for k in keys if k["AttributeName"] not in {"usernameKey", "emailKey"}]
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        users = DynamoUsers(client, create_tables(client, template)["UsersTable"])
        user = User(
            id=new_id(),
            username="Lois",
            email="lois@example.com",
            password_hash="x",
            created_at="2026-01-01T00:00:00.000Z",
            updated_at="2026-01-01T00:00:00.000Z",
            domain="nimbus.test",
        )
        DynamoTransactor(client).commit(users.create_ops(user))
        assert users.find_by_username("lois") == user
        assert users.find_by_email("lois@example.com") == user
        assert users.find_by_username("lois", index_only=True) is None
