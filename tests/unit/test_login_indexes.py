"""The login lookups copy exactly what a user read from them needs, and never a sealed secret.

Login (and the recovery function) read the user from UsernameLookup/EmailLookup in one round trip
and use every attribute of it but the sealed TOTP secrets, which only checking a code reads (from
the table). An INCLUDE projection names what it copies: a user attribute added later and not named
there would read as its default from the index, so the list must be every attribute of ``User``
but those stored one attribute per entry (``PREFIXED``: the sealed secrets)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import boto3
from moto import mock_aws

from nimbus_core.adapters.items import stored_name
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import EMAIL_LOOKUP, USERNAME_LOOKUP, DynamoUsers
from nimbus_core.domain.models import PREFIXED, User
from nimbus_core.platform.ids import new_id
from nimbus_tools.local.provision import create_tables
from nimbus_tools.template import load_template, resolver

TEMPLATE = load_template()
UPGRADE = ["add-username-lookup", "drop-username-index", "add-email-lookup", "done"]


def _users_table(upgrade: str = "done") -> dict[str, Any]:
    """The users table's properties as deployed with ``LoginLookupUpgrade=upgrade``."""
    names = resolver(TEMPLATE, {"LoginLookupUpgrade": upgrade})
    table: dict[str, Any] = names.resolve(TEMPLATE["Resources"]["UsersTable"]["Properties"])
    return table


USERS = _users_table()


def _indexes(upgrade: str = "done") -> dict[str, dict[str, Any]]:
    return {i["IndexName"]: i for i in _users_table(upgrade)["GlobalSecondaryIndexes"]}


def test_the_upgrade_from_the_old_indexes_changes_one_index_per_deploy_and_keeps_a_username_lookup() -> None:
    """CloudFormation creates or deletes one index per update: each step of LoginLookupUpgrade,
    from the indexes of older releases to the default, is one creation or one deletion."""
    states = [{"CreatedIndex", "UsernameIndex", "EmailIndex"}, *(set(_indexes(step)) for step in UPGRADE)]
    for before, after in itertools.pairwise(states):
        assert len(before ^ after) == 1, (before, after)
    assert states[-1] == {"CreatedIndex", "UsernameLookup", "EmailLookup"}
    assert all("UsernameLookup" in state or "UsernameIndex" in state for state in states)


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
    template = copy.deepcopy(TEMPLATE)
    table = template["Resources"]["UsersTable"]["Properties"] = copy.deepcopy(USERS)
    indexes = table["GlobalSecondaryIndexes"]
    indexes[:] = [i for i in indexes if i["IndexName"] not in {USERNAME_LOOKUP, EMAIL_LOOKUP}]
    keys = table["AttributeDefinitions"]
    keys[:] = [k for k in keys if k["AttributeName"] not in {"usernameKey", "emailKey"}]
    # Empty moto before and after, even inside another module's session mock (nested mocks share
    # data): tables of the template's names left behind would pass for that stack's own.
    with mock_aws() as mocked:
        mocked.reset()
        try:
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
        finally:
            mocked.reset()
