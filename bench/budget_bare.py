"""The peers of the performance budgets: bare Lambda handlers that import boto3, create a DynamoDB
client on their first request and make the same DynamoDB calls as the Nimbus request they stand
beside, with nothing of ours around them (no routing, checks, logging, metrics or runtime config).

- ``lambda_handler``: one BatchGetItem of the keys in its body, what GET /users/me reads.
- ``login_handler``: what POST /login does with DynamoDB and argon2: the per-IP counter's
  UpdateItem, the username Query, argon2's verify of the stored hash, and the session's
  TransactWriteItems, every request taken from its body.
"""

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
    """One BatchGetItem of the RequestItems in the body; 200 with the items found."""
    request = json.loads(event["body"])
    found = _dynamodb().batch_get_item(RequestItems=request["RequestItems"])
    return {"statusCode": 200, "body": json.dumps(found["Responses"])}


def login_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Count the attempt, find the user, verify the password, write the session; 201."""
    request = json.loads(event["body"])
    dynamodb = _dynamodb()
    dynamodb.update_item(**request["counter"])
    found = dynamodb.query(**request["query"])["Items"]
    _hasher().verify(found[0]["passwordHash"]["S"], request["password"])
    dynamodb.transact_write_items(**request["transaction"])
    return {"statusCode": 201, "body": json.dumps({"ok": True})}
