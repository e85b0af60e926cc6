"""The baseline for import time: a Lambda handler that imports boto3 and nothing else.

Every Nimbus function needs boto3, so "at most 2x this" measures what our own code and the DepsLayer
add on top of the cheapest possible Python function that talks to AWS.
"""

from typing import Any

import boto3


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Answer 200 with the boto3 version (referencing boto3 keeps the import honest)."""
    return {"statusCode": 200, "body": boto3.__version__}
