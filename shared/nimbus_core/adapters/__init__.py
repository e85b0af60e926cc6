"""Adapters: the only code that talks to AWS (boto3), as classes built from ``(client, table name)``
that implement the ports of ``nimbus_core.domain.ports`` and turn botocore's errors into domain
errors; the production container and the SnapStart hooks.

May import: platform, domain.
"""
