"""Adapters: the only code that talks to AWS (boto3), as classes built from ``(client, table name)``
that implement the ports of ``nimbus_core.domain`` (``ports`` and the ``*_ports`` modules) and turn
botocore's errors into domain errors (the users table's store in parts by concern: ``users`` and
the ``user_*`` modules); the production container and the SnapStart hooks.

May import: platform, domain.
"""
