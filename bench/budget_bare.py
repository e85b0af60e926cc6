"""The peers of the performance budgets: bare boto3 Lambda handlers sending the requests Nimbus sent."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import boto3


@cache
def session() -> boto3.session.Session:
    """The boto3 session, created once per container (the bench hooks it before the first call)."""
    return boto3.session.Session()


@cache
def _dynamodb() -> Any:
    return session().client("dynamodb")


@cache
def _hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher()


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The BatchGetItem in the body; 200 with the items found."""
    found = _dynamodb().batch_get_item(**json.loads(event["body"])["BatchGetItem"])
    return {"statusCode": 200, "body": json.dumps(found["Responses"])}


def login_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Count the attempt, find the user, verify the password, write the session; 201."""
    request = json.loads(event["body"])
    dynamodb = _dynamodb()
    dynamodb.update_item(**request["UpdateItem"])
    found = dynamodb.query(**request["Query"])["Items"]
    _hasher().verify(found[0]["passwordHash"]["S"], request["password"])
    dynamodb.transact_write_items(**request["TransactWriteItems"])
    return {"statusCode": 201, "body": json.dumps({"ok": True})}
