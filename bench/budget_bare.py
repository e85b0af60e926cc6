"""The baseline of the performance budgets: a Lambda handler that imports boto3, creates a DynamoDB
client on its first request and makes one BatchGetItem, the request's keys taken from its body.

It is what the cheapest Python function reading a session and its user from DynamoDB costs; Nimbus
answers GET /users/me with that same one BatchGetItem (plus routing, checks and the runtime config).
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


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One BatchGetItem of the RequestItems in the body; 200 with the items found."""
    request = json.loads(event["body"])
    found = _dynamodb().batch_get_item(RequestItems=request["RequestItems"])
    return {"statusCode": 200, "body": json.dumps(found["Responses"])}
